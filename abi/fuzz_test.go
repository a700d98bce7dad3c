package abi_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/connhost/connhost/abi"
)

// The fuzz targets check every decoder of bytes that cross the guest
// boundary: decoding never panics, and whatever decodes re-encodes to a value
// that decodes equal. The binary envelopes have one encoding per value, so
// re-encoding must also reproduce the input byte for byte.

func FuzzDecodeOutcome(f *testing.F) {
	for _, tc := range validOutcomes {
		f.Add(tc.o.AppendBinary(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{0xC1})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := abi.DecodeOutcome(b)
		if err != nil {
			return
		}
		if !o.Kind.Valid() {
			t.Fatalf("decoded invalid kind %d", o.Kind)
		}
		if o.Result != nil && !json.Valid(o.Result) {
			t.Fatalf("decoded result that is not JSON: %q", o.Result)
		}
		again := o.AppendBinary(nil)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs from input\n  in %x\n out %x", b, again)
		}
		o2, err := abi.DecodeOutcome(again)
		if err != nil {
			t.Fatalf("re-encoded outcome does not decode: %v", err)
		}
		if !outcomeEqual(o, o2) {
			t.Fatalf("round trip: %+v != %+v", o, o2)
		}
	})
}

func FuzzDecodeHTTPRequest(f *testing.F) {
	for _, tc := range validRequests {
		f.Add(tc.q.AppendBinary(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{0xD1})
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := abi.DecodeHTTPRequest(b)
		if err != nil {
			return
		}
		again := q.AppendBinary(nil)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs from input\n  in %x\n out %x", b, again)
		}
		q2, err := abi.DecodeHTTPRequest(again)
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if !requestEqual(q, q2) {
			t.Fatalf("round trip: %+v != %+v", q, q2)
		}
	})
}

func FuzzDecodeHTTPResponse(f *testing.F) {
	for _, tc := range validResponses {
		f.Add(tc.p.AppendBinary(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{0xD2})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := abi.DecodeHTTPResponse(b)
		if err != nil {
			return
		}
		if p.Err > abi.HTTPInvalid || p.Status < 0 || p.Status > 999 {
			t.Fatalf("decoded out-of-range response: err %d status %d", p.Err, p.Status)
		}
		again := p.AppendBinary(nil)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs from input\n  in %x\n out %x", b, again)
		}
		p2, err := abi.DecodeHTTPResponse(again)
		if err != nil {
			t.Fatalf("re-encoded response does not decode: %v", err)
		}
		if !responseEqual(p, p2) {
			t.Fatalf("round trip: %+v != %+v", p, p2)
		}
	})
}

func FuzzDecodeDescription(f *testing.F) {
	for _, tc := range validDescriptions {
		b, err := json.Marshal(tc.d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"abi":1,"operations":[{"name":"a","execute":true},{"name":"b","execute_with_key":true,"reconcile":true}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := abi.DecodeDescription(b)
		if err != nil {
			return
		}
		// What decodes is exactly one JSON value: nothing before or after it.
		if !json.Valid(b) {
			t.Fatalf("accepted input that is not a single JSON value: %q", b)
		}
		seen := map[string]bool{}
		for _, op := range d.Operations {
			if op.Name == "" || seen[op.Name] || (!op.Execute && !op.ExecuteWithKey) {
				t.Fatalf("accepted invalid operation %+v in %+v", op, d)
			}
			seen[op.Name] = true
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		d2, err := abi.DecodeDescription(again)
		if err != nil {
			t.Fatalf("re-encoded description %s does not decode: %v", again, err)
		}
		if !reflect.DeepEqual(d, d2) {
			t.Fatalf("round trip: %+v != %+v", d, d2)
		}
	})
}
