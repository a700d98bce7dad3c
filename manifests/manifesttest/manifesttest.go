// Package manifesttest holds the checks a connector's tests run to prove
// that its manifest tells the truth about its module: the same operations,
// each declared recovery policy backed by the entry point it needs, and
// input schemas that accept what the connector accepts and refuse what it
// must never see.
package manifesttest

import (
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

// CheckManifest fails t unless m and the module described by d (in a
// connector's native tests, guest.Describe()) declare the same operations
// and every policy has its entry point: a read answers execute,
// idempotent-retry has execute_with_key, reconcile has a reconcile export,
// and no external operation lacks a policy.
func CheckManifest(t testing.TB, m *manifests.Manifest, d abi.Description) {
	t.Helper()
	if len(d.Operations) != len(m.Operations) {
		t.Errorf("module has %d operations, manifest %d", len(d.Operations), len(m.Operations))
	}
	for _, op := range m.Operations {
		info, ok := d.Operation(op.Name)
		if !ok {
			t.Errorf("manifest operation %q not implemented", op.Name)
			continue
		}
		switch {
		case op.Effect == manifests.EffectRead && !info.Execute:
			t.Errorf("%s: a read must answer execute", op.Name)
		case op.Recovery == manifests.PolicyIdempotentRetry && !info.ExecuteWithKey:
			t.Errorf("%s: idempotent-retry without execute_with_key", op.Name)
		case op.Recovery == manifests.PolicyReconcile && !info.Reconcile:
			t.Errorf("%s: reconcile without a reconcile export", op.Name)
		case op.Effect == manifests.EffectExternal && op.Recovery == "":
			t.Errorf("%s: external operation without a policy", op.Name)
		}
	}
}

// CheckSchemas fails t unless each operation's input schema accepts every
// argument document in valid and refuses every one in invalid (both keyed
// by operation name; an unknown name is fatal).
func CheckSchemas(t testing.TB, m *manifests.Manifest, valid, invalid map[string][]string) {
	t.Helper()
	check := func(cases map[string][]string, wantOK bool) {
		for name, docs := range cases {
			op, ok := m.Operation(name)
			if !ok {
				t.Fatalf("no operation %q", name)
			}
			for _, args := range docs {
				err := op.ValidateArgs([]byte(args))
				switch {
				case wantOK && err != nil:
					t.Errorf("%s: schema rejects %s: %v", name, args, err)
				case !wantOK && err == nil:
					t.Errorf("%s: schema accepts %s", name, args)
				}
			}
		}
	}
	check(valid, true)
	check(invalid, false)
}
