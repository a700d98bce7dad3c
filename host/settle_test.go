package host_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
)

// settle is call c as a runtime settles it on resume.
func settle(c host.ToolCall) host.ToolCall {
	c.Settle = true
	return c
}

// A runtime resuming from its saved state settles each call that has no
// result there by its original ids: what the ledger recorded answers it,
// an approved call runs once, and a call the host never received is
// recorded as never run, so that neither the settle nor the original
// request, arriving late, runs it.
func TestSettle(t *testing.T) {
	t.Run("a finished call answers its recorded outcome", func(t *testing.T) {
		h := newHarness(t, "manual")
		c := call("s1", "c1", `{"n":1}`)
		first := h.exec(c)
		require.Equal(t, host.StatusSucceeded, first.Status)
		got := h.exec(settle(c))
		require.Equal(t, host.StatusSucceeded, got.Status)
		require.True(t, got.Recorded)
		require.Equal(t, first.Receipt, got.Receipt)
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("a call never received is recorded as never run, and so is its late original", func(t *testing.T) {
		h := newHarness(t, "manual")
		c := call("s1", "c1", `{"n":1}`)
		got := h.exec(settle(c))
		require.Equal(t, host.StatusCancelled, got.Status)
		require.Equal(t, host.NeverReceived, got.Error)
		require.Zero(t, got.Attempt)
		require.Equal(t, "settled_without_record>cancelled#0", joined(h.events(got.ExecutionID)))
		late := h.exec(c)
		require.Equal(t, host.StatusCancelled, late.Status)
		require.True(t, late.Recorded)
		require.Zero(t, h.prov.count(), "nothing may run for a call settled as never received")
	})
	t.Run("an approved call runs once when settled", func(t *testing.T) {
		h := newHarness(t, "manual", withApproval())
		c := call("s1", "c1", `{"n":1}`)
		res := h.exec(c)
		require.Equal(t, host.StatusAwaitingApproval, res.Status)
		require.Equal(t, host.StatusAwaitingApproval, h.exec(settle(c)).Status, "undecided, a settled call still waits")
		_, err := h.ex.Approve(context.Background(), res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
		require.NoError(t, err)
		got := h.exec(settle(c))
		require.Equal(t, host.StatusSucceeded, got.Status)
		again := h.exec(settle(c))
		require.Equal(t, host.StatusSucceeded, again.Status)
		require.True(t, again.Recorded)
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("a dispatched call without an outcome goes through its policy", func(t *testing.T) {
		h := newHarness(t, "idempotent-retry", withDedup())
		c := call("s1", "c1", `{"n":1}`)
		h.execCrashAt(crash.AfterPluginReturn, c)
		h.reopen()
		got := h.exec(settle(c))
		require.Equal(t, host.StatusSucceeded, got.Status)
		require.Equal(t, 1, h.prov.count(), "the same key again: the provider applied it once")
	})
	t.Run("other arguments under the same ids are an intent mismatch", func(t *testing.T) {
		h := newHarness(t, "manual")
		h.exec(call("s1", "c1", `{"n":1}`))
		_, err := h.ex.Execute(context.Background(), settle(call("s1", "c1", `{"n":2}`)))
		var mismatch *host.IntentMismatchError
		require.ErrorAs(t, err, &mismatch)
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("resumed in a session the ledger never saw: recovery_required, not never-run", func(t *testing.T) {
		h := newHarness(t, "manual")
		c := settle(call("old", "c1", `{"n":1}`))
		c.Resumed = true
		got := h.exec(c)
		require.Equal(t, host.StatusRecoveryRequired, got.Status)
		require.Zero(t, h.prov.count())
	})
}

// AwaitDecision returns once a reviewer decided; the runtime then sends
// the same call again and an approved one runs once.
func TestAwaitDecision(t *testing.T) {
	gated := func(t *testing.T) (*harness, host.ToolCall, host.Result) {
		h := newHarness(t, "manual", withApproval())
		c := call("s1", "c1", `{"n":1}`)
		res := h.exec(c)
		require.Equal(t, host.StatusAwaitingApproval, res.Status)
		return h, c, res
	}
	t.Run("approved while waiting", func(t *testing.T) {
		h, c, res := gated(t)
		go func() {
			time.Sleep(50 * time.Millisecond)
			_, _ = h.ex.Approve(context.Background(), res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := h.ex.AwaitDecision(ctx, res.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, host.StatusPending, got.Status, "approved, not yet dispatched")
		require.Zero(t, h.prov.count(), "waiting dispatches nothing")
		require.Equal(t, host.StatusSucceeded, h.exec(c).Status)
		require.Equal(t, 1, h.prov.count())
	})
	t.Run("rejected while waiting", func(t *testing.T) {
		h, _, res := gated(t)
		go func() {
			time.Sleep(50 * time.Millisecond)
			_, _ = h.ex.Reject(context.Background(), res.Approval.ID, host.Decision{By: "rita", Reason: "no"})
		}()
		got, err := h.ex.AwaitDecision(context.Background(), res.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, host.StatusRejected, got.Status)
		require.Zero(t, h.prov.count())
	})
	t.Run("undecided until the context ends", func(t *testing.T) {
		h, _, res := gated(t)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := h.ex.AwaitDecision(ctx, res.ExecutionID)
		require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	})
	t.Run("past its expiry it returns, and the call sent again is expired", func(t *testing.T) {
		h, c, res := gated(t)
		h.advance(48 * time.Hour)
		got, err := h.ex.AwaitDecision(context.Background(), res.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, host.StatusAwaitingApproval, got.Status)
		require.Equal(t, host.StatusExpired, h.exec(c).Status)
		require.Zero(t, h.prov.count())
	})
	t.Run("an unknown execution", func(t *testing.T) {
		h := newHarness(t, "manual")
		_, err := h.ex.AwaitDecision(context.Background(), "ex_nosuchexecution")
		require.ErrorIs(t, err, host.ErrNotFound)
	})
}
