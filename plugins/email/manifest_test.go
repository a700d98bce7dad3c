package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/manifests"
)

// TestManifest proves manifests/email.toml and this module agree: the
// same operations, each declared policy backed by the entry point it needs,
// every config key the connector reads declared, and the input schemas
// accepting what the connector accepts and refusing a smuggled key.
func TestManifest(t *testing.T) {
	m, err := manifests.Load(filepath.Join("..", "..", "manifests", "email.toml"))
	if err != nil {
		t.Fatal(err)
	}
	checkManifest(t, m)
	for _, k := range []string{"base_url", "default_from", "basic_auth"} {
		if !slices.Contains(m.Capabilities.Config, k) {
			t.Errorf("config key %q used but not declared", k)
		}
	}
	valid := map[string][]string{
		"send": {sendJSON, `{"to":"a@b.c","subject":"s","html":"<p>x</p>"}`,
			`{"to":["a@b.c"],"cc":"d@e.f","subject":"s","text":"t","from":"x@y.z"}`},
		"release_message": {`{"id":"MP0001","to":"a@b.c"}`, `{"id":"abcXYZ09","to":["a@b.c","d@e.f"]}`},
		"get_message":     {`{"id":"MP0001"}`},
		"search_messages": {`{"query":"tag:x"}`, `{"query":"x","limit":50}`},
	}
	invalid := map[string][]string{
		"send": {
			`{"to":"a@b.c","subject":"s","text":"t","key":"k"}`,
			`{"to":"a@b.c","subject":"s","text":"t","idempotency_key":"k"}`,
			`{"to":"a@b.c","subject":"s"}`,
			`{"to":[],"subject":"s","text":"t"}`,
		},
		"release_message": {`{"id":"../x","to":"a@b.c"}`, `{"id":"MP1"}`},
		"get_message":     {`{"id":"a/b"}`},
		"search_messages": {`{"query":""}`, `{"query":"x","limit":51}`},
	}
	checkSchemas(t, m, valid, invalid)
}

func checkManifest(t *testing.T, m *manifests.Manifest) {
	t.Helper()
	d := guest.Describe()
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

func checkSchemas(t *testing.T, m *manifests.Manifest, valid, invalid map[string][]string) {
	t.Helper()
	for name, cases := range valid {
		op, ok := m.Operation(name)
		if !ok {
			t.Fatalf("no operation %q", name)
		}
		for _, args := range cases {
			if err := op.ValidateArgs([]byte(args)); err != nil {
				t.Errorf("%s: schema rejects %s: %v", name, args, err)
			}
		}
	}
	for name, cases := range invalid {
		op, _ := m.Operation(name)
		for _, args := range cases {
			if err := op.ValidateArgs([]byte(args)); err == nil {
				t.Errorf("%s: schema accepts %s", name, args)
			}
		}
	}
}
