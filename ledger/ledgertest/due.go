package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
)

// DueAndAwaiting: Due lists what a recovery pass must look at by a time,
// in due order (a dispatched execution at once, a retry when it is due,
// an approval request or an unused approval when it expires, never a
// recovery_required or terminal one); AwaitingApproval counts a
// namespace's approval requests; List filters by a set of namespaces; all
// of it survives a reopen.
func DueAndAwaiting(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := NewClock()
	st := b.New(t)
	l := st.Open(t, clock.Now)
	defer func() { _ = l.Close() }()
	t0 := clock.Now()
	gated := func(id, ns string, ttl time.Duration) {
		t.Helper()
		r := Dispatched(id)
		r.Namespace, r.State, r.Attempt = ns, ledger.StateAwaitingApproval, 0
		r.Approval = &ledger.Approval{ID: "ap_" + id, ArgsDigest: r.ArgsDigest, ExpiresAt: t0.Add(ttl), Decision: ledger.ApprovalPending}
		_, err := l.Create(ctx, r, ledger.Event{})
		require.NoError(t, err)
	}
	gated("g1", ledger.DefaultNamespace, time.Hour)
	gated("g2", "tenant-b", 30*time.Minute)
	_, err := l.Create(ctx, Dispatched("d1"), ledger.Event{})
	require.NoError(t, err)
	rr := Dispatched("r1")
	rr.State = ledger.StateRecoveryRequired
	_, err = l.Create(ctx, rr, ledger.Event{})
	require.NoError(t, err)
	_, err = l.Create(ctx, Dispatched("w"), ledger.Event{})
	require.NoError(t, err)
	_, err = l.Apply(ctx, "w", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRetryWait, Attempt: 1,
		NextAttemptAt: t0.Add(10 * time.Second), Outcome: &ledger.Outcome{Kind: "retryable_error", Source: "connector", Attempt: 1}})
	require.NoError(t, err)

	due := func(until time.Time) []string {
		t.Helper()
		var ids []string
		require.NoError(t, l.Due(ctx, until, func(id string) error { ids = append(ids, id); return nil }))
		return ids
	}
	awaiting := func(ns string) int {
		t.Helper()
		n, err := l.AwaitingApproval(ctx, ns)
		require.NoError(t, err)
		return n
	}
	check := func() {
		t.Helper()
		require.Equal(t, []string{"d1"}, due(t0), "at once: only the dispatched execution")
		require.Equal(t, []string{"d1", "w"}, due(t0.Add(10*time.Second)), "the retry once it is due")
		require.Equal(t, []string{"d1", "w", "g2"}, due(t0.Add(30*time.Minute)))
		require.Equal(t, []string{"d1", "w", "g2", "g1"}, due(t0.Add(24*time.Hour)), "never the recovery_required r1")
		require.Equal(t, 1, awaiting(ledger.DefaultNamespace))
		require.Equal(t, 1, awaiting("tenant-b"))
		require.Equal(t, 0, awaiting("tenant-c"))
		require.Equal(t, 2, awaiting(""))
	}
	check()
	require.NoError(t, l.Close())
	l = st.Open(t, clock.Now)
	check()

	got, err := l.List(ctx, ledger.Filter{Namespaces: []string{"tenant-b"}})
	require.NoError(t, err)
	require.Equal(t, []string{"g2"}, recIDs(got))
	got, err = l.List(ctx, ledger.Filter{Namespaces: []string{"tenant-b", ledger.DefaultNamespace}, Order: ledger.OrderNewest, Limit: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"g1", "g2", "d1", "r1", "w"}, recIDs(got))
	got, err = l.List(ctx, ledger.Filter{Namespaces: []string{"tenant-b"}, Namespace: ledger.DefaultNamespace})
	require.NoError(t, err)
	require.Empty(t, got, "Namespace narrows Namespaces")

	stop := errors.New("stop")
	var seen []string
	err = l.Due(ctx, t0.Add(24*time.Hour), func(id string) error { seen = append(seen, id); return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, []string{"d1"}, seen)

	// An approved call stays due at its approval's expiry; a decided
	// request leaves the count; a terminal execution is never due.
	a := ledger.Approval{ID: "ap_g1", ArgsDigest: "d-g1", ExpiresAt: t0.Add(time.Hour), Decision: ledger.ApprovalApproved, By: "rita"}
	_, err = l.Apply(ctx, "g1", ledger.Transition{From: ledger.StateAwaitingApproval, To: ledger.StateApproved, Approval: &a})
	require.NoError(t, err)
	r := ledger.Approval{ID: "ap_g2", ArgsDigest: "d-g2", ExpiresAt: t0.Add(30 * time.Minute), Decision: ledger.ApprovalRejected, By: "rita"}
	_, err = l.Apply(ctx, "g2", ledger.Transition{From: ledger.StateAwaitingApproval, To: ledger.StateRejected, Approval: &r})
	require.NoError(t, err)
	_, err = l.Apply(ctx, "w", ledger.Transition{From: ledger.StateRetryWait, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"d1", "w"}, due(t0), "w is dispatched again: due at once")
	require.Equal(t, []string{"d1", "w", "g1"}, due(t0.Add(24*time.Hour)))
	require.Equal(t, 0, awaiting(""))
	require.Equal(t, 0, awaiting("tenant-b"))
	require.NoError(t, l.Close())
	l = st.Open(t, clock.Now)
	require.Equal(t, []string{"d1", "w", "g1"}, due(t0.Add(24*time.Hour)))
	require.Equal(t, 0, awaiting(""))
	Invariants(t, l, []string{"d1", "g1", "g2", "r1", "w"}, nil)
	if b.Check != nil {
		b.Check(t, l)
	}
}

// ListDue: ledger.OrderDue lists what waits, soonest due first (for
// approval requests: the soonest to expire first), whatever order the
// records were created in; a listing paged by position (After, AfterDue)
// lists every record due once while records of the page before are
// decided between its pages; a namespace filter keeps only its records
// however many of another namespace come first; records never due
// (recovery_required, terminal) are not listed.
func ListDue(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := NewClock()
	_, l := open(t, b, clock.Now)
	t0 := clock.Now()
	gated := func(id, ns string, ttl time.Duration) {
		t.Helper()
		r := Dispatched(id)
		r.Namespace, r.State, r.Attempt = ns, ledger.StateAwaitingApproval, 0
		r.Approval = &ledger.Approval{ID: "ap_" + id, ArgsDigest: r.ArgsDigest, ExpiresAt: t0.Add(ttl), Decision: ledger.ApprovalPending}
		_, err := l.Create(ctx, r, ledger.Event{})
		require.NoError(t, err)
	}
	// tenant-a's call is created first and expires first; tenant-b's
	// flood comes after it, each expiring later than the one before, and
	// two of them at the same instant (id order between them).
	gated("a1", "tenant-a", time.Minute)
	want := []string{"a1"}
	for i := range 12 {
		id := fmt.Sprintf("b%02d", i)
		gated(id, "tenant-b", time.Duration(2+i)*time.Minute)
		want = append(want, id)
	}
	gated("b11x", "tenant-b", 13*time.Minute) // the same expiry as b11
	want = append(want, "b11x")
	_, err := l.Create(ctx, Dispatched("d1"), ledger.Event{})
	require.NoError(t, err)
	rr := Dispatched("r1")
	rr.State = ledger.StateRecoveryRequired
	_, err = l.Create(ctx, rr, ledger.Event{})
	require.NoError(t, err)

	awaiting := ledger.Filter{State: ledger.StateAwaitingApproval, Order: ledger.OrderDue, Limit: 1000}
	got, err := l.List(ctx, awaiting)
	require.NoError(t, err)
	require.Equal(t, want, recIDs(got), "soonest expiry first")
	got, err = l.List(ctx, ledger.Filter{Order: ledger.OrderDue, Limit: 1000})
	require.NoError(t, err)
	require.Equal(t, append([]string{"d1"}, want...), recIDs(got), "the dispatched call is due at once; never the recovery_required r1")

	f := awaiting
	f.Limit = 5
	var seen []string
	for page := 0; ; page++ {
		got, err := l.List(ctx, f)
		require.NoError(t, err)
		seen = append(seen, recIDs(got)...)
		if len(got) < f.Limit {
			break
		}
		last := got[len(got)-1]
		due, ok := ledger.DueAt(last)
		require.True(t, ok)
		f.After, f.AfterDue = last.ID, due
		if page == 0 {
			// The page's last call is rejected before the next page is
			// read: the position still continues the listing.
			a := *last.Approval
			a.Decision, a.By = ledger.ApprovalRejected, "rita"
			_, err := l.Apply(ctx, last.ID, ledger.Transition{From: ledger.StateAwaitingApproval, To: ledger.StateRejected, Approval: &a})
			require.NoError(t, err)
		}
	}
	require.Equal(t, want, seen, "every call once, in expiry order")

	got, err = l.List(ctx, ledger.Filter{State: ledger.StateAwaitingApproval, Order: ledger.OrderDue, Namespaces: []string{"tenant-a"}, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []string{"a1"}, recIDs(got))
	got, err = l.List(ctx, ledger.Filter{State: ledger.StateAwaitingApproval, Order: ledger.OrderDue, Namespace: "tenant-b", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"b00", "b01"}, recIDs(got))
}
