package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
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
	// derived: the floor's operation (OpenFloorBench) in place of raw's.
	derived bool
}

// OpenRawBench opens a plain Pebble database in dir for RawBench.Run. The
// caller must Close it.
func OpenRawBench(dir string) (*RawBench, error) {
	return openRaw(dir, false)
}

// OpenFloorBench is OpenRawBench for the floor of any ledger that keys an
// execution by an id derived from its caller's ids, as connhost's does:
// each operation is raw's, but under an id hashed as ledger.ExecutionID
// hashes one (so its inserts land anywhere in the memtable, not at its
// end), and it first looks the id up (a new execution must not exist
// already). Raw's own keys are sequential, which no such ledger can have,
// so the ledger's writes measured against the floor show what the ledger
// adds beyond the work its identity model makes unavoidable.
func OpenFloorBench(dir string) (*RawBench, error) {
	return openRaw(dir, true)
}

func openRaw(dir string, derived bool) (*RawBench, error) {
	popts := pebbleconf.Options(ledger.DefaultCacheBytes, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	defer popts.Cache.Unref()
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("bench: raw open %s: %w", dir, err)
	}
	rb := &RawBench{db: db, record: make([]byte, 600), event: make([]byte, 200), derived: derived}
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
				if err := rb.op(second); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
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

// op performs one operation under a new id, its second batch committed
// with second, and counts its two commits.
func (rb *RawBench) op(second *pebble.WriteOptions) error {
	i := rb.next.Add(1)
	var id string
	if rb.derived {
		id = ledger.ExecutionID("bench", "floor", strconv.FormatInt(i, 10))
	} else {
		id = fmt.Sprintf("ex_%026d", i)
	}
	if err := rawOp(rb.db, id, rb.derived, rb.record, rb.event, second); err != nil {
		return err
	}
	rb.commits.Add(2)
	return nil
}

// rawOp writes what the ledger writes for one execution, as plain keys of
// the same shape and size (record, event, pending entry), in two batches:
// the first synced, the second committed with second. With check it first
// looks the record up, and fails if it exists.
func rawOp(db *pebble.DB, id string, check bool, record, event []byte, second *pebble.WriteOptions) error {
	if check {
		switch _, closer, err := db.Get([]byte("r/" + id)); {
		case err == nil:
			_ = closer.Close()
			return fmt.Errorf("bench: floor: %s exists already", id)
		case !errors.Is(err, pebble.ErrNotFound):
			return err
		}
	}
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
