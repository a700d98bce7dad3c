package manifesttest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

// recorder is a testing.TB that keeps what the checks report.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

const manifest = `
[connector]
name = "shop"
version = "0.1.0"
abi = 1
module = "shop.wasm"

[[operation]]
name = "charge"
description = "Charge."
effect = "external"
recovery = "reconcile"
input_schema = '{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}'
`

func TestChecksReportLies(t *testing.T) {
	m, err := manifests.Parse("shop.toml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	honest := abi.Description{ABI: abi.Version, Operations: []abi.OperationInfo{{Name: "charge", Execute: true, Reconcile: true}}}
	r := &recorder{TB: t}
	CheckManifest(r, m, honest)
	CheckSchemas(r, m, map[string][]string{"charge": {`{"n":1}`}}, map[string][]string{"charge": {`{"key":"k"}`}})
	if len(r.errs) != 0 {
		t.Fatalf("an honest connector was reported: %v", r.errs)
	}

	noReconcile := abi.Description{ABI: abi.Version, Operations: []abi.OperationInfo{{Name: "charge", Execute: true}}}
	r = &recorder{TB: t}
	CheckManifest(r, m, noReconcile)
	CheckSchemas(r, m, map[string][]string{"charge": {`{"key":"k"}`}}, map[string][]string{"charge": {`{"n":1}`}})
	want := []string{"reconcile without a reconcile export", "schema rejects", "schema accepts"}
	if len(r.errs) != len(want) {
		t.Fatalf("reported %v, want one each of %v", r.errs, want)
	}
	for i, w := range want {
		if !strings.Contains(r.errs[i], w) {
			t.Errorf("report %d = %q, want %q", i, r.errs[i], w)
		}
	}
}
