package crashtest

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/connhost/connhost/manifests"
)

// TestSetApproval: a variant flips requires_approval of one operation and
// keeps every other byte, the module pin included.
func TestSetApproval(t *testing.T) {
	src, err := os.ReadFile("../../manifests/payments.toml")
	if err != nil {
		t.Fatal(err)
	}
	pin := strings.Repeat("ab", 32)
	if src, err = manifests.SetSHA256(src, pin); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		op    string
		gated bool
	}{
		{"ungate an external operation", "create_payment", false},
		{"keep a gate", "refund_payment", true},
		{"gate a read", "get_payment", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := setApproval(src, tc.op, tc.gated)
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifests.Parse("variant.toml", out)
			if err != nil {
				t.Fatal(err)
			}
			if m.Connector.SHA256 != pin {
				t.Errorf("pin lost: %q", m.Connector.SHA256)
			}
			for _, op := range m.Operations {
				orig, _ := mustParse(t, src).Operation(op.Name)
				want := orig.RequiresApproval
				if op.Name == tc.op {
					want = tc.gated
				}
				if op.RequiresApproval != want {
					t.Errorf("%s: requires_approval %t, want %t", op.Name, op.RequiresApproval, want)
				}
			}
			if tc.op == "refund_payment" && !bytes.Equal(out, src) {
				t.Error("setting the value it already has changed the text")
			}
		})
	}
	if _, err := setApproval(src, "nope", true); err == nil {
		t.Error("unknown operation: no error")
	}
}

func mustParse(t *testing.T, src []byte) *manifests.Manifest {
	t.Helper()
	m, err := manifests.Parse("m.toml", src)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
