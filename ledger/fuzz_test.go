package ledger

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// fullRecord sets every field of a record, so the codec tests cover each.
func fullRecord() Record {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	return Record{
		Version: RecordVersion, ID: "ex_1", Namespace: "ns", SessionID: "s\x001", ToolCallID: "call_1",
		Connector: "payments", Operation: "create_payment", ManifestDigest: "md", ModuleDigest: "wd",
		Effect: "external", Policy: "idempotent-retry", PolicyVersion: "pv",
		Args: []byte(`{"amount":100}`), ArgsDigest: "ad", IdempotencyKey: "key", Resumed: true,
		State: StateRetryWait, Attempt: 2, MaxAttempts: 3,
		CreatedAt: t0, UpdatedAt: t0.Add(time.Second), Deadline: t0.Add(time.Minute), NextAttemptAt: t0.Add(time.Hour),
		Approval: &Approval{ID: "ap", ArgsDigest: "ad", PolicyVersion: "pv", RequestedAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
			Decision: ApprovalApproved, By: "alice", Reason: "ok", DecidedAt: t0.Add(2 * time.Second), ConsumedBy: 1, Signature: "hmac-sha256:k:s", StateNonce: "n1"},
		Outcome:         &Outcome{Kind: "retryable_error", Result: []byte(`{"r":1}`), Receipt: "pi_1", Error: "busy \xff", Source: "connector", Attempt: 2},
		Resolution:      &Resolution{Applied: true, Retry: true, By: "bob", Reason: "checked", At: t0.Add(3 * time.Second)},
		CancelRequested: true, Events: 7, DuplicateWindow: 10 * time.Minute, DuplicateOf: "ex_0", RequestedBy: "agent-runtime",
		IntentDigest: "id", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "vendor=x",
	}
}

func fullEvent() Event {
	return Event{Seq: 3, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), ExecutionID: "ex_1", ToolCallID: "call_1",
		Attempt: -1, From: StateDispatched, To: StateSucceeded, Decision: "outcome", Evidence: "pi_1", Actor: "executor", Reason: "r"}
}

// TestCodecRoundTrip: every field survives the binary encoding, negative
// and zero values included.
func TestCodecRoundTrip(t *testing.T) {
	for _, r := range []Record{fullRecord(), {ID: "x", State: StateDispatched}, func() Record {
		r := fullRecord()
		r.Approval, r.Outcome, r.Resolution = &Approval{}, &Outcome{}, &Resolution{}
		r.Attempt = -5
		return r
	}()} {
		b, err := encodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRecord(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", r, err)
		}
		r.Version = RecordVersion
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
	ev := fullEvent()
	b, err := encodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeEvent(b)
	if err != nil || !reflect.DeepEqual(got, ev) {
		t.Errorf("event round trip: %+v, %v; want %+v", got, err, ev)
	}
	// A time no encoding can carry is refused when writing, not lost.
	r := fullRecord()
	r.Deadline = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := encodeRecord(r); err == nil {
		t.Error("a deadline in year 10000 was encoded")
	}
}

// TestBinaryIsSmaller records what the binary encoding saves on a typical
// dispatched record: it is a fact the write path's cost depends on.
func TestBinaryIsSmaller(t *testing.T) {
	r := fullRecord()
	b, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(r)
	if len(b)*3 > len(j)*2 {
		t.Errorf("binary record is %d bytes, JSON %d: expected at most two thirds", len(b), len(j))
	}
}

// FuzzDecodeRecord: decoding arbitrary bytes never panics; anything that
// decodes re-encodes to bytes that decode to the same record; and a value
// that decodes is the one encoding of its record.
func FuzzDecodeRecord(f *testing.F) {
	if b, err := encodeRecord(fullRecord()); err == nil {
		f.Add(b)
	}
	if b, err := encodeRecord(dispatchedRecord("a")); err == nil {
		f.Add(b)
	}
	if b, err := encodeTombstone(tombstone{ID: "a", State: StateSucceeded}); err == nil {
		f.Add(b)
	}
	f.Add([]byte{2})
	f.Add([]byte{2, 1, 1, 'a', 16, 10, 'd', 'i', 's', 'p', 'a', 't', 'c', 'h', 'e', 'd'})
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
		if !bytes.Equal(enc, b) {
			t.Fatalf("two encodings of one record:\n%x\n%x", b, enc)
		}
		rec2, err := decodeRecord(enc)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		rec.Version = RecordVersion
		if !reflect.DeepEqual(rec, rec2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", rec, rec2)
		}
	})
}

// FuzzDecodeEvent is FuzzDecodeRecord for events.
func FuzzDecodeEvent(f *testing.F) {
	if b, err := encodeEvent(fullEvent()); err == nil {
		f.Add(b)
	}
	f.Add([]byte{2, 1, 1})
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
		if !bytes.Equal(enc, b) {
			t.Fatalf("two encodings of one event:\n%x\n%x", b, enc)
		}
		ev2, err := decodeEvent(enc)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", ev, ev2)
		}
	})
}

// FuzzDecodeConsoleSession: decoding an arbitrary stored console session
// never panics, and one that decodes re-encodes to the same session.
func FuzzDecodeConsoleSession(f *testing.F) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Add(encodeConsoleSession(ConsoleSession{Principal: "rita", Created: now, Expires: now.Add(time.Hour)}))
	f.Add(encodeConsoleSession(ConsoleSession{Principal: "olga", Created: now, Expires: now.Add(time.Hour), Revoked: now.Add(time.Minute)}))
	f.Add([]byte{consoleVersion, '{', '}'})
	f.Add([]byte{})
	k := consoleKey(ConsoleSessionKey("id"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeConsoleSession(k, b)
		if err != nil {
			return
		}
		s2, err := decodeConsoleSession(k, encodeConsoleSession(s))
		if err != nil {
			t.Fatalf("a decoded session does not decode once re-encoded: %v", err)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", s, s2)
		}
	})
}
