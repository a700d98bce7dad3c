package audit

import (
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

// TestVerdictShowsKeyRetention: for an idempotent-retry operation the
// verdict says how long an uncertain call is re-sent with its key (the
// declared retention, at most the host's 24h) and what happens to an
// older one: reconcile when the module exports it, an operator when not.
func TestVerdictShowsKeyRetention(t *testing.T) {
	const base = `[connector]
name = "hooks"
version = "1.0.0"
abi = 1
module = "hooks.wasm"
sha256 = "1111111111111111111111111111111111111111111111111111111111111111"

[capabilities]
http = ["https://hooks.example.com:443"]
%s
[[operation]]
name = "deliver"
description = "Deliver an event to the receiver."
effect = "external"
recovery = "idempotent-retry"
requires_approval = true
input_schema = '{"type": "object", "additionalProperties": false}'
`
	for _, tc := range []struct {
		name, provider string
		reconcile      *bool // nil: the module is not checked
		retention      string
		after          string
	}{
		{"reconcile exported", "", ptr(true), "24h", "the connector's reconcile is asked instead"},
		{"no reconcile", "", ptr(false), "24h", "it becomes recovery_required (the module exports no reconcile for it)"},
		{"module not checked", "", nil, "24h", "reconcile is asked if the module exports it for the operation, else it becomes recovery_required"},
		{"declared shorter", "[provider]\nidempotency_header = \"Idempotency-Key\"\nidempotency_retention = \"2h\"\n", ptr(true), "2h", "within 2h of its intent"},
		{"declared longer", "[provider]\nidempotency_header = \"Idempotency-Key\"\nidempotency_retention = \"72h\"\n", ptr(true), "24h", "within 24h of its intent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := manifests.Parse("hooks.toml", []byte(strings.Replace(base, "%s", tc.provider, 1)))
			if err != nil {
				t.Fatal(err)
			}
			var o Options
			if tc.reconcile != nil {
				o.Facts = func(m *manifests.Manifest) ModuleFacts {
					return ModuleFacts{Found: true, ActualSHA256: m.Connector.SHA256, ABI: abi.Version, Description: &abi.Description{ABI: abi.Version,
						Operations: []abi.OperationInfo{{Name: "deliver", Execute: true, ExecuteWithKey: true, Reconcile: *tc.reconcile}}}}
				}
			}
			v := Audit([]*manifests.Manifest{m}, o).Connectors[0].Operations[0].Verdict
			if v.KeyRetention != tc.retention || !strings.Contains(v.AfterCrash, tc.after) {
				t.Errorf("key retention %q, after a crash %q; want %q and %q", v.KeyRetention, v.AfterCrash, tc.retention, tc.after)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
