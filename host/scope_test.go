package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/ledgertest"
)

// A scope confines a caller to its namespaces: its calls run there, a call
// naming another namespace is refused before anything is recorded, and
// every id of another namespace answers as an unknown one, word for word.
func TestScopeConfinesNamespaces(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	bg := context.Background()
	a := host.WithScope(bg, host.Scope{Principal: "tenant-a", Namespaces: []string{"tenant-a"}})
	b := host.WithScope(bg, host.Scope{Principal: "tenant-b", Namespaces: []string{"tenant-b"}})

	res, err := h.ex.Execute(a, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, "tenant-a", res.Namespace, "a call naming no namespace runs in the scope's first")
	require.Equal(t, ledger.ExecutionID("tenant-a", "s1", "c1"), res.ExecutionID)

	unknown := func(fn func(ctx context.Context, id string) error) {
		t.Helper()
		errB := fn(b, res.ExecutionID)
		errNone := fn(b, "ex_nope")
		require.ErrorIs(t, errB, host.ErrNotFound)
		suffix := strings.TrimPrefix(res.ExecutionID, "ex_")
		require.Equal(t, strings.ReplaceAll(host.Detail(errNone), "_nope", "_"+suffix), host.Detail(errB), "another namespace's id answers as an unknown one")
	}
	unknown(func(ctx context.Context, id string) error { _, _, err := h.ex.Get(ctx, id); return err })
	unknown(func(ctx context.Context, id string) error { _, err := h.ex.Cancel(ctx, id, "tenant-b"); return err })
	unknown(func(ctx context.Context, id string) error {
		_, err := h.ex.Resolve(ctx, id, host.Resolution{By: "tenant-b", Reason: "mine"})
		return err
	})
	unknown(func(ctx context.Context, id string) error {
		_, err := h.ex.Approve(ctx, "ap_"+strings.TrimPrefix(id, "ex_"), host.Decision{By: "bob", ArgsDigest: res.ArgsDigest})
		return err
	})
	unknown(func(ctx context.Context, id string) error {
		_, err := h.ex.Reject(ctx, "ap_"+strings.TrimPrefix(id, "ex_"), host.Decision{By: "bob"})
		return err
	})

	named := call("s1", "c2", `{"n":2}`)
	named.Namespace = "tenant-a"
	_, err = h.ex.Execute(b, named)
	require.ErrorIs(t, err, host.ErrNamespaceForbidden)
	require.Contains(t, host.Detail(err), `principal "tenant-b" acts in namespace "tenant-b", not "tenant-a"`)
	_, err = h.ex.Ledger().Get(bg, ledger.ExecutionID("tenant-a", "s1", "c2"))
	require.ErrorIs(t, err, ledger.ErrNotFound, "nothing was recorded")

	// A resumed call of b in a session name a uses stays in b's namespace.
	resumed := call("s2", "x", `{"n":3}`)
	resumed.Resumed = true
	rr, err := h.ex.Execute(b, resumed)
	require.NoError(t, err)
	require.Equal(t, host.StatusRecoveryRequired, rr.Status)
	require.Equal(t, "tenant-b", rr.Namespace)
	first, err := h.ex.Execute(a, call("s2", "c1", `{"n":4}`))
	require.NoError(t, err, "a's session s2 is not fenced by b")
	require.Equal(t, host.StatusAwaitingApproval, first.Status)

	// Recover under b's scope decides and reports b's executions only.
	rep, err := h.ex.Recover(b)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Pending)
	require.Len(t, rep.Uncertain, 1)
	require.Equal(t, rr.ExecutionID, rep.Uncertain[0].ExecutionID)

	// Unscoped (the Go API, a server's own passes): everything.
	_, _, err = h.ex.Get(bg, res.ExecutionID)
	require.NoError(t, err)
	got, err := h.ex.Approve(a, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.ArgsDigest})
	require.NoError(t, err)
	require.Equal(t, host.StatusPending, got.Status)
}

// A scope's limits refuse calls beyond them before anything is recorded,
// and answer calls already recorded as ever.
func TestScopeLimits(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	s := host.Scope{Principal: "tenant-a", Namespaces: []string{"tenant-a"}, MaxPendingApprovals: 2, MaxArgumentBytes: 16}
	ctx := host.WithScope(context.Background(), s)
	first, err := h.ex.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	_, err = h.ex.Execute(ctx, call("s1", "c2", `{"n":2}`))
	require.NoError(t, err)
	_, err = h.ex.Execute(ctx, call("s1", "c3", `{"n":3}`))
	require.ErrorIs(t, err, host.ErrPendingApprovalsLimit)
	require.Contains(t, host.Detail(err), `2 executions await approval in namespace "tenant-a", the limit of principal "tenant-a"`)
	again, err := h.ex.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err, "a recorded call is answered at the limit")
	require.Equal(t, first.ExecutionID, again.ExecutionID)
	// Other namespaces' approvals do not count against it.
	other := host.WithScope(context.Background(), host.Scope{Principal: "tenant-b", Namespaces: []string{"tenant-b"}, MaxPendingApprovals: 1})
	_, err = h.ex.Execute(other, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	_, err = h.ex.Reject(ctx, first.Approval.ID, host.Decision{By: "rita"})
	require.NoError(t, err)
	_, err = h.ex.Execute(ctx, call("s1", "c3", `{"n":3}`))
	require.NoError(t, err, "a decided request makes room")

	_, err = h.ex.Execute(ctx, call("s1", "c4", `{"n":"0123456789"}`))
	require.ErrorIs(t, err, host.ErrArgumentsTooLarge)
	require.Contains(t, host.Detail(err), "the arguments are 18 bytes, more than the 16")
	_, err = h.ex.Ledger().Get(context.Background(), ledger.ExecutionID("tenant-a", "s1", "c4"))
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// The rate is a token bucket on the executor's clock: a burst, then one
// call per 1/rate, with the wait until the next one said.
func TestScopeRate(t *testing.T) {
	h := newHarness(t, "manual")
	ctx := host.WithScope(context.Background(), host.Scope{Principal: "tenant-a", Rate: host.NewRate(2, 3)})
	for i := range 3 {
		_, err := h.ex.Execute(ctx, call("s1", "c"+string(rune('a'+i)), `{"n":1}`))
		require.NoError(t, err)
	}
	_, err := h.ex.Execute(ctx, call("s1", "cz", `{"n":1}`))
	var rl *host.RateLimitedError
	require.ErrorAs(t, err, &rl)
	require.ErrorIs(t, err, host.ErrRateLimited)
	require.Equal(t, 500*time.Millisecond, rl.RetryAfter)
	require.Contains(t, host.Detail(err), `principal "tenant-a" may make 2 calls per second`)
	_, err = h.ex.Ledger().Get(context.Background(), ledger.ExecutionID(ledger.DefaultNamespace, "s1", "cz"))
	require.ErrorIs(t, err, ledger.ErrNotFound)
	h.advance(500 * time.Millisecond)
	_, err = h.ex.Execute(ctx, call("s1", "cz", `{"n":1}`))
	require.NoError(t, err)
	_, err = h.ex.Execute(ctx, call("s1", "cy", `{"n":1}`))
	require.ErrorIs(t, err, host.ErrRateLimited)
}

// At the approval limit a fenced session still answers "fenced": the
// runtime must wait for an operator, not for room, and nothing is
// recorded.
func TestScopeLimitFencedSession(t *testing.T) {
	h := newHarness(t, "manual", withApproval())
	ctx := host.WithScope(context.Background(), host.Scope{Principal: "tenant-a", MaxPendingApprovals: 1})
	_, err := h.ex.Execute(ctx, call("s2", "c1", `{"n":1}`))
	require.NoError(t, err, "the one approval the limit allows")
	fence := ledgertest.Dispatched("uncertain")
	fence.SessionID, fence.ToolCallID = "s1", "c0"
	fence.State, fence.Attempt, fence.Resumed = ledger.StateRecoveryRequired, 0, true
	_, err = h.ex.Ledger().Create(context.Background(), fence, ledger.Event{Actor: "test"})
	require.NoError(t, err)

	_, err = h.ex.Execute(ctx, call("s1", "c2", `{"n":2}`))
	var fe *host.FencedError
	require.ErrorAs(t, err, &fe, "fenced, not at the limit")
	require.Len(t, fe.Calls, 1)
	require.Equal(t, "c0", fe.Calls[0].ToolCallID)
	_, err = h.ex.Ledger().Get(context.Background(), ledger.ExecutionID(ledger.DefaultNamespace, "s1", "c2"))
	require.ErrorIs(t, err, ledger.ErrNotFound)
	_, err = h.ex.Execute(ctx, call("s2", "c3", `{"n":3}`))
	require.ErrorIs(t, err, host.ErrPendingApprovalsLimit, "an unfenced session meets the limit")
}
