package stripe

import (
	"encoding/json"
	"testing"

	"github.com/connhost/connhost/devkit/sandbox/statefile"
)

// FuzzRestoreState feeds arbitrary state files to the loader: it never
// panics, and a state it accepts is saved back to the same state.
func FuzzRestoreState(f *testing.F) {
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"payment_intents":[{"payment_intent":{"id":"pi_1","latest_charge":"ch_1","metadata":{}},"at":"2026-01-02T03:04:05Z","refunded":5}],` +
		`"refunds":[{"id":"re_1","payment_intent":"pi_1"}],"idempotency_keys":[{"scope":"s","fingerprint":"f","created":"2026-01-02T03:04:05Z","status":200,"body":"e30K","request_id":"req_1"}],"stats":{"requests":3}}`))
	f.Add([]byte(`{"version":1,"payment_intents":[{"payment_intent":{"id":"pi_1"}},{"payment_intent":{"id":"pi_1"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var st savedState
		if statefile.Decode(b, &st) != nil {
			return
		}
		s := New(Options{})
		s.mu.Lock()
		err := s.restoreLocked(st)
		if err != nil {
			s.mu.Unlock()
			return
		}
		once := s.snapshotLocked()
		s.mu.Unlock()
		s2 := New(Options{})
		s2.mu.Lock()
		defer s2.mu.Unlock()
		if err := s2.restoreLocked(once); err != nil {
			t.Fatalf("a saved state does not load: %v", err)
		}
		a, _ := json.Marshal(once)
		c, _ := json.Marshal(s2.snapshotLocked())
		if string(a) != string(c) {
			t.Fatalf("state changed across a save:\n%s\n%s", a, c)
		}
	})
}
