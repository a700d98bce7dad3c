package ledgertest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/ledger"
)

// Invariants checks, through the interface alone, that a ledger's views of
// the executions ids (sorted) and the sessions agree, and fails t unless:
//
//   - every id reads back with Get, is pruned (ErrPruned) or was never
//     created (ErrNotFound);
//   - Pending lists, in id order, exactly the non-terminal records among
//     them, each equal to what Get returns;
//   - List (paged with After) lists, in id order, exactly the records that
//     are not pruned, each equal to what Get returns;
//   - every record has Events events numbered 1..Events, all of it, the
//     last one ending in its state and attempt; a pruned one has none;
//   - Fenced lists, for each session, exactly its recovery_required records
//     in id order;
//   - Due lists, by each record's due time (ledger.DueAt), exactly the
//     records due then, in due order;
//   - AwaitingApproval counts the records awaiting approval of each
//     namespace, and of all together;
//   - no record holds an outcome of a later attempt, or an attempt past its
//     cap.
func Invariants(t testing.TB, l ledger.Ledger, ids []string, sessions [][2]string) {
	t.Helper()
	ctx := context.Background()
	recs := map[string]ledger.Record{}
	var live, pending []string
	fenced := map[[2]string][]string{}
	for _, id := range ids {
		rec, err := l.Get(ctx, id)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			continue
		case errors.Is(err, ledger.ErrPruned):
			if _, err := l.Events(ctx, id); !errors.Is(err, ledger.ErrPruned) {
				t.Errorf("invariant: events of pruned %s: %v, want ErrPruned", id, err)
			}
			if !rec.State.Terminal() || rec.ID != id {
				t.Errorf("invariant: tombstone of %s is %+v", id, rec)
			}
			continue
		case err != nil:
			t.Errorf("invariant: get %s: %v", id, err)
			continue
		}
		recs[id] = rec
		live = append(live, id)
		if !rec.State.Terminal() {
			pending = append(pending, id)
		}
		if rec.State == ledger.StateRecoveryRequired {
			s := [2]string{rec.Namespace, rec.SessionID}
			fenced[s] = append(fenced[s], id)
		}
		evs, err := l.Events(ctx, id)
		if err != nil {
			t.Errorf("invariant: events of %s: %v", id, err)
			continue
		}
		if uint64(len(evs)) != rec.Events {
			t.Errorf("invariant: %s has %d events, record counts %d", id, len(evs), rec.Events)
		}
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) || ev.ExecutionID != id {
				t.Errorf("invariant: %s event %d is %d of %q", id, i+1, ev.Seq, ev.ExecutionID)
			}
		}
		if n := len(evs); n > 0 && (evs[n-1].To != rec.State || evs[n-1].Attempt != rec.Attempt) {
			t.Errorf("invariant: %s last event ends in %s@%d, record is %s@%d", id, evs[n-1].To, evs[n-1].Attempt, rec.State, rec.Attempt)
		}
		if rec.Outcome != nil && rec.Outcome.Attempt > rec.Attempt {
			t.Errorf("invariant: %s outcome for future attempt %d", id, rec.Outcome.Attempt)
		}
		if rec.Attempt > rec.MaxAttempts {
			t.Errorf("invariant: %s attempt %d > max %d", id, rec.Attempt, rec.MaxAttempts)
		}
	}
	var gotPending []string
	if err := l.Pending(ctx, func(r ledger.Record) error {
		gotPending = append(gotPending, r.ID)
		if want, ok := recs[r.ID]; !ok || !reflect.DeepEqual(want, r) {
			t.Errorf("invariant: pending entry %+v, record %+v", r, want)
		}
		return nil
	}); err != nil {
		t.Errorf("invariant: pending: %v", err)
	}
	if !slices.Equal(gotPending, pending) {
		t.Errorf("invariant: pending lists %q, the non-terminal records are %q", gotPending, pending)
	}
	var listed []string
	for after := ""; ; {
		page, err := l.List(ctx, ledger.Filter{After: after, Limit: 7})
		if err != nil {
			t.Errorf("invariant: list: %v", err)
			break
		}
		for _, r := range page {
			listed = append(listed, r.ID)
			if want, ok := recs[r.ID]; !ok || !reflect.DeepEqual(want, r) {
				t.Errorf("invariant: listed %+v, record %+v", r, want)
			}
		}
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1].ID
	}
	if !slices.Equal(listed, live) {
		t.Errorf("invariant: list gives %q, the records are %q", listed, live)
	}
	for _, s := range sessions {
		got, err := l.Fenced(ctx, s[0], s[1])
		if err != nil {
			t.Errorf("invariant: fenced %q/%q: %v", s[0], s[1], err)
			continue
		}
		var gotIDs []string
		for _, r := range got {
			gotIDs = append(gotIDs, r.ID)
			if want := recs[r.ID]; !reflect.DeepEqual(want, r) {
				t.Errorf("invariant: fenced %+v, record %+v", r, want)
			}
		}
		if want := fenced[s]; !slices.Equal(gotIDs, want) {
			t.Errorf("invariant: session %q/%q fenced by %q, its recovery_required records are %q", s[0], s[1], gotIDs, want)
		}
	}
	dueInvariants(t, l, recs)
	if !slices.IsSortedFunc(ids, strings.Compare) {
		t.Errorf("invariant: ids given out of order")
	}
}

// dueInvariants checks Due and AwaitingApproval against recs, every record
// the ledger holds.
func dueInvariants(t testing.TB, l ledger.Ledger, recs map[string]ledger.Record) {
	t.Helper()
	ctx := context.Background()
	type due struct {
		at time.Time
		id string
	}
	var all []due
	awaiting := map[string]int{}
	for id, r := range recs {
		if at, ok := ledger.DueAt(r); ok {
			all = append(all, due{at, id})
		}
		if r.State == ledger.StateAwaitingApproval {
			awaiting[r.Namespace]++
			awaiting[""]++
		}
	}
	slices.SortFunc(all, func(a, b due) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	cuts := []time.Time{time.Unix(0, 0).Add(-time.Nanosecond), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, d := range all {
		cuts = append(cuts, d.at, d.at.Add(-time.Nanosecond))
	}
	for _, until := range cuts {
		var want, got []string
		for _, d := range all {
			if !d.at.After(until) {
				want = append(want, d.id)
			}
		}
		if err := l.Due(ctx, until, func(id string) error { got = append(got, id); return nil }); err != nil {
			t.Errorf("invariant: due by %s: %v", until, err)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("invariant: due by %s lists %q, the records due then are %q", until.Format(time.RFC3339Nano), got, want)
		}
	}
	namespaces := []string{""}
	for _, r := range recs {
		namespaces = append(namespaces, r.Namespace)
	}
	for _, ns := range namespaces {
		n, err := l.AwaitingApproval(ctx, ns)
		if err != nil {
			t.Errorf("invariant: awaiting approval in %q: %v", ns, err)
			continue
		}
		if n != awaiting[ns] {
			t.Errorf("invariant: %d awaiting approval in namespace %q, the records say %d", n, ns, awaiting[ns])
		}
	}
}
