package console

import (
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/ledger"
)

// TestTrailFoldsRepeats: a provider's error repeated by every retry is
// shown once in the trail; later rows refer to the row that shows it.
// Short texts, and a text that differs, are shown as they are. Every cell
// carries its column's name, which a narrow screen shows beside it.
func TestTrailFoldsRepeats(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	const boom = "stripe: 503 Service Unavailable: upstream connect error or disconnect/reset before headers"
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []ledger.Event{
		{Seq: 1, Time: t0, To: ledger.StateDispatched, Decision: "dispatch", Actor: "executor"},
		{Seq: 2, Time: t0, From: ledger.StateDispatched, To: ledger.StateRetryWait, Decision: "retry_scheduled", Evidence: boom, Actor: "executor", Reason: "ok"},
		{Seq: 3, Time: t0, From: ledger.StateRetryWait, To: ledger.StateRetryWait, Decision: "retry_scheduled", Evidence: boom, Actor: "executor", Reason: "ok"},
		{Seq: 4, Time: t0, From: ledger.StateRetryWait, To: ledger.StateFailed, Decision: "outcome", Evidence: boom + " (last)", Actor: "executor", Reason: boom},
	}
	var b strings.Builder
	if err := e.ui.pages["execution"].ExecuteTemplate(&b, "trail", evs); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, boom+"<"); n != 1 {
		t.Errorf("the repeated error is shown %d times, want once:\n%s", n, page)
	}
	for _, want := range []string{
		`<td data-label="evidence"><span class="same">same as #2</span></td>`, // row 3's evidence
		`<td data-label="reason"><span class="same">same as #2</span></td>`,   // row 4's reason repeats row 2's evidence
		boom + " (last)",                  // a text that differs is shown
		`<td data-label="reason">ok</td>`, // short texts are not folded
		`<td data-label="actor">executor</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the trail lacks %s:\n%s", want, page)
		}
	}
}
