package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
)

// TestWaitNotifyReportsInlineRetries: a caller that keeps a client waiting
// hears of every retry Execute waits for inline, with the attempt that
// failed and when the next one is due.
func TestWaitNotifyReportsInlineRetries(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	h.prov.inject("503", "503")
	var seen []host.Result
	ctx := host.WithWaitNotify(context.Background(), func(r host.Result) { seen = append(seen, r) })
	res, err := h.ex.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Len(t, seen, 2, "one notice per retry waited for")
	for i, r := range seen {
		require.Equal(t, host.StatusPending, r.Status)
		require.Equal(t, i+1, r.Attempt)
		require.False(t, r.NextAttemptAt.IsZero())
		require.Contains(t, r.Error, "503")
	}

	// Without the hook nothing changes.
	h.prov.inject("503")
	res = h.exec(call("s1", "c2", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, res.Status)
}

// TestNoteIsRecordedOnTheFirstEvent: Call.Note is the reason of a new
// execution's first audit event, and a call sent again does not add it.
func TestNoteIsRecordedOnTheFirstEvent(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	c := call("s1", "c1", `{"n":1}`)
	c.Note = "identity derived per request"
	res := h.exec(c)
	require.Equal(t, host.StatusSucceeded, res.Status)
	_, evs, err := h.ex.Get(context.Background(), res.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, "identity derived per request", evs[0].Reason)
	for _, ev := range evs[1:] {
		require.NotContains(t, ev.Reason, "per request")
	}
	c.Note = "another note"
	res = h.exec(c)
	_, evs2, err := h.ex.Get(context.Background(), res.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, len(evs), len(evs2), "a recorded call adds no event")
	require.Equal(t, "identity derived per request", evs2[0].Reason)
}
