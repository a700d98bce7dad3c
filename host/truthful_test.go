package host_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/ledger"
)

// crashWhileHeld runs c while the provider holds its request: the attempt
// times out (2s) while held, and the process dies right after the
// connector returns, before anything is recorded. The request stays held.
func crashWhileHeld(t *testing.T, h *harness, c host.ToolCall) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.execCrashAt(crash.AfterPluginReturn, c)
	}()
	h.prov.waitHeld(t)
	<-done
}

// A provider still processing a crashed attempt answers "in progress" to
// every retry with the same key. That is a reason to wait, never a
// failure: once attempts run out the execution is recovery_required, and
// when the held request lands there is exactly one effect. A runtime told
// "failed" would have issued the call again under a new tool-call id.
func TestInFlightAttemptIsNeverReportedFailed(t *testing.T) {
	t.Run("crash while the provider holds the attempt", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		h.prov.inject("hold")
		c := call("s1", "c1", `{"n":1}`)
		crashWhileHeld(t, h, c)
		h.reopen() // recovery: same key again → 409 in progress
		res := h.exec(c)
		require.Equal(t, host.StatusRecoveryRequired, res.Status, "attempts exhausted while the provider was still working: not failed")
		require.Contains(t, res.Error, string(host.DecisionInFlightExhausted))
		require.Zero(t, h.prov.count(), "the held request has not landed yet")
		require.Equal(t, "dispatch>dispatched#1 recover_retry>dispatched#2 in_flight_wait>retry_wait#2 retry_dispatch>dispatched#3 in_flight_at_provider>recovery_required#3",
			joined(h.events(res.ExecutionID)))

		h.prov.releaseHeld()
		require.Eventually(t, func() bool { return h.prov.count() == 1 }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, host.StatusRecoveryRequired, h.exec(c).Status, "only an operator settles it")
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("reconcile_settle 0 and no attempt left: not applied is no evidence until the attempt settled", func(t *testing.T) {
		// reconcile_settle 0 lets "not applied" be acted on at once, because
		// the re-dispatch under the same key meets a request still in
		// flight. With no attempt left nothing is re-dispatched, and "not
		// applied" races the held request: "failed" must wait until the
		// attempt has settled (twice the 2s timeout after its dispatch).
		h := newHarness(t, "reconcile", withDedup(), withAttempts(1), withApplyField("reconcile_settle", "0s"))
		h.prov.inject("hold")
		c := call("s1", "c1", `{"n":1}`)
		crashWhileHeld(t, h, c)
		h.reopen() // recovery reconciles: the held request is not visible yet
		res := h.exec(c)
		require.Equal(t, host.StatusPending, res.Status, "not applied, but the attempt may still land: not failed")
		require.Equal(t, h.clock().Add(4*time.Second), res.NextAttemptAt)
		require.Zero(t, h.prov.count())

		h.prov.releaseHeld()
		require.Eventually(t, func() bool { return h.prov.count() == 1 }, 10*time.Second, 5*time.Millisecond)
		h.advance(4 * time.Second)
		res = h.exec(c)
		require.Equal(t, host.StatusSucceeded, res.Status, "the held request landed: reconcile finds it")
		require.Equal(t, 1, h.prov.count())
		require.Equal(t, "dispatch>dispatched#1 reconciled_applied>succeeded#1", joined(h.events(res.ExecutionID)))
	})
	t.Run("the provider outlasts the connector's timeout without a crash", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		h.prov.inject("hold")
		res := h.exec(call("s1", "c1", `{"n":1}`))
		require.Equal(t, host.StatusRecoveryRequired, res.Status)
		h.prov.releaseHeld()
		require.Eventually(t, func() bool { return h.prov.count() == 1 }, 10*time.Second, 5*time.Millisecond)
	})
	t.Run("the held request lands before the next attempt: its result is replayed", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		h.reopenWith(func(o *host.Options) {
			o.InFlightBackoff = func(int) time.Duration { return time.Hour }
		})
		h.prov.inject("hold")
		c := call("s1", "c1", `{"n":1}`)
		res := h.exec(c)
		require.Equal(t, host.StatusPending, res.Status, "in progress at the provider: wait")
		require.Equal(t, h.clock().Add(time.Hour), res.NextAttemptAt)
		h.prov.releaseHeld()
		require.Eventually(t, func() bool { return h.prov.count() == 1 }, 10*time.Second, 5*time.Millisecond)
		h.advance(time.Hour)
		res = h.exec(c)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, "r-1", res.Receipt, "the provider replayed the held request's result")
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("refused attempts after an uncertain one end recovery_required", func(t *testing.T) {
		// Attempt 1's answer is lost (uncertain), attempts 2 and 3 are
		// refused before the provider acts (retryable): attempt 1 may
		// still have happened, so "failed" would be a lie.
		h := newHarness(t, "idempotent-retry", withDedup())
		h.prov.inject("apply_then_hang", "503", "503")
		res := h.exec(call("s1", "c1", `{"n":1}`))
		require.Equal(t, host.StatusRecoveryRequired, res.Status)
		require.Contains(t, res.Error, string(host.DecisionExhaustedUncertain))
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("refused attempts without an uncertain one end failed", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		h.prov.inject("503", "503", "503")
		res := h.exec(call("s1", "c1", `{"n":1}`))
		require.Equal(t, host.StatusFailed, res.Status)
		require.Zero(t, h.prov.count())
	})
}

// Reads never fence: a read whose every attempt times out fails (the
// runtime may simply ask again), and its session stays open.
func TestReadsNeverFence(t *testing.T) {
	h := newHarness(t, "manual")
	h.prov.hangReads(true)
	read := host.ToolCall{SessionID: "s1", ToolCallID: "r1", Tool: "effect.read", Arguments: []byte(`{}`)}
	res := h.exec(read)
	require.Equal(t, host.StatusFailed, res.Status)
	require.Equal(t, 3, res.Attempt)
	require.Equal(t, 3, h.prov.readCount())
	fenced, err := h.ex.Ledger().Fenced(context.Background(), "default", "s1")
	require.NoError(t, err)
	require.Empty(t, fenced)
	h.prov.hangReads(false)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "c2", `{"n":1}`)).Status, "the session is not fenced")

	// A read found dispatched after a crash is read again.
	c := host.ToolCall{SessionID: "s2", ToolCallID: "r2", Tool: "effect.read", Arguments: []byte(`{}`)}
	h.execCrashAt(crash.AfterDispatchRecord, c)
	h.reopen()
	res = h.exec(c)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 2, res.Attempt)

	// A resumed read in a session the ledger never saw simply runs.
	c = host.ToolCall{SessionID: "legacy", ToolCallID: "r3", Tool: "effect.read", Arguments: []byte(`{}`), Resumed: true}
	require.Equal(t, host.StatusSucceeded, h.exec(c).Status)
}

// Cancelling a call that waits for a retry while an earlier attempt may
// have taken effect cannot answer "cancelled": an operator decides.
func TestCancelOfAnUncertainRetryWaitNeedsAnOperator(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	h.reopenWith(func(o *host.Options) {
		o.InFlightBackoff = func(int) time.Duration { return time.Hour }
	})
	h.prov.inject("409")
	res := h.exec(call("s1", "c1", `{"n":1}`))
	require.Equal(t, host.StatusPending, res.Status)
	got, err := h.ex.Cancel(context.Background(), res.ExecutionID, "rita")
	require.NoError(t, err)
	require.Equal(t, host.StatusRecoveryRequired, got.Status)
	rec, _, err := h.ex.Get(context.Background(), res.ExecutionID)
	require.NoError(t, err)
	require.True(t, rec.CancelRequested)
	require.True(t, rec.Uncertain)
	require.Equal(t, ledger.StateRecoveryRequired, rec.State)
}

// lazyRecorder is a ledger that remembers which transitions were lazy.
type lazyRecorder struct {
	ledger.Ledger
	mu   sync.Mutex
	lazy map[string][]bool // execution id → Lazy of each Apply
}

func (l *lazyRecorder) Apply(ctx context.Context, id string, t ledger.Transition) (ledger.Record, error) {
	l.mu.Lock()
	l.lazy[id] = append(l.lazy[id], t.Lazy)
	l.mu.Unlock()
	return l.Ledger.Apply(ctx, id, t)
}

// A succeeded outcome is written lazily (one fsync per execution) only
// where the declared durability is lazy: idempotent-retry and reconcile by
// default. A failed outcome, and any outcome of a manual call, is synced.
func TestOutcomeDurabilityFollowsThePolicy(t *testing.T) {
	for _, tc := range []struct {
		policy string
		fault  string
		want   []bool
	}{
		{"idempotent-retry", "", []bool{true}},
		{"reconcile", "", []bool{true}},
		{"manual", "", []bool{false}},
		{"idempotent-retry", "400", []bool{false}},
	} {
		t.Run(tc.policy+"/"+tc.fault, func(t *testing.T) {
			h := newHarness(t, tc.policy)
			rec := &lazyRecorder{lazy: map[string][]bool{}}
			h.reopenWith(func(o *host.Options) {
				db, err := ledger.Open(context.Background(), ledger.Options{Dir: filepath.Join(t.TempDir(), "ledger")})
				require.NoError(t, err)
				t.Cleanup(func() { _ = db.Close() })
				rec.Ledger = db
				o.Ledger = rec
			})
			if tc.fault != "" {
				h.prov.inject(tc.fault)
			}
			res := h.exec(call("s1", "c1", `{"n":1}`))
			require.Equal(t, tc.want, rec.lazy[res.ExecutionID], "status %s", res.Status)
		})
	}
}

// Open fills each connector's pool in the background (limits.instances is
// 2 in the harness), unless told not to.
func TestOpenPrewarmsThePools(t *testing.T) {
	h := newHarness(t, "manual")
	require.Eventually(t, func() bool {
		st, ok := h.ex.PoolStats("effect")
		return ok && st.Idle == 2 && st.Created == 2
	}, 30*time.Second, 10*time.Millisecond)

	h.reopenWith(func(o *host.Options) { o.PrewarmInstances = -1 })
	st, ok := h.ex.PoolStats("effect")
	require.True(t, ok)
	require.Equal(t, uint64(1), st.Created, "only the instance that described the module")
}
