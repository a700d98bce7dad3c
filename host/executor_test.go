package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/ledger"
)

// The tests in this file follow the recovery decision table (decide.go,
// testdata/decide) through the executor, then the crash-point matrix
// in-process.

func TestExecuteOnceAndReturnRecorded(t *testing.T) {
	h := newHarness(t, "manual")
	c := call("s1", "c1", `{"n":1}`)
	first := h.exec(c)
	require.Equal(t, host.StatusSucceeded, first.Status)
	require.Equal(t, "r-1", first.Receipt)
	require.False(t, first.Recorded)

	// Row "succeeded: return the recorded outcome; never call the connector".
	again := h.exec(c)
	require.True(t, again.Recorded)
	require.JSONEq(t, string(first.Result), string(again.Result))
	require.Equal(t, 1, h.prov.count())

	// The same after a restart.
	h.reopen()
	require.Equal(t, first.Receipt, h.exec(c).Receipt)
	require.Equal(t, 1, h.prov.count())
	require.Equal(t, "dispatch>dispatched#1 outcome>succeeded#1", joined(h.events(first.ExecutionID)))
}

func TestIntentMismatch(t *testing.T) {
	h := newHarness(t, "manual")
	h.exec(call("s1", "c1", `{"n":1}`))
	_, err := h.ex.Execute(context.Background(), call("s1", "c1", `{"n":2}`))
	var im *host.IntentMismatchError
	require.ErrorAs(t, err, &im)
	require.ErrorIs(t, err, host.ErrIntentMismatch)
	require.NotEqual(t, im.RecordedDigest, im.GivenDigest)
	require.Equal(t, 1, h.prov.count(), "nothing dispatched on mismatch")

	// Same meaning, other spelling: canonical JSON digest matches.
	res := h.exec(call("s1", "c1", ` { "n" : 1 } `))
	require.True(t, res.Recorded)
}

func TestArgumentsCannotCarryTheIdentity(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	// A model that smuggles a key is refused by the schema before anything
	// is recorded: additionalProperties is false.
	_, err := h.ex.Execute(context.Background(), call("s1", "c1", `{"n":1,"idempotency_key":"ck_evil"}`))
	require.ErrorIs(t, err, host.ErrInvalidArguments)
	_, _, gerr := h.ex.Get(context.Background(), ledger.ExecutionID("default", "s1", "c1"))
	require.ErrorIs(t, gerr, host.ErrNotFound, "an invalid call records nothing")

	// Arguments that merely contain a key-looking string are data: the key
	// the connector gets is derived from the execution id.
	res := h.exec(call("s1", "c2", `{"n":1,"note":"ck_evil"}`))
	rec, _, err := h.ex.Get(context.Background(), res.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, ledger.IdempotencyKey("default", "effect", res.ExecutionID), rec.IdempotencyKey)
	h.prov.mu.Lock()
	_, used := h.prov.byKey[rec.IdempotencyKey]
	h.prov.mu.Unlock()
	require.True(t, used, "the provider saw the derived key")
}

func TestInvalidArgumentsRecordNothing(t *testing.T) {
	h := newHarness(t, "manual")
	for _, args := range []string{`{"n":"x"}`, `[1]`, `{"n":1} {}`, `not json`, `{}`} {
		_, err := h.ex.Execute(context.Background(), call("s1", "c1", args))
		require.ErrorIs(t, err, host.ErrInvalidArguments, args)
	}
	recs, err := h.ex.Ledger().List(context.Background(), ledger.Filter{})
	require.NoError(t, err)
	require.Empty(t, recs)
	require.Zero(t, h.prov.count())
}

func TestApprovalRoundTrip(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	c := call("s1", "c1", `{"n":7}`)
	res := h.exec(c)
	require.Equal(t, host.StatusAwaitingApproval, res.Status)
	require.ErrorIs(t, res.Err(), host.ErrApprovalRequired)
	require.Zero(t, h.prov.count())
	ap := res.Approval

	// A reviewer who saw other arguments cannot approve these.
	_, err := h.ex.Approve(context.Background(), ap.ID, host.Decision{By: "rita", ArgsDigest: "deadbeef"})
	require.ErrorIs(t, err, host.ErrApprovalDigest)

	// Row "awaiting approval: keep waiting" — re-driving does nothing.
	require.Equal(t, host.StatusAwaitingApproval, h.exec(c).Status)

	got, err := h.ex.Approve(context.Background(), ap.ID, host.Decision{By: "rita", ArgsDigest: ap.ArgsDigest, Reason: "ok"})
	require.NoError(t, err)
	require.Equal(t, host.StatusPending, got.Status)
	require.Zero(t, h.prov.count(), "approval alone dispatches nothing")

	// Row "approved, not dispatched: dispatch when re-driven".
	done := h.exec(c)
	require.Equal(t, host.StatusSucceeded, done.Status)
	require.Equal(t, 1, h.prov.count())

	// The approval is consumed: approving again is refused, re-driving
	// returns the recorded result.
	_, err = h.ex.Approve(context.Background(), ap.ID, host.Decision{By: "rita", ArgsDigest: ap.ArgsDigest})
	require.ErrorIs(t, err, host.ErrNotAwaitingApproval)
	require.True(t, h.exec(c).Recorded)
	require.Equal(t, 1, h.prov.count())
	require.Equal(t, "intent>awaiting_approval#0 approved>approved#0 dispatch>dispatched#1 outcome>succeeded#1", joined(h.events(done.ExecutionID)))
}

// TestApprovalThroughRequestStateIsSingleUse: a decision through a
// request state (an MCP input request's answer) records its nonce, and a
// replay of that answer decides nothing: approve or reject, before and
// after the call ran, it is refused as used, and the call runs once.
func TestApprovalThroughRequestStateIsSingleUse(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	c := call("s1", "c1", `{"n":7}`)
	first := h.exec(c)
	ap := first.Approval
	d := host.Decision{By: "rita", ArgsDigest: ap.ArgsDigest, StateNonce: "nonce-1"}
	_, err := h.ex.Approve(context.Background(), ap.ID, d)
	require.NoError(t, err)
	rec, _, err := h.ex.Get(context.Background(), first.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, "nonce-1", rec.Approval.StateNonce)

	_, err = h.ex.Approve(context.Background(), ap.ID, d)
	require.ErrorIs(t, err, host.ErrStateUsed)
	require.Contains(t, host.Detail(err), "used already")
	_, err = h.ex.Reject(context.Background(), ap.ID, d)
	require.ErrorIs(t, err, host.ErrStateUsed)

	require.Equal(t, host.StatusSucceeded, h.exec(c).Status)
	_, err = h.ex.Approve(context.Background(), ap.ID, d)
	require.ErrorIs(t, err, host.ErrStateUsed, "after the call ran too")
	require.True(t, h.exec(c).Recorded)
	require.Equal(t, 1, h.prov.count())

	// Another state's answer to the decided approval is no replay: the
	// approval is simply not pending.
	_, err = h.ex.Approve(context.Background(), ap.ID, host.Decision{By: "rita", ArgsDigest: ap.ArgsDigest, StateNonce: "nonce-2"})
	require.ErrorIs(t, err, host.ErrNotAwaitingApproval)
}

func TestApprovalRejectedAndExpired(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	r1 := h.exec(call("s1", "c1", `{"n":1}`))
	res, err := h.ex.Reject(context.Background(), r1.Approval.ID, host.Decision{By: "rita", Reason: "no"})
	require.NoError(t, err)
	require.Equal(t, host.StatusRejected, res.Status)
	require.Equal(t, host.StatusRejected, h.exec(call("s1", "c1", `{"n":1}`)).Status)

	r2 := h.exec(call("s1", "c2", `{"n":2}`))
	h.advance(2 * time.Hour) // past approval_ttl
	_, err = h.ex.Approve(context.Background(), r2.Approval.ID, host.Decision{By: "rita", ArgsDigest: r2.Approval.ArgsDigest})
	require.ErrorIs(t, err, host.ErrApprovalExpired)
	require.Equal(t, host.StatusExpired, h.exec(call("s1", "c2", `{"n":2}`)).Status)

	// Approved, then expired before the runtime re-drove it.
	r3 := h.exec(call("s1", "c3", `{"n":3}`))
	_, err = h.ex.Approve(context.Background(), r3.Approval.ID, host.Decision{By: "rita", ArgsDigest: r3.Approval.ArgsDigest})
	require.NoError(t, err)
	h.advance(2 * time.Hour)
	require.Equal(t, host.StatusExpired, h.exec(call("s1", "c3", `{"n":3}`)).Status)
	require.Zero(t, h.prov.count())
}

func TestRetryableFailuresAreRetriedAndCapped(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	h.prov.inject("503", "503")
	res := h.exec(call("s1", "c1", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 3, res.Attempt)
	require.Equal(t, 1, h.prov.count())

	h.prov.inject("503", "503", "503")
	res = h.exec(call("s1", "c2", `{"n":1}`))
	require.Equal(t, host.StatusFailed, res.Status)
	require.Contains(t, res.Error, "attempts exhausted")
	require.Equal(t, "dispatch>dispatched#1 retry_scheduled>retry_wait#1 retry_dispatch>dispatched#2 retry_scheduled>retry_wait#2 retry_dispatch>dispatched#3 attempts_exhausted>failed#3",
		joined(h.events(res.ExecutionID)))

	h.prov.inject("400")
	res = h.exec(call("s1", "c3", `{"n":1}`))
	require.Equal(t, host.StatusFailed, res.Status)
	require.Equal(t, 1, res.Attempt, "a permanent error is not retried")
}

func TestRetryWaitSurvivesRestart(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	h.prov.inject("503")
	h.crashDuring(crash.AfterOutcomeRecord, func() {
		_, _ = h.ex.Execute(context.Background(), call("s1", "c1", `{"n":1}`))
	})
	h.reopen() // recovery runs the due retry
	res := h.exec(call("s1", "c1", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 2, res.Attempt)
	require.Equal(t, 1, h.prov.count())
}

// Row "dispatched, no outcome" for each policy, reached by a crash after the
// provider applied the effect but before the outcome was recorded.
func TestUncertainAfterPluginReturn(t *testing.T) {
	t.Run("idempotent-retry re-dispatches with the same key; provider dedups", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterPluginReturn, c)
		require.Equal(t, 1, h.prov.count())
		h.reopen()
		res := h.exec(c)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, 2, res.Attempt)
		require.Equal(t, "r-1", res.Receipt, "the retry got the first effect's receipt")
		require.Equal(t, 1, h.prov.count())
		require.Equal(t, "dispatch>dispatched#1 recover_retry>dispatched#2 outcome>succeeded#2", joined(h.events(res.ExecutionID)))
	})
	// Past the key retention the key proves nothing: the module exports
	// reconcile for apply, which finds the effect (a module that cannot
	// reconcile leaves the call to an operator: the decision table's
	// key_retention_passed rows).
	t.Run("idempotent-retry past the key retention asks reconcile, never re-sends the key", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterPluginReturn, c)
		h.advance(25 * time.Hour) // the provider may have forgotten the key
		h.reopen()
		res := h.exec(c)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, "reconciled", res.Source)
		require.Equal(t, "r-1", res.Receipt)
		require.Equal(t, 1, res.Attempt, "not dispatched again")
		require.Equal(t, 1, h.prov.count())
		require.Equal(t, "dispatch>dispatched#1 reconciled_applied>succeeded#1", joined(h.events(res.ExecutionID)))
	})
	t.Run("idempotent-retry past the provider's declared retention asks reconcile", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup(),
			withManifestText("\n[provider]\nidempotency_header = \"Idempotency-Key\"\nidempotency_retention = \"2h\"\n"))
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterPluginReturn, c)
		h.advance(3 * time.Hour) // within the host's 24h, past the provider's 2h
		h.reopen()
		res := h.exec(c)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, "reconciled", res.Source)
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("idempotent-retry past the key retention, nothing applied: re-dispatched after reconcile says so", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterDispatchRecord, c) // the connector never ran
		h.advance(25 * time.Hour)
		h.reopen()
		res := h.exec(c)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, 2, res.Attempt)
		require.Equal(t, 1, h.prov.count())
		require.Equal(t, "dispatch>dispatched#1 reconciled_not_applied>dispatched#2 outcome>succeeded#2", joined(h.events(res.ExecutionID)))
	})
	t.Run("reconcile finds the effect and records it without a second call", func(t *testing.T) {
		h := newHarness(t, "reconcile")
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterPluginReturn, c)
		h.reopen()
		res := h.exec(c)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, "reconciled", res.Source)
		require.Equal(t, "r-1", res.Receipt)
		require.Equal(t, 1, h.prov.count())
		require.Equal(t, "dispatch>dispatched#1 reconciled_applied>succeeded#1", joined(h.events(res.ExecutionID)))
	})
	t.Run("manual becomes recovery_required and fences the session", func(t *testing.T) {
		h := newHarness(t, "manual")
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterPluginReturn, c)
		h.reopen()
		res := h.exec(c)
		require.Equal(t, host.StatusRecoveryRequired, res.Status)
		require.ErrorIs(t, res.Err(), host.ErrRecoveryRequired)
		require.Equal(t, 1, h.prov.count(), "no automatic re-execution")

		_, err := h.ex.Execute(context.Background(), call("s1", "c2", `{"n":2}`))
		var fe *host.FencedError
		require.ErrorAs(t, err, &fe)
		require.Len(t, fe.Calls, 1)
		require.Equal(t, "c1", fe.Calls[0].ToolCallID)
		// Other sessions are not fenced.
		require.Equal(t, host.StatusSucceeded, h.exec(call("s2", "c1", `{"n":1}`)).Status)

		// The operator verified the effect: applied.
		got, err := h.ex.Resolve(context.Background(), res.ExecutionID, host.Resolution{Applied: true, Receipt: "r-1", Result: json.RawMessage(`{"ok":true}`), By: "oscar", Reason: "seen in provider dashboard"})
		require.NoError(t, err)
		require.Equal(t, host.StatusSucceeded, got.Status)
		require.Equal(t, "operator", got.Source)
		require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "c2", `{"n":2}`)).Status, "fence lifted")
		require.Equal(t, 3, h.prov.count())
	})
}

// Row "dispatched, no outcome" reached before the provider was touched.
func TestUncertainAfterDispatchRecord(t *testing.T) {
	t.Run("reconcile: not_applied re-dispatches attempt+1 once the attempt has settled", func(t *testing.T) {
		h := newHarness(t, "reconcile")
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterDispatchRecord, c)
		require.Zero(t, h.prov.count())
		h.reopen()
		// Straight after the crash, attempt 1 may still be on its way to
		// the provider: "not applied" is not evidence until reconcile_settle
		// (by default twice the 2s timeout) after its dispatch.
		res := h.exec(c)
		require.Equal(t, host.StatusPending, res.Status)
		require.Equal(t, h.clock().Add(4*time.Second), res.NextAttemptAt)
		require.Zero(t, h.prov.count())
		h.advance(4 * time.Second)
		res = h.exec(c)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, 2, res.Attempt)
		require.Equal(t, 1, h.prov.count())
		require.Equal(t, "dispatch>dispatched#1 reconciled_not_applied>dispatched#2 outcome>succeeded#2", joined(h.events(res.ExecutionID)))
	})
	t.Run("reconcile: unknown becomes recovery_required", func(t *testing.T) {
		h := newHarness(t, "reconcile")
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterDispatchRecord, c)
		h.prov.lookup = "500"
		h.reopen()
		res := h.exec(c)
		require.Equal(t, host.StatusRecoveryRequired, res.Status)
		require.Zero(t, h.prov.count())

		// Operator: not applied, retry.
		got, err := h.ex.Resolve(context.Background(), res.ExecutionID, host.Resolution{Retry: true, By: "oscar", Reason: "nothing at the provider"})
		require.NoError(t, err)
		require.Equal(t, host.StatusSucceeded, got.Status)
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("manual: operator abandons", func(t *testing.T) {
		h := newHarness(t, "manual")
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterDispatchRecord, c)
		h.reopen()
		res := h.exec(c)
		require.Equal(t, host.StatusRecoveryRequired, res.Status)
		got, err := h.ex.Resolve(context.Background(), res.ExecutionID, host.Resolution{By: "oscar", Reason: "customer cancelled"})
		require.NoError(t, err)
		require.Equal(t, host.StatusAbandoned, got.Status)
		require.Equal(t, host.StatusAbandoned, h.exec(c).Status)
		require.Zero(t, h.prov.count())
	})
}

// A connector that hangs after the provider applied the effect: the call's
// deadline cuts it, and the outcome is as uncertain as after a crash.
func TestTimeoutAfterEffectIsUncertain(t *testing.T) {
	h := newHarness(t, "manual")
	h.prov.inject("apply_then_hang")
	res := h.exec(call("s1", "c1", `{"n":1}`))
	require.Equal(t, host.StatusRecoveryRequired, res.Status)
	require.Equal(t, 1, h.prov.count())

	h2 := newHarness(t, "idempotent-retry", withDedup())
	h2.prov.inject("apply_then_hang")
	res = h2.exec(call("s1", "c1", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, "r-1", res.Receipt)
	require.Equal(t, 1, h2.prov.count())
}

func TestCrashMatrixInProcess(t *testing.T) {
	type cell struct {
		point    string
		policy   string
		approval bool
		// want: final status after restart + re-drive, and provider effects.
		status  host.Status
		effects int
	}
	cells := []cell{
		{crash.BeforeIntent, "manual", false, host.StatusSucceeded, 1},
		{crash.AfterIntent, "manual", true, host.StatusSucceeded, 1},
		{crash.AfterApproval, "manual", true, host.StatusSucceeded, 1},
		{crash.AfterDispatchRecord, "idempotent-retry", false, host.StatusSucceeded, 1},
		{crash.AfterDispatchRecord, "reconcile", true, host.StatusSucceeded, 1},
		{crash.AfterDispatchRecord, "manual", false, host.StatusRecoveryRequired, 0},
		{crash.AfterPluginReturn, "idempotent-retry", true, host.StatusSucceeded, 1},
		{crash.AfterPluginReturn, "reconcile", false, host.StatusSucceeded, 1},
		{crash.AfterPluginReturn, "manual", true, host.StatusRecoveryRequired, 1},
		{crash.AfterOutcomeRecord, "manual", false, host.StatusSucceeded, 1},
		{crash.AfterOutcomeRecord, "reconcile", true, host.StatusSucceeded, 1},
	}
	for _, c := range cells {
		name := c.point + "/" + c.policy
		if c.approval {
			name += "/approval"
		}
		t.Run(name, func(t *testing.T) {
			opts := []harnessOpt{withDedup()}
			if c.approval {
				opts = append(opts, withApproval())
			}
			h := newHarness(t, c.policy, opts...)
			tc := call("s1", "c1", `{"n":1}`)
			approveAndRun := func() {
				res := h.exec(tc)
				if res.Status == host.StatusAwaitingApproval {
					_, err := h.ex.Approve(context.Background(), res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
					require.NoError(t, err)
					h.exec(tc)
				}
			}
			h.crashDuring(c.point, approveAndRun)
			h.reopen()
			// Time passes: an attempt cut by the crash has settled.
			h.advance(5 * time.Second)
			// The runtime re-issues the call (and, for a call still awaiting
			// approval, the reviewer approves it).
			res := h.exec(tc)
			if res.Status == host.StatusAwaitingApproval {
				_, err := h.ex.Approve(context.Background(), res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
				require.NoError(t, err)
				res = h.exec(tc)
			}
			if res.Status == host.StatusPending {
				res = h.exec(tc)
			}
			require.Equal(t, c.status, res.Status)
			require.Equal(t, c.effects, h.prov.count(), "effects the provider saw")
			// Exactly one result: asking again returns the same answer.
			again, err := h.ex.Execute(context.Background(), tc)
			require.NoError(t, err)
			require.Equal(t, res.Status, again.Status)
			require.Equal(t, res.Receipt, again.Receipt)
		})
	}
}

func TestResumedCallWithoutRecord(t *testing.T) {
	h := newHarness(t, "manual")
	c := call("legacy", "c1", `{"n":1}`)
	c.Resumed = true
	res := h.exec(c)
	require.Equal(t, host.StatusRecoveryRequired, res.Status, "no record in an unknown session does not prove it never ran")
	require.Zero(t, h.prov.count())

	// Resolving that call does not make the legacy session known: another
	// resumed call from the same old history still stops for an operator,
	// even after new calls ran in the session.
	_, err := h.ex.Resolve(context.Background(), res.ExecutionID, host.Resolution{Applied: true, By: "oscar", Reason: "found in the provider"})
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, h.exec(call("legacy", "new-1", `{"n":3}`)).Status)
	c3 := call("legacy", "c3", `{"n":1}`)
	c3.Resumed = true
	require.Equal(t, host.StatusRecoveryRequired, h.exec(c3).Status)
	require.Equal(t, 1, h.prov.count(), "only the new call ran")

	// In a session the ledger knows, a resumed call with no record never
	// ran (every call is recorded before dispatch): it executes.
	h.exec(call("known", "c1", `{"n":1}`))
	c2 := call("known", "c2", `{"n":2}`)
	c2.Resumed = true
	require.Equal(t, host.StatusSucceeded, h.exec(c2).Status)
}

func TestConcurrentIdenticalCallsDispatchOnce(t *testing.T) {
	h := newHarness(t, "manual")
	const n = 16
	var wg sync.WaitGroup
	results := make([]host.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = h.ex.Execute(context.Background(), call("s1", "same", `{"n":1}`))
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, host.StatusSucceeded, results[i].Status)
		require.Equal(t, "r-1", results[i].Receipt)
	}
	require.Equal(t, 1, h.prov.count())
}

func TestConcurrentDistinctCalls(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.ex.Execute(context.Background(), call("s1", "c"+string(rune('A'+i)), `{"n":1}`))
			if err == nil && res.Status != host.StatusSucceeded {
				err = errors.New(string(res.Status))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, n, h.prov.count())
}

func TestReadOperationIsReExecuted(t *testing.T) {
	h := newHarness(t, "manual")
	c := host.ToolCall{SessionID: "s1", ToolCallID: "r1", Tool: "effect.read", Arguments: json.RawMessage(`{}`)}
	h.execCrashAt(crash.AfterPluginReturn, c)
	h.reopen()
	res := h.exec(c)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 2, h.prov.readCount(), "a read is safe to run again")
}

// A call that never reached the guest (here: the connector was closed
// under the executor) did nothing, so it is retried like any retryable
// failure instead of being recorded as a permanent one on the first try.
func TestCallThatNeverEnteredTheGuestIsRetried(t *testing.T) {
	h := newHarness(t, "manual")
	require.NoError(t, host.CloseConnector(context.Background(), h.ex, "effect"))
	res := h.exec(call("s1", "c1", `{"n":1}`))
	require.Equal(t, host.StatusFailed, res.Status)
	require.Contains(t, res.Error, "attempts exhausted (3 of 3)")
	require.Zero(t, h.prov.count())
	require.Equal(t, "dispatch>dispatched#1 retry_scheduled>retry_wait#1 retry_dispatch>dispatched#2 retry_scheduled>retry_wait#2 retry_dispatch>dispatched#3 attempts_exhausted>failed#3",
		joined(h.events(res.ExecutionID)))
}

// Cooperative cancellation after dispatch: the cancel is recorded, and the
// uncertain call is then decided like any other — reconcile proves whether
// it happened; nothing that was cancelled is retried.
func TestCancelAfterDispatch(t *testing.T) {
	cancelUncertain := func(t *testing.T, h *harness, point string) host.Result {
		t.Helper()
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(point, c)
		id := ledger.ExecutionID("default", "s1", "c1")
		res, err := h.ex.Cancel(context.Background(), id, "rita")
		require.NoError(t, err)
		require.Equal(t, host.StatusPending, res.Status, "a dispatched call is only asked to cancel")
		h.advance(5 * time.Second) // the attempt has settled
		_, err = h.ex.Recover(context.Background())
		require.NoError(t, err)
		res = h.exec(c)
		return res
	}
	t.Run("reconcile: not applied ends cancelled", func(t *testing.T) {
		h := newHarness(t, "reconcile")
		res := cancelUncertain(t, h, crash.AfterDispatchRecord)
		require.Equal(t, host.StatusCancelled, res.Status)
		require.Zero(t, h.prov.count())
		require.Equal(t, "dispatch>dispatched#1 cancel_requested>dispatched#1 cancelled_not_applied>cancelled#1", joined(h.events(res.ExecutionID)))
	})
	t.Run("reconcile: applied ends succeeded", func(t *testing.T) {
		h := newHarness(t, "reconcile")
		res := cancelUncertain(t, h, crash.AfterPluginReturn)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("idempotent-retry is not retried after a cancel", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		res := cancelUncertain(t, h, crash.AfterDispatchRecord)
		require.Equal(t, host.StatusRecoveryRequired, res.Status)
		require.Contains(t, res.Error, "cancelled_uncertain")
		require.Zero(t, h.prov.count())
	})
	t.Run("before dispatch it is cancelled at once", func(t *testing.T) {
		h := newHarness(t, "manual", withApproval())
		res := h.exec(call("s1", "c1", `{"n":1}`))
		got, err := h.ex.Cancel(context.Background(), res.ExecutionID, "rita")
		require.NoError(t, err)
		require.Equal(t, host.StatusCancelled, got.Status)
		require.Equal(t, host.StatusCancelled, h.exec(call("s1", "c1", `{"n":1}`)).Status)
		require.Zero(t, h.prov.count())
	})
}

// A gated call cancelled before anyone decided its approval does not go on
// saying it waits for a reviewer: the approval's decision is cancelled (by
// whoever cancelled), or expired when the request had already expired.
func TestCancelWithdrawsPendingApproval(t *testing.T) {
	t.Run("pending request: cancelled", func(t *testing.T) {
		h := newHarness(t, "manual", withApproval())
		res := h.exec(call("s1", "c1", `{"n":1}`))
		require.Equal(t, host.StatusAwaitingApproval, res.Status)
		got, err := h.ex.Cancel(context.Background(), res.ExecutionID, "rita")
		require.NoError(t, err)
		require.Equal(t, host.StatusCancelled, got.Status)
		require.Equal(t, ledger.ApprovalCancelled, got.Approval.Decision)
		require.Equal(t, "rita", got.Approval.By)
		require.False(t, got.Approval.DecidedAt.IsZero())
		rec, _, err := h.ex.Get(context.Background(), res.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, ledger.ApprovalCancelled, rec.Approval.Decision, "the ledger records it too")
	})
	t.Run("expired request: expired", func(t *testing.T) {
		h := newHarness(t, "manual", withApproval())
		res := h.exec(call("s1", "c1", `{"n":1}`))
		h.advance(2 * time.Hour) // past the approval's TTL
		got, err := h.ex.Cancel(context.Background(), res.ExecutionID, "rita")
		require.NoError(t, err)
		require.Equal(t, host.StatusExpired, got.Status)
		require.Equal(t, ledger.ApprovalExpired, got.Approval.Decision)
	})
	t.Run("approved, not dispatched: the approval stays approved", func(t *testing.T) {
		h := newHarness(t, "manual", withApproval())
		res := h.exec(call("s1", "c1", `{"n":1}`))
		_, err := h.ex.Approve(context.Background(), res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
		require.NoError(t, err)
		got, err := h.ex.Cancel(context.Background(), res.ExecutionID, "olga")
		require.NoError(t, err)
		require.Equal(t, host.StatusCancelled, got.Status)
		require.Equal(t, ledger.ApprovalApproved, got.Approval.Decision)
		require.Equal(t, "rita", got.Approval.By)
	})
}

// Cancel cannot settle a call whose outcome is unknown: on a
// recovery_required execution it is refused with ErrRecoveryRequired (the
// message points at connhost resolve) and changes nothing; on a terminal
// execution it returns the result unchanged.
func TestCancelRecoveryRequiredIsRefused(t *testing.T) {
	h := newHarness(t, "manual")
	c := call("s1", "c1", `{"n":1}`)
	h.execCrashAt(crash.AfterPluginReturn, c)
	h.reopen()
	res := h.exec(c)
	require.Equal(t, host.StatusRecoveryRequired, res.Status)
	before := joined(h.events(res.ExecutionID))

	got, err := h.ex.Cancel(context.Background(), res.ExecutionID, "rita")
	require.ErrorIs(t, err, host.ErrRecoveryRequired)
	require.Contains(t, err.Error(), "connhost resolve "+res.ExecutionID)
	require.Equal(t, host.StatusRecoveryRequired, got.Status)
	require.Equal(t, res.ExecutionID, got.ExecutionID)
	require.Equal(t, before, joined(h.events(res.ExecutionID)), "a refused cancel records nothing")
	_, err = h.ex.Execute(context.Background(), call("s1", "c2", `{"n":2}`))
	require.ErrorIs(t, err, host.ErrSessionFenced, "the session stays fenced")

	// A terminal execution is returned unchanged, without an error.
	done := h.exec(call("s2", "c1", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, done.Status)
	got, err = h.ex.Cancel(context.Background(), done.ExecutionID, "rita")
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, got.Status)
	require.Equal(t, "dispatch>dispatched#1 outcome>succeeded#1", joined(h.events(done.ExecutionID)))
}

// A retry whose time comes while no runtime waits for it is dispatched by
// the executor's background driver, at its persisted next-attempt time.
func TestRunDispatchesDueRetries(t *testing.T) {
	// A backoff the runtime will not wait for.
	h2 := newHarness(t, "idempotent-retry", withDedup())
	h2.prov.inject("503")
	h2.reopenWith(func(o *host.Options) {
		o.RetryBackoff = func(int) time.Duration { return time.Hour }
		o.MaxInlineRetryWait = time.Millisecond
	})
	ex := h2.ex
	res, err := ex.Execute(context.Background(), call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusPending, res.Status)
	require.False(t, res.NextAttemptAt.IsZero())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ex.Run(ctx, 5*time.Millisecond)
	// Before the persisted time nothing is dispatched ...
	time.Sleep(50 * time.Millisecond)
	require.Zero(t, h2.prov.count())
	// ... after it, the driver dispatches attempt 2 without any runtime.
	h2.advance(2 * time.Hour)
	require.Eventually(t, func() bool {
		rec, _, err := ex.Get(context.Background(), res.ExecutionID)
		return err == nil && rec.State == ledger.StateSucceeded && rec.Attempt == 2
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, h2.prov.count())
}

// An operator's "not applied, retry" is not an approval: a gated call that
// was never approved (here: resumed from history the ledger never saw) is
// not dispatched by it.
func TestResolveRetryDoesNotBypassApproval(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	c := call("legacy", "c1", `{"n":1}`)
	c.Resumed = true
	res := h.exec(c)
	require.Equal(t, host.StatusRecoveryRequired, res.Status)
	_, err := h.ex.Resolve(context.Background(), res.ExecutionID, host.Resolution{Retry: true, By: "oscar", Reason: "retry"})
	require.ErrorIs(t, err, host.ErrApprovalRequired)
	require.Zero(t, h.prov.count())
	got, err := h.ex.Resolve(context.Background(), res.ExecutionID, host.Resolution{By: "oscar", Reason: "not applied; will be asked again"})
	require.NoError(t, err)
	require.Equal(t, host.StatusAbandoned, got.Status)
}

// One execution recovery cannot move (here: approved, then its connector
// was removed from the deployment) must not stop recovery of the others,
// nor Open.
func TestRecoveryIsNotStoppedByOneExecution(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	res := h.exec(call("s1", "c1", `{"n":1}`))
	_, err := h.ex.Approve(context.Background(), res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
	require.NoError(t, err)
	require.NoError(t, h.ex.Close(context.Background()))
	h.advance(2 * time.Hour) // the approval expires while the connector is gone
	ex, err := host.Open(context.Background(), host.Options{DataDir: h.dir, CacheDir: filepath.Join(os.TempDir(), "connhost-example-cache"), Now: h.clock})
	require.NoError(t, err, "Open must not fail on an execution whose connector is gone")
	rec, _, err := ex.Get(context.Background(), res.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, ledger.StateExpired, rec.State, "nothing was dispatched, so the approval just expires")
	h.ex = ex
}

// A slow provider applies attempt 1 after the host's deadline cut the call.
// A reconcile made at once would find nothing and re-dispatch: two effects
// under a policy that promises one. The executor lets the attempt settle
// (its timeout) before it reconciles.
func TestReconcileAfterTimeoutWaitsForTheAttemptToSettle(t *testing.T) {
	p := &provider{byKey: map[string]string{}}
	first := make(chan struct{}, 1)
	first <- struct{}{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apply" {
			select {
			case <-first:
				time.Sleep(2500 * time.Millisecond) // applied after the 2s timeout
			default:
			}
		}
		p.serve(w, r)
	}))
	t.Cleanup(p.srv.Close)
	h := &harness{t: t, dir: t.TempDir(), prov: p, policy: "reconcile", attempts: 3,
		now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	o := h.options()
	// Real time: reconcile_settle (twice the 2s timeout) must
	// really pass. Reconcile right after the timeout finds nothing (the
	// provider applies at 2.5s); that "not applied" is not evidence yet,
	// so the executor waits until the attempt has settled and asks again.
	o.Now = time.Now
	o.MaxInlineRetryWait = 10 * time.Second
	ex, err := host.Open(context.Background(), o)
	require.NoError(t, err)
	h.ex = ex
	t.Cleanup(func() { _ = h.ex.Close(context.Background()) })

	res := h.exec(call("s1", "c1", `{"n":1}`))
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, "reconciled", res.Source)
	require.Equal(t, 1, p.count())
	require.Equal(t, "dispatch>dispatched#1 reconciled_applied>succeeded#1", joined(h.events(res.ExecutionID)))
}

// The inline wait for a scheduled retry ends when the caller stops waiting;
// the retry stays scheduled in the ledger.
func TestInlineRetryWaitEndsWithTheCaller(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	h.reopenWith(func(o *host.Options) {
		o.Now = time.Now
		o.RetryBackoff = func(int) time.Duration { return time.Hour }
		o.MaxInlineRetryWait = 2 * time.Hour // the caller's deadline, not this cap, must end the wait
	})
	ex := h.ex
	h.prov.inject("503")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := ex.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusPending, res.Status, "returned when the caller's deadline passed")
	require.False(t, res.NextAttemptAt.IsZero())
	require.Zero(t, h.prov.count())
}

// A call waiting for a retry whose connector disappeared becomes
// recovery_required; the operator can still record that it was applied,
// although the ledger holds a retryable error for that attempt.
func TestOperatorResolvesACallThatWasWaitingForARetry(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	h.reopenWith(func(o *host.Options) {
		o.RetryBackoff = func(int) time.Duration { return time.Hour }
		o.MaxInlineRetryWait = time.Millisecond
	})
	ex := h.ex
	h.prov.inject("503")
	res, err := ex.Execute(context.Background(), call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusPending, res.Status)
	require.NoError(t, ex.Close(context.Background()))

	// Reopened without the connector: recovery cannot retry it.
	ex, err = host.Open(context.Background(), host.Options{DataDir: h.dir, CacheDir: filepath.Join(os.TempDir(), "connhost-example-cache"), Now: h.clock})
	require.NoError(t, err)
	h.ex = ex
	rec, _, err := ex.Get(context.Background(), res.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, ledger.StateRecoveryRequired, rec.State)
	got, err := ex.Resolve(context.Background(), res.ExecutionID, host.Resolution{Applied: true, Receipt: "r-x", By: "oscar", Reason: "done by hand"})
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, got.Status)
}

// An uncertain call fences its session for every new attempt, not only for
// new calls: an approved call is not dispatched, nor a retry run, while
// another call of the session waits for an operator (the approved action
// may depend on what the uncertain one did).
func TestFenceHoldsApprovedCalls(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "manual", withApproval())
	approve := func(c host.ToolCall) {
		t.Helper()
		res := h.exec(c)
		require.Equal(t, host.StatusAwaitingApproval, res.Status)
		_, err := h.ex.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
		require.NoError(t, err)
	}
	b := call("s1", "b", `{"n":2}`)
	approve(b)
	a := call("s1", "a", `{"n":1}`)
	approve(a)
	h.execCrashAt(crash.AfterPluginReturn, a)
	h.reopen() // recovery: a is recovery_required, b stays approved
	require.Equal(t, 1, h.prov.count())

	_, err := h.ex.Execute(ctx, b)
	var fe *host.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "a", fe.Calls[0].ToolCallID)
	rep, err := h.ex.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Decisions[host.StatusPending], "a recovery pass leaves the approved call waiting")
	require.Equal(t, 1, h.prov.count(), "the approved call was not dispatched while its session was fenced")

	res := h.exec(a)
	_, err = h.ex.Resolve(ctx, res.ExecutionID, host.Resolution{Applied: true, Receipt: "r-1", By: "oscar", Reason: "seen at the provider"})
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, h.exec(b).Status, "dispatched once the fence is lifted")
	require.Equal(t, 2, h.prov.count())
}

// fenceLift lifts a session's fence at the worst moment for a new call's
// refusal: once armed, at the read of the calls fencing the session that
// follows skip reads which saw the fence. On one node the refusal is such
// a read (skip 1); on a fleet it is the insert (skip 0).
type fenceLift struct {
	mu     sync.Mutex
	lift   func() // armed while set
	skip   int
	lifted bool
}

func (l *fenceLift) arm(skip int, lift func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lift, l.skip = lift, skip
}

func (l *fenceLift) wasLifted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lifted
}

// read is a Fenced read through fenced, the lift run before it when due.
func (l *fenceLift) read(ctx context.Context, ns, session string, fenced func(context.Context, string, string) ([]ledger.Record, error)) ([]ledger.Record, error) {
	l.mu.Lock()
	var lift func()
	if l.lift != nil && l.skip == 0 {
		lift, l.lift, l.lifted = l.lift, nil, true
	}
	l.mu.Unlock()
	if lift != nil {
		lift()
	}
	recs, err := fenced(ctx, ns, session)
	l.mu.Lock()
	if l.lift != nil && len(recs) > 0 {
		l.skip--
	}
	l.mu.Unlock()
	return recs, err
}

// executeThroughLift arms l to resolve the uncertain execution on ex at its
// moment (after skip reads that saw the fence), executes c on ex, and
// requires that the fence was lifted then and that c was not refused by
// it but ran and succeeded.
func (l *fenceLift) executeThroughLift(t *testing.T, ex *host.Executor, skip int, uncertain string, c host.ToolCall) {
	t.Helper()
	ctx := context.Background()
	l.arm(skip, func() {
		_, err := ex.Resolve(ctx, uncertain, host.Resolution{Applied: true, Receipt: "r-1", By: "oscar", Reason: "seen at the provider"})
		require.NoError(t, err)
	})
	res, err := ex.Execute(ctx, c)
	require.True(t, l.wasLifted(), "the fence was not lifted between the refusal and the read")
	var fe *host.FencedError
	if errors.As(err, &fe) {
		require.Failf(t, "refused by a fence already lifted", "%d call(s) named: %v", len(fe.Calls), err)
	}
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
}

// fenceLifter is a single node's ledger with a fenceLift on its reads.
type fenceLifter struct {
	ledger.Ledger
	fenceLift
}

func (l *fenceLifter) Fenced(ctx context.Context, ns, session string) ([]ledger.Record, error) {
	return l.read(ctx, ns, session, l.Ledger.Fenced)
}

// A new call refused by a fence that an operator lifts before the refusal
// reads which calls fence the session: a refusal naming no call would send
// the runtime to wait for an operator with nothing to resolve. Nothing was
// written, so the call runs, once.
func TestFenceLiftedWhileRefusing(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "manual")
	db, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(t.TempDir(), "ledger")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	lifter := &fenceLifter{Ledger: db}
	onLifter := func(o *host.Options) { o.Ledger = lifter }
	h.reopenWith(onLifter)
	h.execCrashAt(crash.AfterPluginReturn, call("s1", "a", `{"n":1}`))
	h.reopenWith(onLifter) // recovery: a is recovery_required, s1 is fenced
	fenced, err := db.Fenced(ctx, ledger.DefaultNamespace, "s1")
	require.NoError(t, err)
	require.Len(t, fenced, 1)

	lifter.executeThroughLift(t, h.ex, 1, fenced[0].ID, call("s1", "b", `{"n":2}`))
	require.Equal(t, 2, h.prov.count(), "a's one attempt, then b's")
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "b", `{"n":2}`)).Status, "b sent again is answered from its record")
	require.Equal(t, 2, h.prov.count())
}

// before_intent means "a new call, nothing recorded yet": a call sent again
// never reaches it, so a kill armed there hits only new calls.
func TestBeforeIntentOnlyForNewCalls(t *testing.T) {
	h := newHarness(t, "manual")
	c := call("s1", "c1", `{"n":1}`)
	require.Equal(t, host.StatusSucceeded, h.exec(c).Status)
	var hits []string
	restore := crash.SetHook(func(p string) { hits = append(hits, p) })
	defer restore()
	res := h.exec(c)
	require.True(t, res.Recorded)
	require.NotContains(t, hits, crash.BeforeIntent, "a re-sent call reached before_intent")
	h.exec(call("s1", "c2", `{"n":2}`))
	require.Contains(t, hits, crash.BeforeIntent)
}

// Refusals say what is wrong for people: host.Detail gives the sentence
// without the chain of package prefixes that Error() keeps for logs, and
// an unknown tool lists the tools there are.
func TestRefusalDetails(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	ctx := context.Background()
	gated := h.exec(call("s1", "c1", `{"n":1}`))
	tests := []struct {
		name     string
		run      func() error
		sentinel error
		want     []string
	}{
		{"unknown connector", func() error {
			_, err := h.ex.Execute(ctx, host.ToolCall{SessionID: "s1", ToolCallID: "c9", Tool: "nope.apply", Arguments: json.RawMessage(`{}`)})
			return err
		}, host.ErrUnknownTool, []string{`unknown tool "nope.apply"`, `no connector "nope"`, "the available tools are: effect.apply, effect.read"}},
		{"unknown operation", func() error {
			_, err := h.ex.Execute(ctx, host.ToolCall{SessionID: "s1", ToolCallID: "c9", Tool: "effect.nope", Arguments: json.RawMessage(`{}`)})
			return err
		}, host.ErrUnknownTool, []string{`connector "effect" has no operation "nope"`, "effect.apply, effect.read"}},
		{"no dot", func() error {
			_, err := h.ex.Execute(ctx, host.ToolCall{SessionID: "s1", ToolCallID: "c9", Tool: "apply", Arguments: json.RawMessage(`{}`)})
			return err
		}, host.ErrUnknownTool, []string{`"connector.operation"`, "effect.apply, effect.read"}},
		{"arguments fail the schema", func() error {
			_, err := h.ex.Execute(ctx, call("s1", "c9", `{"n":"one","x":1}`))
			return err
		}, host.ErrInvalidArguments, []string{"input schema of effect.apply", "/n: "}},
		{"arguments not an object", func() error {
			_, err := h.ex.Execute(ctx, call("s1", "c9", `[1]`))
			return err
		}, host.ErrInvalidArguments, []string{"arguments of effect.apply", "must be a JSON object"}},
		{"missing session", func() error {
			_, err := h.ex.Execute(ctx, call("", "c9", `{"n":1}`))
			return err
		}, host.ErrBadCall, []string{"session_id is required"}},
		{"intent mismatch", func() error {
			_, err := h.ex.Execute(ctx, call("s1", "c1", `{"n":2}`))
			return err
		}, host.ErrIntentMismatch, []string{"tool call c1 was recorded as effect.apply", "other arguments", "new tool-call id"}},
		{"no execution", func() error {
			_, _, err := h.ex.Get(ctx, "ex_nope")
			return err
		}, host.ErrNotFound, []string{`no execution "ex_nope"`}},
		{"no approval", func() error {
			_, err := h.ex.Approve(ctx, "ap_nope", host.Decision{By: "rita", ArgsDigest: "d"})
			return err
		}, host.ErrNotFound, []string{`no approval "ap_nope"`}},
		{"digest differs", func() error {
			_, err := h.ex.Approve(ctx, gated.Approval.ID, host.Decision{By: "rita", ArgsDigest: strings.Repeat("0", 64)})
			return err
		}, host.ErrApprovalDigest, []string{"the reviewer saw arguments with digest 000000000000", gated.ArgsDigest[:12]}},
		{"not recovery_required", func() error {
			_, err := h.ex.Resolve(ctx, gated.ExecutionID, host.Resolution{By: "olga", Reason: "r"})
			return err
		}, host.ErrNotRecoveryRequired, []string{gated.ExecutionID + " is awaiting_approval, not recovery_required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			require.ErrorIs(t, err, tt.sentinel)
			d := host.Detail(err)
			for _, w := range tt.want {
				require.Contains(t, d, w)
			}
			for _, chain := range []string{"host:", "manifests:", "ledger:", "strictjson:"} {
				require.NotContains(t, d, chain, "the detail carries a Go error chain")
			}
			require.Contains(t, err.Error(), "host: ", "Error() keeps the package prefix for logs")
		})
	}
}

// The background driver reads the due index: an approval request is
// expired once its time has come, and not before.
func TestRunExpiresDueApprovals(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	res := h.exec(call("s1", "c1", `{"n":1}`))
	require.Equal(t, host.StatusAwaitingApproval, res.Status)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.ex.Run(ctx, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	rec, _, err := h.ex.Get(context.Background(), res.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, ledger.StateAwaitingApproval, rec.State, "not due yet")
	h.advance(2 * time.Hour)
	require.Eventually(t, func() bool {
		rec, _, err := h.ex.Get(context.Background(), res.ExecutionID)
		return err == nil && rec.State == ledger.StateExpired
	}, 10*time.Second, 10*time.Millisecond)
}
