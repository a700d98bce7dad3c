package testenv

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skip/Fatal instead of stopping.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

// Without Mailpit a test fails with the build error; it may skip only
// locally and only when asked to.
func TestUnavailablePolicy(t *testing.T) {
	cases := []struct {
		name, ci, skip string
		wantSkip       bool
	}{
		{"local default fails", "", "", false},
		{"local opt-in skips", "", "1", true},
		{"CI fails even with the opt-in", "true", "1", false},
		{"CI fails", "1", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CI", c.ci)
			t.Setenv(EnvSkipMailpit, c.skip)
			r := &recorder{TB: t}
			unavailable(r, errors.New("go build: boom"))
			if r.skipped != c.wantSkip || r.failed == c.wantSkip {
				t.Fatalf("skipped=%v failed=%v", r.skipped, r.failed)
			}
			if want := "go build: boom"; !strings.Contains(r.msg, want) {
				t.Fatalf("message %q lacks the build error", r.msg)
			}
		})
	}
}
