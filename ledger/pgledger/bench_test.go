package pgledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/ledgertest"
)

// BenchmarkNewCall is the ledger's share of a new call on a fleet node:
// its fence check, its dispatch record and its outcome, in the two shapes
// alternating call by call (so both see the same machine): "read" is the
// shape before CreateOwnedUnfenced, a Fenced read and then CreateOwned
// (three round trips); "unfenced" checks the fence in the insert (two).
// It reports the mean of each and their ratio.
func BenchmarkNewCall(b *testing.B) {
	ctx := context.Background()
	db := openDB(b, testenv.NewPostgresDatabase(b), nil)
	l, err := db.RegisterNode(ctx, "bench", ttl)
	if err != nil {
		b.Fatal(err)
	}
	outcome := ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Source: "connector", Attempt: 1, Result: []byte(`{"ok":true}`)}}
	n := 0
	call := func(create func(ledger.Record) error) time.Duration {
		n++
		r := ledgertest.Dispatched(fmt.Sprint("b", n))
		start := time.Now()
		if err := create(r); err != nil {
			b.Fatal(err)
		}
		if _, err := db.ApplyOwned(ctx, l, r.ID, outcome); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	read := func(r ledger.Record) error {
		fenced, err := db.Fenced(ctx, r.Namespace, r.SessionID)
		if err != nil || len(fenced) > 0 {
			return fmt.Errorf("fenced %d: %v", len(fenced), err)
		}
		_, err = db.CreateOwned(ctx, l, r, ledger.Event{})
		return err
	}
	unfenced := func(r ledger.Record) error {
		_, err := db.CreateOwnedUnfenced(ctx, l, r, ledger.Event{})
		return err
	}
	var tRead, tUnfenced time.Duration
	i := 0
	for b.Loop() {
		if i++; i%2 == 0 {
			tRead += call(read)
			tUnfenced += call(unfenced)
		} else {
			tUnfenced += call(unfenced)
			tRead += call(read)
		}
	}
	b.ReportMetric(float64(tRead.Microseconds())/float64(i), "read-µs/call")
	b.ReportMetric(float64(tUnfenced.Microseconds())/float64(i), "unfenced-µs/call")
	b.ReportMetric(float64(tUnfenced)/float64(tRead), "unfenced/read")
}
