package ledger

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchParallelism returns the SetParallelism factor that runs about n
// goroutines.
func benchParallelism(n int) int {
	p := (n + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	return max(p, 1)
}

// BenchmarkCreateApply measures the ledger's share of one ungated execution:
// Create(dispatched) + Apply(succeeded), two synced batches, on a real
// directory; sequential and with ~64 goroutines (compare with
// devkit/bench's BenchmarkRawSync and `connhost bench ledger`).
func BenchmarkCreateApply(b *testing.B) {
	benchCreateApply(b, 0)
}

// BenchmarkCreateApplyGuarded is BenchmarkCreateApply for an operation
// with a duplicate-intent window (each call another intent, as most are):
// Create also takes the intent's lock, scans the window of the d/ index
// and writes its entry.
func BenchmarkCreateApplyGuarded(b *testing.B) {
	benchCreateApply(b, 10*time.Minute)
}

func benchCreateApply(b *testing.B, window time.Duration) {
	ctx := context.Background()
	run := func(b *testing.B, db *DB, i int64) {
		if err := createApply(ctx, db, i, window); err != nil {
			b.Fatal(err)
		}
	}
	open := func(b *testing.B) *DB {
		db, err := Open(ctx, Options{Dir: b.TempDir(), Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = db.Close() })
		return db
	}
	b.Run("conc=1", func(b *testing.B) {
		db := open(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			run(b, db, int64(i))
		}
	})
	b.Run("conc=64", func(b *testing.B) {
		db := open(b)
		var next atomic.Int64
		b.SetParallelism(benchParallelism(64))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				run(b, db, next.Add(1))
			}
		})
	})
}

// createApply is the ledger side of one ungated execution: Create
// (dispatched, ~600-byte record) and Apply (succeeded), two synced writes.
func createApply(ctx context.Context, db *DB, i int64, window time.Duration) error {
	id := ExecutionID(DefaultNamespace, "bench", strconv.FormatInt(i, 10))
	r := dispatchedRecord(id)
	r.DuplicateWindow, r.ArgsDigest = window, "digest-"+strconv.FormatInt(i, 10)
	r.Args = make([]byte, 400)
	for j := range r.Args {
		r.Args[j] = 'a'
	}
	r.Args[0], r.Args[len(r.Args)-1] = '"', '"'
	if _, err := db.Create(ctx, r, Event{Decision: "intent", Actor: "executor"}); err != nil {
		return err
	}
	_, err := db.Apply(ctx, id, Transition{From: StateDispatched, FromAttempt: 1, To: StateSucceeded, Attempt: 1,
		Outcome: &Outcome{Kind: "ok", Source: "connector", Attempt: 1, Receipt: "pi_123"},
		Event:   Event{Decision: "outcome", Actor: "executor"}})
	return err
}

// BenchmarkPendingWithHistory measures recovery's read: Open + Pending
// with 1,000 pending records, alone and behind a history of terminal
// records. The history is 100,000 records by default; set
// LEDGER_BENCH_HISTORY=1000000 for the full-size run.
func BenchmarkPendingWithHistory(b *testing.B) {
	ctx := context.Background()
	history := 100_000
	if s := os.Getenv("LEDGER_BENCH_HISTORY"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		history = n
	}
	const pending = 1000
	for _, h := range []int{0, history} {
		b.Run(fmt.Sprintf("history=%d/pending=%d", h, pending), func(b *testing.B) {
			dir := b.TempDir()
			db, err := Open(ctx, Options{Dir: dir, Logger: discardLogger()})
			if err != nil {
				b.Fatal(err)
			}
			recs := make([]Record, 0, h+pending)
			for i := 0; i < h; i++ {
				r := dispatchedRecord(fmt.Sprintf("ex_h%09d", i))
				r.State, r.Outcome = StateSucceeded, &Outcome{Kind: "ok", Source: "connector", Attempt: 1, Receipt: "pi_123"}
				recs = append(recs, r)
			}
			for i := 0; i < pending; i++ {
				recs = append(recs, dispatchedRecord(fmt.Sprintf("ex_p%09d", i)))
			}
			if err := db.BulkLoad(ctx, recs); err != nil {
				b.Fatal(err)
			}
			// Compact so the history sits in a steady-state LSM rather than
			// in the L0 files a fresh bulk load leaves (whose compactions
			// would otherwise run during, and be waited for by, each round).
			if err := db.db.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
				b.Fatal(err)
			}
			size, err := db.DiskUsage()
			if err != nil {
				b.Fatal(err)
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				db, err := Open(ctx, Options{Dir: dir, Logger: discardLogger()})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				if err := db.Pending(ctx, func(Record) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
				if n != pending {
					b.Fatalf("pending %d, want %d", n, pending)
				}
				b.StopTimer() // recovery is Open + Pending; Close is not on its path
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(size)/(1<<20), "MiB-on-disk")
		})
	}
}

// BenchmarkBulkLoad measures BulkLoad of terminal records.
func BenchmarkBulkLoad(b *testing.B) {
	ctx := context.Background()
	const n = 100_000
	recs := make([]Record, n)
	for i := range recs {
		r := dispatchedRecord(fmt.Sprintf("ex_h%09d", i))
		r.State, r.Outcome = StateSucceeded, &Outcome{Kind: "ok", Attempt: 1}
		recs[i] = r
	}
	for i := 0; i < b.N; i++ {
		db, err := Open(ctx, Options{Dir: b.TempDir(), Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		if err := db.BulkLoad(ctx, recs); err != nil {
			b.Fatal(err)
		}
		_ = db.Close()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}
