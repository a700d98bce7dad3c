package host_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// The duplicate-intent guard (duplicate_window in the manifest): a runtime
// that re-issues a call under a new tool-call id (its own retry after a
// lost answer, or a model told "please try again") gets a new execution
// id, which the same-id deduplication cannot recognise. The provider
// counts what really happened.

func guardedHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarness(t, "idempotent-retry", append([]harnessOpt{withDedup(), withApplyField("duplicate_window", "10m")}, opts...)...)
}

func (h *harness) approve(res host.Result) host.Result {
	h.t.Helper()
	out, err := h.ex.Approve(context.Background(), res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.ArgsDigest, Reason: "meant twice"})
	require.NoError(h.t, err)
	return out
}

// TestDuplicateHeldAndReleased: the same arguments under a new tool-call
// id in the same session are held for a human (zero effects), the text
// of the trail names the earlier execution, and approving the held call
// runs it (exactly one more effect). Without the guard the re-issue runs
// at once.
func TestDuplicateHeldAndReleased(t *testing.T) {
	t.Run("unguarded", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_1", `{"n":1}`)).Status)
		require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_2", `{"n":1}`)).Status)
		require.Equal(t, 2, h.prov.count(), "two effects: the re-issue ran")
	})
	h := guardedHarness(t)
	first := h.exec(call("s1", "call_1", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, first.Status)
	require.Equal(t, 1, h.prov.count())

	h.advance(time.Minute)
	again := h.exec(call("s1", "call_2", `{"n":1}`))
	require.Equal(t, host.StatusAwaitingApproval, again.Status)
	require.Equal(t, first.ExecutionID, again.DuplicateOf)
	require.NotNil(t, again.Approval)
	require.Equal(t, 1, h.prov.count(), "held: nothing dispatched")
	_, evs, err := h.ex.Get(context.Background(), again.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, string(host.DecisionDuplicateHeld), evs[0].Decision)
	require.Contains(t, evs[0].Evidence, "possible duplicate of "+first.ExecutionID+" (succeeded, tool call call_1")
	require.Contains(t, evs[0].Evidence, "within the duplicate window of 10m")

	// The runtime re-drives the held call: it stays held.
	require.Equal(t, host.StatusAwaitingApproval, h.exec(call("s1", "call_2", `{"n":1}`)).Status)
	require.Equal(t, 1, h.prov.count())

	// A third re-issue is held as a repeat of the first.
	third := h.exec(call("s1", "call_3", `{"n":1}`))
	require.Equal(t, host.StatusAwaitingApproval, third.Status)
	require.Equal(t, first.ExecutionID, third.DuplicateOf)

	// A human approves the second: re-driven, it runs, once.
	h.approve(again)
	done := h.exec(call("s1", "call_2", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, done.Status)
	require.Equal(t, 2, h.prov.count(), "exactly one more effect")
	require.True(t, h.exec(call("s1", "call_2", `{"n":1}`)).Recorded)
	require.Equal(t, 2, h.prov.count())

	// And rejects the third.
	_, err = h.ex.Reject(context.Background(), third.Approval.ID, host.Decision{By: "rita", Reason: "a repeat"})
	require.NoError(t, err)
	require.Equal(t, host.StatusRejected, h.exec(call("s1", "call_3", `{"n":1}`)).Status)
	require.Equal(t, 2, h.prov.count())
}

// TestDuplicateWindowEnds: a repeat created more than the window after
// the earlier call runs.
func TestDuplicateWindowEnds(t *testing.T) {
	h := guardedHarness(t)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_1", `{"n":1}`)).Status)
	h.advance(10 * time.Minute)
	edge := h.exec(call("s1", "call_2", `{"n":1}`))
	require.Equal(t, host.StatusAwaitingApproval, edge.Status, "at the window's end still held")
	_, err := h.ex.Reject(context.Background(), edge.Approval.ID, host.Decision{By: "rita"})
	require.NoError(t, err)
	h.advance(time.Second)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_3", `{"n":1}`)).Status)
	require.Equal(t, 2, h.prov.count())
}

// TestDuplicateScope: another session, other arguments, or an earlier
// call that failed (nothing happened: repeating it is right) are not held.
func TestDuplicateScope(t *testing.T) {
	h := guardedHarness(t)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_1", `{"n":1}`)).Status)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s2", "call_1", `{"n":1}`)).Status, "another session")
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_2", `{"n":2}`)).Status, "other arguments")
	other := call("s1", "call_3", `{"n":1}`)
	other.Namespace = "tenant-b"
	require.Equal(t, host.StatusSucceeded, h.exec(other).Status, "another namespace")
	require.Equal(t, 4, h.prov.count())

	h.prov.inject("400") // a permanent refusal: nothing applied
	failed := h.exec(call("s1", "call_4", `{"n":3}`))
	require.Equal(t, host.StatusFailed, failed.Status)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_5", `{"n":3}`)).Status, "the repeat of a failed call runs")
	require.Equal(t, 5, h.prov.count())
}

// TestConcurrentDuplicates: many re-issues of one call under new ids at
// once (a runtime's retries racing each other): one runs, every other is
// held, one effect.
func TestConcurrentDuplicates(t *testing.T) {
	h := guardedHarness(t)
	const n = 16
	results := make([]host.Result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := h.ex.Execute(context.Background(), call("s1", fmt.Sprint("call_", i), `{"n":7}`))
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	close(start)
	wg.Wait()
	ran, held := "", 0
	for _, r := range results {
		switch r.Status {
		case host.StatusSucceeded:
			require.Empty(t, ran, "two ran")
			ran = r.ExecutionID
		case host.StatusAwaitingApproval:
			held++
		default:
			t.Fatalf("unexpected %s", r.Status)
		}
	}
	require.NotEmpty(t, ran)
	require.Equal(t, n-1, held)
	for _, r := range results {
		if r.Status == host.StatusAwaitingApproval {
			require.Equal(t, ran, r.DuplicateOf)
		}
	}
	require.Equal(t, 1, h.prov.count())
}

// TestDuplicateOfACallInFlight: a re-issue while the first call is still
// at the provider (its answer lost to the runtime, say) is held, and so
// it is when the operation would answer repeats: there is no outcome to
// answer with yet.
func TestDuplicateOfACallInFlight(t *testing.T) {
	for _, answer := range []bool{false, true} {
		t.Run(fmt.Sprint("answer=", answer), func(t *testing.T) {
			opts := []harnessOpt{}
			if answer {
				opts = append(opts, withApplyField("on_duplicate", "answer"))
			}
			h := guardedHarness(t, opts...)
			h.prov.inject("hold")
			done := make(chan host.Result, 1)
			go func() {
				res, _ := h.ex.Execute(context.Background(), call("s1", "call_1", `{"n":1}`))
				done <- res
			}()
			h.prov.waitHeld(t)
			again := h.exec(call("s1", "call_2", `{"n":1}`))
			require.Equal(t, host.StatusAwaitingApproval, again.Status)
			require.NotEmpty(t, again.DuplicateOf)
			h.prov.releaseHeld()
			require.Equal(t, host.StatusSucceeded, (<-done).Status)
			require.Equal(t, 1, h.prov.count())
		})
	}
}

// TestDuplicateAnswered: where the operation declares on_duplicate =
// "answer", a repeat of a succeeded call is answered with its outcome
// (its receipt and result), recorded as a succeeded execution of its
// own; nothing is dispatched, and the same ids again answer the same.
func TestDuplicateAnswered(t *testing.T) {
	h := guardedHarness(t, withApplyField("on_duplicate", "answer"))
	first := h.exec(call("s1", "call_1", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, first.Status)
	again := h.exec(call("s1", "call_2", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, again.Status)
	require.Equal(t, first.ExecutionID, again.DuplicateOf)
	require.Equal(t, first.Receipt, again.Receipt)
	require.JSONEq(t, string(first.Result), string(again.Result))
	require.Equal(t, ledger.OutcomeSourceDuplicate, again.Source)
	require.Equal(t, 0, again.Attempt)
	require.Equal(t, []string{"duplicate_answered>succeeded#0"}, h.events(again.ExecutionID))
	re := h.exec(call("s1", "call_2", `{"n":1}`))
	require.True(t, re.Recorded)
	require.Equal(t, first.Receipt, re.Receipt)
	require.Equal(t, 1, h.prov.count())
}

// TestDuplicateGatedCallNamesTheEarlierOne: a gated operation holds every
// call anyway; with the guard, the reviewer of a re-issue is told which
// execution it repeats, in the approval view every surface shows.
func TestDuplicateGatedCallNamesTheEarlierOne(t *testing.T) {
	h := guardedHarness(t, withApproval())
	first := h.exec(call("s1", "call_1", `{"n":1,"note":"invoice 7"}`))
	require.Empty(t, first.DuplicateOf)
	h.approve(first)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_1", `{"n":1,"note":"invoice 7"}`)).Status)

	again := h.exec(call("s1", "call_2", `{"note":"invoice 7","n":1}`))
	require.Equal(t, host.StatusAwaitingApproval, again.Status)
	require.Equal(t, first.ExecutionID, again.DuplicateOf)
	view, err := h.ex.ApprovalView(context.Background(), again.Approval.ID)
	require.NoError(t, err)
	require.NotNil(t, view.Duplicate)
	require.Equal(t, first.ExecutionID, view.Duplicate.ExecutionID)
	require.Equal(t, ledger.StateSucceeded, view.Duplicate.State)
	require.Equal(t, "r-1", view.Duplicate.Receipt)
	require.Contains(t, view.Text, "POSSIBLE DUPLICATE: this call has the same arguments as execution "+first.ExecutionID+
		" (succeeded, tool call call_1, created 2026-11-29T12:00:00Z, receipt r-1) in the same session, less than 10m before it. Approving runs it again.\n")
	require.Equal(t, 1, h.prov.count())

	firstView, err := h.ex.ApprovalView(context.Background(), first.Approval.ID)
	require.NoError(t, err)
	require.Nil(t, firstView.Duplicate)
	require.Equal(t, "approved", firstView.Decision)
	require.True(t, strings.HasPrefix(firstView.Text, "Tool: effect.apply\nArguments:\n  n = 1\n  note = \"invoice 7\"\n"), firstView.Text)
}

// TestDuplicateHeldSurvivesACrash: a crash right after the held record is
// written leaves it held; the call sent again after the restart is the
// same held call, and nothing ran.
func TestDuplicateHeldSurvivesACrash(t *testing.T) {
	h := guardedHarness(t)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "call_1", `{"n":1}`)).Status)
	h.execCrashAt("after_intent", call("s1", "call_2", `{"n":1}`))
	h.reopen()
	again := h.exec(call("s1", "call_2", `{"n":1}`))
	require.Equal(t, host.StatusAwaitingApproval, again.Status)
	require.NotEmpty(t, again.DuplicateOf)
	require.Equal(t, 1, h.prov.count())
}

// TestDuplicatesAcrossNodes: on a fleet, re-issues of one call reach
// different nodes at once (a runtime behind a load balancer); the shared
// ledger lets one run and holds the others, whichever node they reach.
func TestDuplicatesAcrossNodes(t *testing.T) {
	f := newFleet(t, "idempotent-retry", withDedup(), withApplyField("duplicate_window", "10m"))
	nodes := []*host.Executor{f.start("node-a", nil), f.start("node-b", nil)}
	const n = 8
	results := make([]host.Result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := nodes[i%2].Execute(context.Background(), call("s1", fmt.Sprint("call_", i), `{"n":7}`))
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	close(start)
	wg.Wait()
	ran, held := 0, 0
	for _, r := range results {
		switch r.Status {
		case host.StatusSucceeded:
			ran++
		case host.StatusAwaitingApproval:
			require.NotEmpty(t, r.DuplicateOf)
			held++
		}
	}
	require.Equal(t, 1, ran)
	require.Equal(t, n-1, held)
	require.Equal(t, 1, f.h.prov.count())
}
