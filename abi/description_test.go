package abi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
)

var validDescriptions = []struct {
	name string
	d    abi.Description
}{
	{"no operations", abi.Description{ABI: abi.Version, Operations: []abi.OperationInfo{}}},
	{"execute only", abi.Description{ABI: abi.Version, Operations: []abi.OperationInfo{{Name: "send", Execute: true}}}},
	{"every flag, several operations in order", abi.Description{ABI: abi.Version, Operations: []abi.OperationInfo{
		{Name: "create_payment", ExecuteWithKey: true, Reconcile: true},
		{Name: "get_payment", Execute: true},
		{Name: "refund", Execute: true, ExecuteWithKey: true, Reconcile: true},
	}}},
	{"another abi version is carried, not judged", abi.Description{ABI: 7, Operations: []abi.OperationInfo{{Name: "x", Execute: true}}}},
}

func TestDescriptionRoundTripPreservesOperationsInOrder(t *testing.T) {
	for _, tc := range validDescriptions {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			got, err := abi.DecodeDescription(b)
			if err != nil {
				t.Fatalf("DecodeDescription(%s): %v", b, err)
			}
			if !reflect.DeepEqual(got, tc.d) {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.d)
			}
		})
	}
}

func TestDescriptionWireNamesAreSnakeCase(t *testing.T) {
	b, err := json.Marshal(abi.Description{ABI: 1, Operations: []abi.OperationInfo{{Name: "a", Execute: true, ExecuteWithKey: true, Reconcile: true}}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"abi":1,"operations":[{"name":"a","execute":true,"execute_with_key":true,"reconcile":true}]}`
	if string(b) != want {
		t.Fatalf("wire form\n got %s\nwant %s", b, want)
	}
}

func TestDescriptionOperationFindsByName(t *testing.T) {
	d := validDescriptions[2].d
	op, ok := d.Operation("get_payment")
	if !ok || op != (abi.OperationInfo{Name: "get_payment", Execute: true}) {
		t.Fatalf("Operation(get_payment) = %+v, %v", op, ok)
	}
	if op, ok := d.Operation("missing"); ok || op != (abi.OperationInfo{}) {
		t.Fatalf("Operation(missing) = %+v, %v; want zero, false", op, ok)
	}
}

func TestDecodeDescriptionFailures(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // substring of the error
	}{
		{"empty input", ``, "EOF"},
		{"not JSON", `abi=1`, "invalid character"},
		{"truncated JSON", `{"abi":1,"operations":[`, "unexpected EOF"},
		{"JSON array instead of object", `[]`, "cannot unmarshal array"},
		{"wrong field type", `{"abi":"1"}`, "cannot unmarshal string"},
		{"unknown top-level field", `{"abi":1,"operations":[],"version":2}`, `unknown field "version"`},
		{"unknown operation field", `{"abi":1,"operations":[{"name":"a","execute":true,"idempotent":true}]}`, `unknown field "idempotent"`},
		{"second JSON value", `{"abi":1} {"abi":2}`, "trailing data"},
		{"trailing garbage", `{"abi":1} x`, "trailing data"},
		// Regression: json.Decoder.More reports false for a stray closing
		// delimiter, so these used to decode as valid descriptions.
		{"trailing closing bracket", `{"abi":1,"operations":[]}]`, "trailing data"},
		{"trailing closing brace", `{"abi":1,"operations":[]}}`, "trailing data"},
		{"operation without name", `{"abi":1,"operations":[{"execute":true}]}`, "operation 0 has no name"},
		{"operation with empty name", `{"abi":1,"operations":[{"name":"a","execute":true},{"name":"","execute":true}]}`, "operation 1 has no name"},
		{"duplicate operation name", `{"abi":1,"operations":[{"name":"a","execute":true},{"name":"a","execute_with_key":true}]}`, `operation "a" listed twice`},
		{"operation with neither execute nor execute_with_key", `{"abi":1,"operations":[{"name":"a","reconcile":true}]}`, "implements neither execute nor execute_with_key"},
		{"operation with every flag false", `{"abi":1,"operations":[{"name":"a","execute":false,"execute_with_key":false}]}`, "implements neither"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := abi.DecodeDescription([]byte(tc.in))
			if err == nil {
				t.Fatalf("DecodeDescription(%s) = %+v, want error containing %q", tc.in, d, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "abi: decode description: ") {
				t.Fatalf("err = %q, want prefix %q and %q", err, "abi: decode description: ", tc.wantErr)
			}
			if !reflect.DeepEqual(d, abi.Description{}) {
				t.Fatalf("failed decode returned a partial value %+v", d)
			}
		})
	}
}
