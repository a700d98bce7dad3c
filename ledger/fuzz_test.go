package ledger

import (
	"bytes"
	"testing"
	"time"
)

// FuzzDecodeRecord: decoding arbitrary bytes never panics, and anything
// that decodes re-encodes to bytes that decode to the same encoding
// (decode∘encode is the identity on decoded records).
func FuzzDecodeRecord(f *testing.F) {
	r := dispatchedRecord("a")
	r.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.Outcome = &Outcome{Kind: "ok", Attempt: 1, Result: []byte("{}")}
	r.Approval = &Approval{ID: "ap", Decision: ApprovalApproved}
	if b, err := encodeRecord(r); err == nil {
		f.Add(b)
	}
	if b, err := encodeTombstone(tombstone{ID: "a", State: StateSucceeded}); err == nil {
		f.Add(b)
	}
	f.Add([]byte{1, '{', '}'})
	f.Add([]byte{2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(b)
		if err != nil {
			return
		}
		enc, err := encodeRecord(rec)
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		rec2, err := decodeRecord(enc)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		enc2, err := encodeRecord(rec2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip differs:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzDecodeEvent is FuzzDecodeRecord for events.
func FuzzDecodeEvent(f *testing.F) {
	if b, err := encodeEvent(Event{Seq: 1, ExecutionID: "a", To: StateDispatched, Decision: "intent",
		Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		f.Add(b)
	}
	f.Add([]byte{1, '{', '}'})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := decodeEvent(b)
		if err != nil {
			return
		}
		enc, err := encodeEvent(ev)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		ev2, err := decodeEvent(enc)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		enc2, err := encodeEvent(ev2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip differs:\n%s\n%s", enc, enc2)
		}
	})
}
