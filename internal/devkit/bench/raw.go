package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/connhost/connhost/internal/pebbleconf"
	"github.com/connhost/connhost/ledger"
)

// RawSyncBench is the baseline the ledger's write path is measured against:
// it opens a Pebble database configured as a ledger's (internal/pebbleconf:
// memtables, cache, filters) but without the ledger, in dir (which should
// be new and empty), and performs ops operations from concurrency
// goroutines, each operation being two synced batch commits — a ~600-byte
// record value, then a record overwrite plus a ~200-byte event key — the
// fsyncs one ungated execution needs. It returns the wall time per
// operation and operations per second.
func RawSyncBench(ctx context.Context, dir string, ops, concurrency int) (perOp time.Duration, perSecond float64, err error) {
	rb, err := OpenRawBench(dir)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := rb.Close(); err == nil {
			err = cerr
		}
	}()
	return rb.Run(ctx, ops, concurrency)
}

// RawBench is RawSyncBench on a database that stays open across runs, so
// a benchmark can alternate rounds of it with rounds of the ledger and both
// see the same machine load and a database of the same age. Each
// operation writes new keys.
type RawBench struct {
	db            *pebble.DB
	next          atomic.Int64
	commits       atomic.Uint64
	record, event []byte
}

// OpenRawBench opens a plain Pebble database in dir for RawBench.Run. The
// caller must Close it.
func OpenRawBench(dir string) (*RawBench, error) {
	popts := pebbleconf.Options(ledger.DefaultCacheBytes, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	defer popts.Cache.Unref()
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("bench: raw open %s: %w", dir, err)
	}
	rb := &RawBench{db: db, record: make([]byte, 600), event: make([]byte, 200)}
	for i := range rb.record {
		rb.record[i] = byte('a' + i%26)
	}
	copy(rb.event, rb.record)
	return rb, nil
}

// Close closes the database.
func (rb *RawBench) Close() error { return rb.db.Close() }

// WALStats returns the database's write-ahead log counts since it opened,
// as ledger.DB.WALStats does for a ledger.
func (rb *RawBench) WALStats() (ledger.WALStats, error) {
	m := rb.db.Metrics()
	return ledger.WALStats{Syncs: pebbleconf.WALSyncs(m), Bytes: m.WAL.BytesWritten, Commits: rb.commits.Load()}, nil
}

// errBadRun: Run was asked for no operations or no goroutines.
var errBadRun = errors.New("bench: ops and concurrency must be >= 1")

// Run performs ops operations from concurrency goroutines (see
// RawSyncBench) and returns the wall time per operation and operations per
// second.
func (rb *RawBench) Run(ctx context.Context, ops, concurrency int) (perOp time.Duration, perSecond float64, err error) {
	return rb.run(ctx, ops, concurrency, pebble.Sync)
}

// RunLazy is Run with the second batch of each operation committed
// without its own sync: the floor of an execution whose outcome is written
// lazily (one synced batch for the intent, one unsynced for the outcome).
func (rb *RawBench) RunLazy(ctx context.Context, ops, concurrency int) (perOp time.Duration, perSecond float64, err error) {
	return rb.run(ctx, ops, concurrency, pebble.NoSync)
}

func (rb *RawBench) run(ctx context.Context, ops, concurrency int, second *pebble.WriteOptions) (perOp time.Duration, perSecond float64, err error) {
	if ops < 1 || concurrency < 1 {
		return 0, 0, fmt.Errorf("%w (ops %d, concurrency %d)", errBadRun, ops, concurrency)
	}
	var done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for done.Add(1) <= int64(ops) && ctx.Err() == nil {
				if err := rawOp(rb.db, rb.next.Add(1), rb.record, rb.event, second); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				rb.commits.Add(2)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	return elapsed / time.Duration(ops), float64(ops) / elapsed.Seconds(), nil
}

// rawOp writes what the ledger writes for one execution, as plain keys of
// the same shape and size (record, event, pending entry), in two batches:
// the first synced, the second committed with second.
func rawOp(db *pebble.DB, i int64, record, event []byte, second *pebble.WriteOptions) error {
	id := fmt.Sprintf("ex_%026d", i)
	b := db.NewBatch()
	_ = b.Set([]byte("r/"+id), record, nil)
	_ = b.Set([]byte("e/"+id+"\x00\x01/1"), event, nil)
	_ = b.Set([]byte("p/"+id), nil, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		_ = b.Close()
		return err
	}
	_ = b.Close()
	b = db.NewBatch()
	defer b.Close()
	_ = b.Set([]byte("r/"+id), record, nil)
	_ = b.Set([]byte("e/"+id+"\x00\x01/2"), event, nil)
	_ = b.Delete([]byte("p/"+id), nil)
	return b.Commit(second)
}
