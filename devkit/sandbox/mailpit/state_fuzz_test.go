package mailpit

import (
	"testing"

	"github.com/connhost/connhost/devkit/sandbox/statefile"
)

// FuzzRestoreState feeds arbitrary state files to the loader: it never
// panics, and what it accepts it serves.
func FuzzRestoreState(f *testing.F) {
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"messages":[{"message":{"ID":"a","MessageID":"x","Tags":["T"]},"read":true,"snippet":"s","search_text":"t"}],"tag_names":{"t":"T"},"stats":{"messages_sent":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var st savedState
		if statefile.Decode(b, &st) != nil {
			return
		}
		s := New(Options{})
		s.mu.Lock()
		err := s.restoreLocked(st)
		s.mu.Unlock()
		if err != nil {
			return
		}
		if got := len(s.Messages()); got != len(st.Messages) {
			t.Fatalf("%d messages restored from %d", got, len(st.Messages))
		}
	})
}
