package crashtest

import (
	"strings"
	"testing"
)

// TestJudgeInFlight is the in-flight row's decision table: the original
// request is held at the provider, the call is re-driven past the retry
// budget, then the held request is released. The row is judged by the
// count once the provider answered the held request, not by an effect
// that appeared while it was held: that effect is the re-dispatch's,
// which a provider deduplicating atomically (a unique field, a key it
// replays) keeps to one; a provider that stores the held request too
// makes two, and fails.
func TestJudgeInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  Row
		// seen is what the call answered while held ("effects:N": the
		// provider gained N while the request was held).
		seen []string
		// answers: the holder told what the provider answered the held
		// request (Row.HeldAnswer).
		answers bool
		// want is a part of the problem, "" for a pass.
		want string
	}{
		{name: "unique field: the re-dispatch made it, the held request is refused",
			row:  Row{Effects: 1, Final: "succeeded", HeldAnswer: 400},
			seen: []string{"pending", "effects:1"}, answers: true},
		{name: "client-chosen key: the held request is replayed",
			row:  Row{Effects: 1, Final: "succeeded", HeldAnswer: 200},
			seen: []string{"pending", "effects:1"}, answers: true},
		{name: "nothing lands while held: the held request makes the one effect",
			row:  Row{Effects: 1, Final: "succeeded", HeldAnswer: 201},
			seen: []string{"pending", "pending", "pending"}, answers: true},
		{name: "no unique constraint: the held request lands as a second effect",
			row:  Row{Effects: 2, Final: "succeeded", HeldAnswer: 200, Duplicate: true},
			seen: []string{"pending", "effects:1"}, answers: true,
			want: "was answered 200 and took effect again: nothing at the provider refuses the duplicate"},
		{name: "two effects, not marked a duplicate",
			row:  Row{Effects: 2, Final: "succeeded", HeldAnswer: 200},
			seen: []string{"effects:1"}, answers: true,
			want: "2 effects after the held request was released, want 1"},
		{name: "the held request never lands",
			row:  Row{Effects: 0, Final: "succeeded", HeldAnswer: 503},
			seen: []string{"pending"}, answers: true,
			want: "0 effects after the held request was released, want 1"},
		{name: "a holder that cannot tell: an effect while held has no final count",
			row:  Row{Effects: 1, Final: "succeeded"},
			seen: []string{"pending", "effects:1"},
			want: "there is no final count to judge it by"},
		{name: "answered failed while the provider was still processing",
			row:  Row{Effects: 1, Final: "succeeded", HeldAnswer: 201},
			seen: []string{"failed"}, answers: true,
			want: "answered failed while the provider was still processing the call"},
		{name: "ended failed though the held request took effect",
			row:  Row{Effects: 1, Final: "failed", HeldAnswer: 201},
			seen: []string{"pending"}, answers: true,
			want: "ended failed though the held request took effect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(judgeInFlight(tc.row, tc.seen, tc.answers), "; ")
			switch {
			case tc.want == "" && got != "":
				t.Errorf("failed a safe design: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
}
