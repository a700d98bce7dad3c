package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
)

var allStates = []ledger.State{
	ledger.StateAwaitingApproval, ledger.StateApproved, ledger.StateDispatched, ledger.StateRetryWait, ledger.StateRecoveryRequired,
	ledger.StateSucceeded, ledger.StateFailed, ledger.StateRejected, ledger.StateExpired, ledger.StateAbandoned, ledger.StateCancelled,
}

// view is everything the interface shows about some ids and sessions.
type view struct {
	recs    map[string]ledger.Record
	errs    map[string]string
	events  map[string][]ledger.Event
	pending []ledger.Record
	fenced  map[string][]ledger.Record
}

func snapshot(t *testing.T, l ledger.Ledger, ids, sessions []string) view {
	t.Helper()
	ctx := context.Background()
	v := view{recs: map[string]ledger.Record{}, errs: map[string]string{}, events: map[string][]ledger.Event{}, fenced: map[string][]ledger.Record{}}
	for _, id := range ids {
		r, err := l.Get(ctx, id)
		v.recs[id] = r
		if err != nil {
			v.errs[id] = err.Error()
			continue
		}
		evs, err := l.Events(ctx, id)
		require.NoError(t, err)
		v.events[id] = evs
	}
	require.NoError(t, l.Pending(ctx, func(r ledger.Record) error { v.pending = append(v.pending, r); return nil }))
	for _, s := range sessions {
		f, err := l.Fenced(ctx, ledger.DefaultNamespace, s)
		require.NoError(t, err)
		v.fenced[s] = f
	}
	return v
}

// RandomTransitions drives random, mostly illegal, transitions, creates,
// prunes and reopens, and checks after every step that the views agree
// (Invariants, b.Check), that a refused transition changed nothing anyone
// can see, and that an accepted one is one the grammar allows.
func RandomTransitions(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := NewClock()
	st := b.New(t)
	l := st.Open(t, clock.Now)
	defer func() { _ = l.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "c", "d", "e", "f"}
	sessions := []string{"s1", "s2"}
	pairs := [][2]string{{ledger.DefaultNamespace, "s1"}, {ledger.DefaultNamespace, "s2"}}
	applied, steps := 0, 600
	if testing.Short() {
		steps = 150
	}
	for step := range steps {
		clock.Advance(time.Duration(rng.IntN(5)) * time.Second)
		id := ids[rng.IntN(len(ids))]
		switch op := rng.IntN(20); {
		case op < 4:
			r := Dispatched(id)
			r.SessionID = sessions[rng.IntN(2)]
			r.State = []ledger.State{ledger.StateAwaitingApproval, ledger.StateDispatched, ledger.StateRecoveryRequired}[rng.IntN(3)]
			r.Attempt = map[ledger.State]int{ledger.StateAwaitingApproval: 0, ledger.StateDispatched: 1, ledger.StateRecoveryRequired: 1}[r.State]
			_, err := l.Create(ctx, r, ledger.Event{})
			if err != nil && !errors.Is(err, ledger.ErrExists) && !errors.Is(err, ledger.ErrPruned) {
				t.Fatal(err)
			}
		case op == 4:
			_, err := l.Prune(ctx, clock.Now().Add(-time.Minute))
			require.NoError(t, err)
		case op == 5:
			require.NoError(t, l.Close())
			l = st.Open(t, clock.Now)
		default:
			cur, err := l.Get(ctx, id)
			if err != nil {
				continue
			}
			before := snapshot(t, l, ids, sessions)
			tr := ledger.Transition{From: cur.State, FromAttempt: cur.Attempt, To: allStates[rng.IntN(len(allStates))], Attempt: cur.Attempt + rng.IntN(3) - 1}
			if rng.IntN(8) == 0 {
				tr.FromAttempt++
			}
			if rng.IntN(2) == 0 {
				tr.Outcome = &ledger.Outcome{Kind: "ok", Attempt: tr.Attempt - rng.IntN(2)}
			}
			if rng.IntN(6) == 0 {
				tr.CancelRequested = true
			}
			if rng.IntN(5) == 0 {
				tr.Uncertain = true
			}
			if tr.From == ledger.StateRecoveryRequired && rng.IntN(2) == 0 {
				tr.Resolution = &ledger.Resolution{Applied: true, By: "op"}
			}
			got, err := l.Apply(ctx, id, tr)
			if err != nil {
				after := snapshot(t, l, ids, sessions)
				require.True(t, reflect.DeepEqual(before, after), "refused transition %+v changed what the ledger shows: %v", tr, err)
				require.Equal(t, ledger.CheckTransition(cur, tr).Error(), err.Error(), "refused for another reason than the grammar's")
				continue
			}
			applied++
			require.Equal(t, tr.To, got.State)
			require.NoError(t, ledger.CheckTransition(cur, tr))
		}
		Invariants(t, l, ids, pairs)
		if b.Check != nil {
			b.Check(t, l)
		}
		if t.Failed() {
			t.Fatalf("step %d", step)
		}
	}
	require.Positive(t, applied)
	t.Logf("%d transitions applied", applied)
}

// OddKeys: ids, namespaces and sessions holding separators, NUL bytes and
// bytes that are not UTF-8 stay apart: each record is fenced under its own
// session only, and List orders ids bytewise.
func OddKeys(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	mk := func(id, ns, session string) ledger.Record {
		r := Dispatched(id)
		r.Namespace, r.SessionID = ns, session
		return r
	}
	recs := []ledger.Record{
		mk("a", "n", "s\x00x"), mk("a\x00", "n\x00s", "x"), mk("a/b", "n", "s"), mk("a/", "n", "s/"),
		mk("x\x00\x01y", "n", "s\x00\x01"), mk("x", "n", "s"), mk("\xff\xfe", "\xc3", "\x80"), mk("é", "n", "s"),
	}
	var ids []string
	var sessions [][2]string
	for _, r := range recs {
		_, err := l.Create(ctx, r, ledger.Event{})
		require.NoError(t, err, "%q", r.ID)
		_, err = l.Apply(ctx, r.ID, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRecoveryRequired, Attempt: 1})
		require.NoError(t, err)
		ids = append(ids, r.ID)
		sessions = append(sessions, [2]string{r.Namespace, r.SessionID})
	}
	slices.Sort(ids)
	Invariants(t, l, ids, sessions)
	for _, r := range recs {
		got, err := l.Fenced(ctx, r.Namespace, r.SessionID)
		require.NoError(t, err)
		var gotIDs []string
		for _, g := range got {
			gotIDs = append(gotIDs, g.ID)
			require.Equal(t, r.Namespace, g.Namespace)
			require.Equal(t, r.SessionID, g.SessionID)
		}
		require.Contains(t, gotIDs, r.ID)
		known, err := l.SessionKnown(ctx, r.Namespace, r.SessionID)
		require.NoError(t, err)
		require.True(t, known, "%q/%q", r.Namespace, r.SessionID)
	}
	known, err := l.SessionKnown(ctx, "n", "s\x00")
	require.NoError(t, err)
	require.False(t, known)
	got, err := l.Get(ctx, "\xff\xfe")
	require.NoError(t, err)
	require.Equal(t, "\xc3", got.Namespace)
}

// ListPagesInIDOrder: List returns records in bytewise id order, pages
// with After and Limit (default DefaultListLimit), and filters on state,
// namespace and session, skipping pruned records.
func ListPagesInIDOrder(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := NewClock()
	_, l := open(t, b, clock.Now)
	rng := rand.New(rand.NewPCG(3, 4))
	var ids []string
	for _, i := range rng.Perm(130) {
		id := fmt.Sprintf("id-%03d", i)
		r := Dispatched(id)
		r.Namespace = []string{"n1", "n2"}[i%2]
		r.SessionID = []string{"a", "b", "c"}[i%3]
		_, err := l.Create(ctx, r, ledger.Event{})
		require.NoError(t, err)
		if i%5 == 0 {
			_, err = l.Apply(ctx, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
				Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
			require.NoError(t, err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	all, err := l.List(ctx, ledger.Filter{})
	require.NoError(t, err)
	require.Len(t, all, ledger.DefaultListLimit)
	for i, r := range all {
		require.Equal(t, ids[i], r.ID)
	}
	page, err := l.List(ctx, ledger.Filter{After: "id-049", Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []string{"id-050", "id-051", "id-052"}, recIDs(page))
	page, err = l.List(ctx, ledger.Filter{After: "id-04", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []string{"id-040"}, recIDs(page), "After need not name an existing id")
	sel, err := l.List(ctx, ledger.Filter{Namespace: "n2", SessionID: "b", State: ledger.StateSucceeded, Limit: 1000})
	require.NoError(t, err)
	var want []string
	for i := range 130 {
		if i%2 == 1 && i%3 == 1 && i%5 == 0 {
			want = append(want, fmt.Sprintf("id-%03d", i))
		}
	}
	require.Equal(t, want, recIDs(sel))
	clock.Advance(time.Hour)
	n, err := l.Prune(ctx, clock.Now())
	require.NoError(t, err)
	require.Equal(t, 26, n)
	rest, err := l.List(ctx, ledger.Filter{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, rest, 104)
	for _, r := range rest {
		require.Equal(t, ledger.StateDispatched, r.State)
	}
}

// ListNewest: ledger.OrderNewest lists the most recently created records
// first (id descending among records created at the same instant), and a
// listing paged with After neither skips nor repeats a record while
// records are created and change state between its pages; After naming no
// record is ErrNotFound, naming a pruned one ErrPruned.
func ListNewest(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := NewClock()
	_, l := open(t, b, clock.Now)
	create := func(id, session string) {
		t.Helper()
		r := Dispatched(id)
		r.SessionID = session
		_, err := l.Create(ctx, r, ledger.Event{Decision: "dispatch"})
		require.NoError(t, err)
	}
	// Ids in the opposite order of time, so id order and time order differ.
	for i := 9; i >= 0; i-- {
		create(fmt.Sprintf("x%d", i), fmt.Sprintf("s%d", i%2))
		clock.Advance(time.Second)
	}
	create("y1", "s2") // y0 and y1 at the same instant: id descending
	create("y0", "s2")
	clock.Advance(time.Second)
	all := []string{"y1", "y0", "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"}
	got, err := l.List(ctx, ledger.Filter{Order: ledger.OrderNewest})
	require.NoError(t, err)
	require.Equal(t, all, recIDs(got))

	var seen []string
	after := ""
	for page := 0; ; page++ {
		got, err := l.List(ctx, ledger.Filter{Order: ledger.OrderNewest, After: after, Limit: 5})
		require.NoError(t, err)
		seen = append(seen, recIDs(got)...)
		if len(got) < 5 {
			break
		}
		after = got[len(got)-1].ID
		if page == 0 {
			create("new", "s0") // newer than the listing: not on its pages
			for _, id := range []string{"x1", "x7"} {
				_, err := l.Apply(ctx, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
					Outcome: &ledger.Outcome{Kind: "ok", Source: "connector", Attempt: 1}})
				require.NoError(t, err)
			}
		}
	}
	require.Equal(t, all, seen)

	got, err = l.List(ctx, ledger.Filter{Order: ledger.OrderNewest, SessionID: "s1", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"x1", "x3"}, recIDs(got))
	got, err = l.List(ctx, ledger.Filter{Order: ledger.OrderNewest, State: ledger.StateSucceeded})
	require.NoError(t, err)
	require.Equal(t, []string{"x1", "x7"}, recIDs(got))

	clock.Advance(time.Hour)
	n, err := l.Prune(ctx, clock.Now())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got, err = l.List(ctx, ledger.Filter{Order: ledger.OrderNewest, Limit: 5})
	require.NoError(t, err)
	require.Equal(t, []string{"new", "y1", "y0", "x0", "x2"}, recIDs(got))
	_, err = l.List(ctx, ledger.Filter{Order: ledger.OrderNewest, After: "x1"})
	require.ErrorIs(t, err, ledger.ErrPruned)
	_, err = l.List(ctx, ledger.Filter{Order: ledger.OrderNewest, After: "nope"})
	require.ErrorIs(t, err, ledger.ErrNotFound)
	_, err = l.List(ctx, ledger.Filter{Order: 7})
	require.ErrorIs(t, err, ledger.ErrInvalid)
}

func recIDs(recs []ledger.Record) []string {
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return ids
}

// WriteReturnsWhatGetReads: the record Create and Apply return equals the
// one a later Get reads, whatever zone and clock reading the caller's
// times carry, and the record Get returns for a pruned id is its tombstone.
func WriteReturnsWhatGetReads(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil) // time.Now: local zone, monotonic reading
	r := Dispatched("a")
	zone := time.FixedZone("X", 3600)
	r.CreatedAt = time.Now().In(zone)
	r.Deadline = time.Now().Add(time.Minute)
	r.Approval = &ledger.Approval{ID: "ap", RequestedAt: time.Now().In(zone), Decision: ledger.ApprovalApproved}
	r.Args = nil
	created, err := l.Create(ctx, r, ledger.Event{})
	require.NoError(t, err)
	got, err := l.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, created, got)
	require.Equal(t, ledger.RecordVersion, got.Version)
	applied, err := l.Apply(ctx, "a", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRecoveryRequired, Attempt: 1,
		NextAttemptAt: time.Now().In(zone)})
	require.NoError(t, err)
	got, err = l.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, applied, got)
	final, err := l.Apply(ctx, "a", ledger.Transition{From: ledger.StateRecoveryRequired, FromAttempt: 1, To: ledger.StateAbandoned, Attempt: 1,
		Resolution: &ledger.Resolution{By: "op", At: time.Now().In(zone)}})
	require.NoError(t, err)
	got, err = l.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, final, got)
	evs, err := l.Events(ctx, "a")
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, final.UpdatedAt, evs[2].Time)

	n, err := l.Prune(ctx, final.UpdatedAt.Add(time.Nanosecond))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	tomb, err := l.Get(ctx, "a")
	require.ErrorIs(t, err, ledger.ErrPruned)
	require.Equal(t, ledger.Pruned("a", r.Namespace, r.SessionID, r.ToolCallID, r.ArgsDigest, ledger.StateAbandoned, final.UpdatedAt), tomb)
	existing, err := l.Create(ctx, Dispatched("a"), ledger.Event{})
	require.ErrorIs(t, err, ledger.ErrPruned)
	require.Equal(t, tomb, existing)
}

// ReturnedRecordIsACopy: mutating a returned record changes nothing in the
// ledger.
func ReturnedRecordIsACopy(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	r := Dispatched("a")
	r.Approval = &ledger.Approval{ID: "ap", Decision: ledger.ApprovalApproved}
	created, err := l.Create(ctx, r, ledger.Event{})
	require.NoError(t, err)
	created.Args[0] = 'X'
	created.Approval.Decision = ledger.ApprovalRejected
	r.Args[1] = 'Y'
	applied, err := l.Apply(ctx, "a", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRetryWait, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "timeout", Attempt: 1, Result: []byte("r")}})
	require.NoError(t, err)
	require.Equal(t, []byte(`{"amount":100}`), applied.Args)
	require.Equal(t, ledger.ApprovalApproved, applied.Approval.Decision)
	applied.Outcome.Result[0] = 'Z'
	applied.Outcome.Kind = "mutated"
	next, err := l.Apply(ctx, "a", ledger.Transition{From: ledger.StateRetryWait, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2})
	require.NoError(t, err)
	require.Equal(t, "timeout", next.Outcome.Kind)
	require.Equal(t, []byte("r"), next.Outcome.Result)
	got, err := l.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, next, got)
}

// PendingStopsAtError: Pending stops at the first error fn returns and
// returns it; fn may write to the ledger.
func PendingStopsAtError(t *testing.T, b Backend) {
	ctx := context.Background()
	_, l := open(t, b, nil)
	for _, id := range []string{"a", "b", "c"} {
		_, err := l.Create(ctx, Dispatched(id), ledger.Event{})
		require.NoError(t, err)
	}
	var seen []string
	err := l.Pending(ctx, func(r ledger.Record) error {
		seen = append(seen, r.ID)
		if _, err := l.Apply(ctx, r.ID, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRecoveryRequired, Attempt: 1}); err != nil {
			return err
		}
		if r.ID == "b" {
			return errStop
		}
		return nil
	})
	require.ErrorIs(t, err, errStop)
	require.Equal(t, []string{"a", "b"}, seen)
	fenced, err := l.Fenced(ctx, ledger.DefaultNamespace, "s1")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, recIDs(fenced))
}

// FailurePaths lists what each method refuses, and with which error.
func FailurePaths(t *testing.T, b Backend) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(l ledger.Ledger) error
		want error
	}{
		{"get unknown", func(l ledger.Ledger) error { _, err := l.Get(ctx, "nope"); return err }, ledger.ErrNotFound},
		{"events unknown", func(l ledger.Ledger) error { _, err := l.Events(ctx, "nope"); return err }, ledger.ErrNotFound},
		{"apply unknown", func(l ledger.Ledger) error {
			_, err := l.Apply(ctx, "nope", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateFailed, Attempt: 1})
			return err
		}, ledger.ErrNotFound},
		{"create empty id", func(l ledger.Ledger) error {
			_, err := l.Create(ctx, ledger.Record{State: ledger.StateDispatched, Attempt: 1, MaxAttempts: 1}, ledger.Event{})
			return err
		}, ledger.ErrInvalid},
		{"create outcome", func(l ledger.Ledger) error {
			r := Dispatched("a")
			r.Outcome = &ledger.Outcome{Kind: "ok", Attempt: 1}
			_, err := l.Create(ctx, r, ledger.Event{})
			return err
		}, ledger.ErrIllegalTransition},
		{"cancelled context", func(l ledger.Ledger) error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			_, err := l.Create(c, Dispatched("a"), ledger.Event{})
			return err
		}, context.Canceled},
		{"closed", func(l ledger.Ledger) error {
			require.NoError(t, l.Close())
			_, err := l.Get(ctx, "a")
			return err
		}, ledger.ErrClosed},
		{"close twice", func(l ledger.Ledger) error {
			require.NoError(t, l.Close())
			return l.Close()
		}, ledger.ErrClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, l := open(t, b, nil)
			require.ErrorIs(t, tc.run(l), tc.want)
		})
	}
}

var errStop = errors.New("stop")
