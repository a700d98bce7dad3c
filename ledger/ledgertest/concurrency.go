package ledgertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
)

// racers is the number of goroutines that race one write.
const racers = 64

// race runs fn(i) in racers goroutines released together and returns
// their errors.
func race(fn func(i int) error) []error {
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// winner returns the index of the one nil error, failing t unless there is
// exactly one.
func winner(t *testing.T, errs []error) int {
	t.Helper()
	w := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, w, "two racers succeeded")
			w = i
		}
	}
	require.NotEqual(t, -1, w, "no racer succeeded: %v", errs)
	return w
}

// ConcurrentCreateSameID: racing Creates of one id (the same call issued
// by many replicas at once) create it once; every other gets ErrExists and
// the record that won.
func ConcurrentCreateSameID(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	recs := make([]ledger.Record, racers)
	errs := race(func(i int) error {
		r := Dispatched("same")
		r.ArgsDigest = fmt.Sprint("digest-", i)
		var err error
		recs[i], err = l.Create(ctx, r, ledger.Event{})
		return err
	})
	w := winner(t, errs)
	for i, err := range errs {
		if i != w {
			require.ErrorIs(t, err, ledger.ErrExists)
			require.Equal(t, recs[w], recs[i])
		}
	}
	evs, err := l.Events(ctx, "same")
	require.NoError(t, err)
	require.Len(t, evs, 1)
	Invariants(t, l, []string{"same"}, [][2]string{{ledger.DefaultNamespace, "s1"}})
}

// ConcurrentDispatchOnce: identical concurrent dispatches of one approved
// call, and identical concurrent re-dispatches after a crash, each write
// exactly one dispatch; the others lose with ErrConflict.
func ConcurrentDispatchOnce(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	r := Dispatched("gated")
	r.State, r.Attempt = ledger.StateAwaitingApproval, 0
	_, err := l.Create(ctx, r, ledger.Event{})
	require.NoError(t, err)
	_, err = l.Apply(ctx, "gated", ledger.Transition{From: ledger.StateAwaitingApproval, To: ledger.StateApproved,
		Approval: &ledger.Approval{ID: "ap", Decision: ledger.ApprovalApproved}})
	require.NoError(t, err)
	steps := []ledger.Transition{
		{From: ledger.StateApproved, FromAttempt: 0, To: ledger.StateDispatched, Attempt: 1},
		{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2, Uncertain: true},
	}
	for n, tr := range steps {
		got := make([]ledger.Record, racers)
		errs := race(func(i int) error {
			tr := tr
			tr.Event = ledger.Event{Decision: "dispatch", Actor: fmt.Sprint("node-", i)}
			var err error
			got[i], err = l.Apply(ctx, "gated", tr)
			return err
		})
		w := winner(t, errs)
		for i, err := range errs {
			if i != w {
				require.ErrorIs(t, err, ledger.ErrConflict, "racer %d", i)
			}
		}
		require.Equal(t, tr.Attempt, got[w].Attempt)
		evs, err := l.Events(ctx, "gated")
		require.NoError(t, err)
		require.Len(t, evs, 3+n, "one event per dispatch")
		require.Equal(t, fmt.Sprint("node-", w), evs[len(evs)-1].Actor, "the event is the winner's")
	}
	Invariants(t, l, []string{"gated"}, [][2]string{{ledger.DefaultNamespace, "s1"}})
}

// ConcurrentOutcomeOnce: racing outcomes for one attempt record one; the
// others find the record moved on (ErrConflict) or terminal (ErrTerminal).
func ConcurrentOutcomeOnce(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	for _, to := range []ledger.State{ledger.StateRetryWait, ledger.StateSucceeded} {
		t.Run(string(to), func(t *testing.T) {
			id := "x-" + string(to)
			_, err := l.Create(ctx, Dispatched(id), ledger.Event{})
			require.NoError(t, err)
			errs := race(func(i int) error {
				_, err := l.Apply(ctx, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: to, Attempt: 1,
					Outcome: &ledger.Outcome{Kind: fmt.Sprint("k", i), Attempt: 1}})
				return err
			})
			w := winner(t, errs)
			for i, err := range errs {
				switch {
				case i == w:
				case to.Terminal():
					require.ErrorIs(t, err, ledger.ErrTerminal)
				default:
					require.ErrorIs(t, err, ledger.ErrConflict)
				}
			}
			rec, err := l.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprint("k", w), rec.Outcome.Kind, "the stored outcome is the winner's")
			evs, err := l.Events(ctx, id)
			require.NoError(t, err)
			require.Len(t, evs, 2)
		})
	}
}

// ParallelExecutions: executions on different ids never conflict: 64
// writers each run their own through intent, retry and outcome.
func ParallelExecutions(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	var ids []string
	for i := range racers {
		ids = append(ids, fmt.Sprintf("p%02d", i))
	}
	errs := race(func(i int) error {
		id := ids[i]
		r := Dispatched(id)
		r.SessionID = fmt.Sprint("s", i%4)
		if _, err := l.Create(ctx, r, ledger.Event{}); err != nil {
			return err
		}
		if _, err := l.Apply(ctx, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRetryWait, Attempt: 1,
			Outcome: &ledger.Outcome{Kind: "timeout", Attempt: 1}}); err != nil {
			return err
		}
		if _, err := l.Apply(ctx, id, ledger.Transition{From: ledger.StateRetryWait, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2}); err != nil {
			return err
		}
		to := ledger.StateSucceeded
		if i%8 == 0 {
			to = ledger.StateRecoveryRequired
		}
		tr := ledger.Transition{From: ledger.StateDispatched, FromAttempt: 2, To: to, Attempt: 2}
		if to == ledger.StateSucceeded {
			tr.Outcome = &ledger.Outcome{Kind: "ok", Attempt: 2}
		}
		_, err := l.Apply(ctx, id, tr)
		return err
	})
	for i, err := range errs {
		require.NoError(t, err, "writer %d", i)
	}
	Invariants(t, l, ids, [][2]string{{ledger.DefaultNamespace, "s0"}, {ledger.DefaultNamespace, "s1"},
		{ledger.DefaultNamespace, "s2"}, {ledger.DefaultNamespace, "s3"}})
	fenced, err := l.Fenced(ctx, ledger.DefaultNamespace, "s0")
	require.NoError(t, err)
	require.Len(t, fenced, 8)
}

// ConcurrentFirstRecordsOfASession: a session is classified once, by the
// first record that commits in it. Racing first records, half of them
// resumed calls with no record (legacy), leave the session classified as
// whichever committed first, and the later ones do not change it.
func ConcurrentFirstRecordsOfASession(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	var ids []string
	for i := range racers {
		ids = append(ids, fmt.Sprintf("f%02d", i))
	}
	errs := race(func(i int) error {
		r := Dispatched(ids[i])
		r.SessionID = "new"
		if i%2 == 0 {
			r.State, r.Attempt, r.Resumed = ledger.StateRecoveryRequired, 0, true
		}
		_, err := l.Create(ctx, r, ledger.Event{})
		return err
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	known, err := l.SessionKnown(ctx, ledger.DefaultNamespace, "new")
	require.NoError(t, err)
	// Another first record cannot reclassify it.
	for _, resumed := range []bool{true, false} {
		r := Dispatched(fmt.Sprint("late-", resumed))
		r.SessionID = "new"
		if resumed {
			r.State, r.Attempt, r.Resumed = ledger.StateRecoveryRequired, 0, true
		}
		_, err := l.Create(ctx, r, ledger.Event{})
		require.NoError(t, err)
		again, err := l.SessionKnown(ctx, ledger.DefaultNamespace, "new")
		require.NoError(t, err)
		require.Equal(t, known, again, "a later record reclassified the session")
	}
}

// CrashBetweenSteps: a writer that dies between two steps of an execution
// leaves the state of the last acknowledged step: the dispatched call is
// pending (recovery will find it), the fence holds, a terminal record stays
// terminal and a pruned id stays pruned; and the ledger then continues
// from there.
func CrashBetweenSteps(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := NewClock()
	st := b.New(t)
	l := st.Open(t, clock.Now)
	reopen := func() {
		st.Crash(t, l)
		l = st.Open(t, clock.Now)
	}
	defer func() { _ = l.Close() }()
	ids := []string{"after-intent", "after-fence", "after-outcome", "after-prune"}
	for _, id := range ids {
		_, err := l.Create(ctx, Dispatched(id), ledger.Event{Decision: "dispatch"})
		require.NoError(t, err)
	}
	_, err := l.Apply(ctx, "after-fence", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRecoveryRequired, Attempt: 1})
	require.NoError(t, err)
	for _, id := range []string{"after-outcome", "after-prune"} {
		_, err = l.Apply(ctx, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
			Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1, Receipt: "pi_" + id}})
		require.NoError(t, err)
	}
	before, err := l.Get(ctx, "after-prune")
	require.NoError(t, err)
	clock.Advance(1)
	n, err := l.Prune(ctx, before.UpdatedAt.Add(1))
	require.NoError(t, err)
	require.Equal(t, 2, n, "both succeeded records are older than the cut-off")
	// after-outcome was pruned too; create a fresh terminal one.
	_, err = l.Create(ctx, Dispatched("terminal"), ledger.Event{})
	require.NoError(t, err)
	_, err = l.Apply(ctx, "terminal", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateFailed, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "permanent_error", Attempt: 1}})
	require.NoError(t, err)
	ids = append(ids, "terminal")
	reopen()

	var pending []string
	require.NoError(t, l.Pending(ctx, func(r ledger.Record) error { pending = append(pending, r.ID); return nil }))
	require.Equal(t, []string{"after-fence", "after-intent"}, pending)
	fenced, err := l.Fenced(ctx, ledger.DefaultNamespace, "s1")
	require.NoError(t, err)
	require.Len(t, fenced, 1)
	require.Equal(t, "after-fence", fenced[0].ID)
	for _, id := range []string{"after-outcome", "after-prune"} {
		_, err = l.Get(ctx, id)
		require.ErrorIs(t, err, ledger.ErrPruned)
		_, err = l.Create(ctx, Dispatched(id), ledger.Event{})
		require.ErrorIs(t, err, ledger.ErrPruned, "a pruned id ran again after a crash")
	}
	known, err := l.SessionKnown(ctx, ledger.DefaultNamespace, "s1")
	require.NoError(t, err)
	require.True(t, known)
	Invariants(t, l, sortedCopy(ids), [][2]string{{ledger.DefaultNamespace, "s1"}})

	// The survivors continue: recovery re-dispatches, the operator
	// resolves, and a second crash keeps both.
	_, err = l.Apply(ctx, "after-intent", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2, Uncertain: true})
	require.NoError(t, err)
	_, err = l.Apply(ctx, "after-fence", ledger.Transition{From: ledger.StateRecoveryRequired, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "operator", Attempt: 1, Source: "operator"}, Resolution: &ledger.Resolution{Applied: true, By: "op"}})
	require.NoError(t, err)
	reopen()
	rec, err := l.Get(ctx, "after-intent")
	require.NoError(t, err)
	require.Equal(t, 2, rec.Attempt)
	require.True(t, rec.Uncertain)
	fenced, err = l.Fenced(ctx, ledger.DefaultNamespace, "s1")
	require.NoError(t, err)
	require.Empty(t, fenced)
	Invariants(t, l, sortedCopy(ids), [][2]string{{ledger.DefaultNamespace, "s1"}})
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
