package ledgertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
)

// window is the duplicate-intent window of the guarded records below.
const window = 10 * time.Minute

// guarded returns a guarded, ungated record of the payment intent the
// tests repeat: same session, operation and argument digest, id id.
func guarded(id string) ledger.Record {
	r := Dispatched(id)
	r.ArgsDigest = "digest-of-the-same-arguments"
	r.DuplicateWindow = window
	return r
}

// held is rec held for a reviewer as a possible duplicate of earlier.
func held(rec ledger.Record, earlier string, now time.Time) ledger.Record {
	rec.State, rec.Attempt, rec.DuplicateOf = ledger.StateAwaitingApproval, 0, earlier
	rec.Approval = &ledger.Approval{ID: ledger.ApprovalID(rec.ID), ArgsDigest: rec.ArgsDigest, PolicyVersion: "pv",
		RequestedAt: now, ExpiresAt: now.Add(time.Hour), Decision: ledger.ApprovalPending}
	return rec
}

// DuplicateIntent: a guarded Create finds the earliest execution of the
// same intent (namespace, session, operation, argument digest) created
// within its window that succeeded or is still in flight, and writes
// nothing (ErrDuplicate with that record); a recorded id is ErrExists
// first; failed, rejected and pruned executions, other sessions,
// namespaces, operations and arguments, unguarded records and the end of
// the window do not count; a held or answered duplicate (DuplicateOf) is
// created without the check and counts itself.
func DuplicateIntent(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := NewClock()
	_, l := open(t, b, clock.Now)
	create := func(r ledger.Record) (ledger.Record, error) {
		return l.Create(ctx, r, ledger.Event{Decision: "dispatch"})
	}

	a, err := create(guarded("a"))
	require.NoError(t, err)
	require.Equal(t, window, a.DuplicateWindow)

	clock.Advance(time.Minute)
	got, err := create(guarded("b"))
	require.ErrorIs(t, err, ledger.ErrDuplicate)
	require.Equal(t, a, got, "the earlier execution")
	_, err = l.Get(ctx, "b")
	require.ErrorIs(t, err, ledger.ErrNotFound, "nothing written")

	// The same id again is the same call: ErrExists, before any check.
	got, err = create(guarded("a"))
	require.ErrorIs(t, err, ledger.ErrExists)
	require.NotErrorIs(t, err, ledger.ErrDuplicate)
	require.Equal(t, a, got)

	// The caller's answer: b held for a reviewer, created unchecked.
	hb, err := create(held(guarded("b"), "a", clock.Now()))
	require.NoError(t, err)
	require.Equal(t, "a", hb.DuplicateOf)
	require.Equal(t, ledger.StateAwaitingApproval, hb.State)

	// Another record of the intent finds the earliest one in the window.
	clock.Advance(time.Minute)
	got, err = create(guarded("c"))
	require.ErrorIs(t, err, ledger.ErrDuplicate)
	require.Equal(t, "a", got.ID)

	// What is not the same intent, or not guarded, is created.
	for i, mut := range []func(r *ledger.Record){
		func(r *ledger.Record) { r.SessionID = "s2" },
		func(r *ledger.Record) { r.Namespace = "tenant-b" },
		func(r *ledger.Record) { r.Operation = "refund_payment" },
		func(r *ledger.Record) { r.Connector = "billing" },
		func(r *ledger.Record) { r.ArgsDigest = "digest-of-other-arguments" },
		func(r *ledger.Record) { r.DuplicateWindow = 0 },
	} {
		r := guarded(fmt.Sprint("other-", i))
		mut(&r)
		_, err := create(r)
		require.NoError(t, err, "%+v", r)
		clock.Advance(time.Nanosecond)
	}

	// Once a has failed and b was rejected, nothing of the intent counts.
	_, err = l.Apply(ctx, "a", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateFailed, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "permanent_error", Error: "card declined", Source: "connector", Attempt: 1}})
	require.NoError(t, err)
	rej := *hb.Approval
	rej.Decision = ledger.ApprovalRejected
	_, err = l.Apply(ctx, "b", ledger.Transition{From: ledger.StateAwaitingApproval, To: ledger.StateRejected, Approval: &rej})
	require.NoError(t, err)
	_, err = create(guarded("d"))
	require.NoError(t, err, "a failed and a rejected execution do not count")

	// The window's end: at exactly the window d still counts, after it not.
	clock.Advance(window)
	_, err = create(guarded("e"))
	require.ErrorIs(t, err, ledger.ErrDuplicate)
	clock.Advance(time.Nanosecond)
	e, err := create(guarded("e"))
	require.NoError(t, err, "d was created more than the window before e")

	// A succeeded execution counts, and an answered duplicate records its
	// outcome without dispatching.
	_, err = l.Apply(ctx, "e", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Receipt: "pi_1", Result: []byte(`{"id":"pi_1"}`), Source: "connector", Attempt: 1}})
	require.NoError(t, err)
	_, err = l.Apply(ctx, "d", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateFailed, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "permanent_error", Error: "card declined", Source: "connector", Attempt: 1}})
	require.NoError(t, err)
	clock.Advance(time.Second)
	got, err = create(guarded("f"))
	require.ErrorIs(t, err, ledger.ErrDuplicate)
	require.Equal(t, e.ID, got.ID)
	require.Equal(t, ledger.StateSucceeded, got.State)
	ans := guarded("f")
	ans.State, ans.Attempt, ans.DuplicateOf = ledger.StateSucceeded, 0, "e"
	ans.Outcome = &ledger.Outcome{Kind: "ok", Receipt: "pi_1", Result: []byte(`{"id":"pi_1"}`), Source: ledger.OutcomeSourceDuplicate}
	f, err := l.Create(ctx, ans, ledger.Event{Decision: "duplicate_answered"})
	require.NoError(t, err)
	require.Equal(t, ledger.StateSucceeded, f.State)
	reread, err := l.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, f, reread)
	require.NoError(t, l.Pending(ctx, func(r ledger.Record) error {
		require.NotEqual(t, "f", r.ID, "an answered duplicate is terminal")
		return nil
	}))

	// A pruned execution no longer counts.
	clock.Advance(time.Second)
	n, err := l.Prune(ctx, clock.Now())
	require.NoError(t, err)
	require.Positive(t, n)
	_, err = create(guarded("g"))
	require.NoError(t, err, "e and f were pruned")

	// Of records created at the same instant, the one named is the
	// original, not a held duplicate that sorts first.
	z := guarded("z1")
	z.SessionID = "s3"
	_, err = create(z)
	require.NoError(t, err)
	h1 := held(guarded("a1"), "z1", clock.Now())
	h1.SessionID = "s3"
	_, err = create(h1)
	require.NoError(t, err)
	next := guarded("a2")
	next.SessionID = "s3"
	got, err = create(next)
	require.ErrorIs(t, err, ledger.ErrDuplicate)
	require.Equal(t, "z1", got.ID)

	Invariants(t, l, []string{"a", "a1", "b", "d", "e", "f", "g", "other-0", "other-1", "other-2", "other-3", "other-4", "other-5", "z1"},
		[][2]string{{ledger.DefaultNamespace, "s1"}, {ledger.DefaultNamespace, "s2"}, {ledger.DefaultNamespace, "s3"}, {"tenant-b", "s1"}})
	if b.Check != nil {
		b.Check(t, l)
	}
}

// DuplicateRefusals: the grammar's rules for the guard's fields.
func DuplicateRefusals(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	answered := func(id string) ledger.Record {
		r := guarded(id)
		r.State, r.Attempt, r.DuplicateOf = ledger.StateSucceeded, 0, "a"
		r.Outcome = &ledger.Outcome{Kind: "ok", Source: ledger.OutcomeSourceDuplicate}
		return r
	}
	for _, tc := range []struct {
		name string
		rec  func() ledger.Record
		want error
	}{
		{"negative window", func() ledger.Record { r := guarded("x"); r.DuplicateWindow = -1; return r }, ledger.ErrInvalid},
		{"duplicate dispatched", func() ledger.Record { r := guarded("x"); r.DuplicateOf = "a"; return r }, ledger.ErrIllegalTransition},
		{"succeeded without a duplicate", func() ledger.Record { r := answered("x"); r.DuplicateOf = ""; return r }, ledger.ErrIllegalTransition},
		{"answered from the connector", func() ledger.Record { r := answered("x"); r.Outcome.Source = "connector"; return r }, ledger.ErrIllegalTransition},
		{"answered at attempt 1", func() ledger.Record { r := answered("x"); r.Attempt, r.Outcome.Attempt = 1, 1; return r }, ledger.ErrIllegalTransition},
		{"answered without an outcome", func() ledger.Record { r := answered("x"); r.Outcome = nil; return r }, ledger.ErrIllegalTransition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Create(ctx, tc.rec(), ledger.Event{})
			require.ErrorIs(t, err, tc.want)
			_, err = l.Get(ctx, "x")
			require.ErrorIs(t, err, ledger.ErrNotFound)
		})
	}
}

// ConcurrentDuplicates: racing guarded Creates of one intent under
// different ids (a runtime re-issuing a call under new tool-call ids, on
// one node or several) create one execution; every other gets
// ErrDuplicate and the winner's record, and writes nothing.
func ConcurrentDuplicates(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	var ids []string
	var sessions [][2]string
	for round := range 8 {
		recs := make([]ledger.Record, racers)
		errs := race(func(i int) error {
			r := guarded(fmt.Sprintf("r%d-%d", round, i))
			r.SessionID = fmt.Sprint("s-", round)
			var err error
			recs[i], err = l.Create(ctx, r, ledger.Event{})
			return err
		})
		w := winner(t, errs)
		for i, err := range errs {
			id := fmt.Sprintf("r%d-%d", round, i)
			ids = append(ids, id)
			if i == w {
				continue
			}
			require.ErrorIs(t, err, ledger.ErrDuplicate)
			require.Equal(t, recs[w], recs[i])
			_, gerr := l.Get(ctx, id)
			require.ErrorIs(t, gerr, ledger.ErrNotFound)
		}
		sessions = append(sessions, [2]string{ledger.DefaultNamespace, fmt.Sprint("s-", round)})
	}
	Invariants(t, l, sortedCopy(ids), sessions)
	if b.Check != nil {
		b.Check(t, l)
	}
}
