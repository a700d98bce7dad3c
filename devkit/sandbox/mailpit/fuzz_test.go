package mailpit

import (
	"testing"
	"time"
)

// Search strings are untrusted: compiling and evaluating one never panics.
func FuzzCompileSearch(f *testing.F) {
	for _, s := range []string{`message-id:"<a@b>"`, "tag:x -tag:y", "!is:read subject:", `"unterminated`, "-", "to:a,b;c"} {
		f.Add(s)
	}
	m := &message{Message: Message{ID: "x", MessageID: "a@b", From: &Address{Address: "f@x"}, Tags: []string{"x"}}, created: time.Unix(0, 0)}
	f.Fuzz(func(t *testing.T, q string) {
		compileSearch(q)(m)
	})
}
