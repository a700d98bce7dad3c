package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// bulkBatchRecords is the number of records per BulkLoad batch.
const bulkBatchRecords = 8192

// BulkLoad writes recs with their indexes and one event each ("bulk_load")
// in large unsynced batches, then flushes the memtable so everything is
// durable before it returns. It is for test and benchmark setup only: it
// takes no per-id locks, does not apply the grammar to the records' states
// (any valid state is accepted, so a history of terminal records can be
// built directly), and must not run concurrently with other writes. It
// refuses an id the ledger already holds (ErrExists), so it never
// overwrites a record; call it repeatedly to load a large history in
// chunks. Each record must have an id, MaxAttempts >= 1
// and a known state, and ids must be distinct (ErrInvalid). Records keep
// their UpdatedAt (the time now if zero), which is also the terminal time
// the retention index uses.
func (d *DB) BulkLoad(ctx context.Context, recs []Record) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.exit()
	seen := make(map[uint64]struct{}, len(recs))
	seed := maphash.MakeSeed()
	for i, rec := range recs {
		if rec.ID == "" || rec.MaxAttempts < 1 || !rec.State.valid() {
			return fmt.Errorf("%w: bulk record %d (%q): needs an id, max_attempts >= 1 and a known state", ErrInvalid, i, rec.ID)
		}
		h := maphash.String(seed, rec.ID)
		if _, dup := seen[h]; dup {
			return fmt.Errorf("%w: bulk record %d: execution[%s] appears twice", ErrInvalid, i, rec.ID)
		}
		seen[h] = struct{}{}
		// A point lookup per id (bloom filters make a miss cheap), so a
		// large history can be loaded in several calls.
		_, closer, err := d.db.Get(recordKey(rec.ID))
		if err == nil {
			_ = closer.Close()
			return fmt.Errorf("ledger: bulk record %d: execution[%s]: %w", i, rec.ID, ErrExists)
		}
		if !errors.Is(err, pebble.ErrNotFound) {
			return fmt.Errorf("ledger: bulk load: %w", err)
		}
	}
	now := d.opts.Now()
	b := d.db.NewBatch()
	defer func() { _ = b.Close() }()
	var fences []fenceChange
	sessions := map[string]struct{}{}
	for i, rec := range recs {
		if rec.UpdatedAt.IsZero() {
			rec.UpdatedAt = now
		}
		if rec.CreatedAt.IsZero() {
			rec.CreatedAt = rec.UpdatedAt
		}
		rec.Version, rec.Events = RecordVersion, 1
		ev := Event{Seq: 1, Time: rec.UpdatedAt, ExecutionID: rec.ID, ToolCallID: rec.ToolCallID,
			Attempt: rec.Attempt, To: rec.State, Decision: "bulk_load", Actor: "bulk_load"}
		_, fc, err := d.writeRecord(b, nil, rec, ev)
		if err != nil {
			return err
		}
		fences = append(fences, fc)
		// A session keeps the classification of its first record, as in
		// Create: the marker is written only for a session that has none.
		sk := sessionKey(rec.Namespace, rec.SessionID)
		if _, seen := sessions[string(sk)]; !seen {
			sessions[string(sk)] = struct{}{}
			marked, err := d.has(sk)
			if err != nil {
				return err
			}
			if !marked {
				_ = b.Set(sk, sessionMarker(rec), nil)
			}
		}
		if (i+1)%bulkBatchRecords == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("ledger: bulk load commit: %w", err)
			}
			d.writes.Add(1)
			d.noteFences(fences...)
			fences = fences[:0]
			_ = b.Close()
			b = d.db.NewBatch()
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("ledger: bulk load commit: %w", err)
	}
	d.writes.Add(1)
	d.noteFences(fences...)
	if err := d.db.Flush(); err != nil {
		return fmt.Errorf("ledger: bulk load flush: %w", err)
	}
	return nil
}

// RawSyncBench is the baseline the ledger's write path is measured against:
// it opens a Pebble database configured as a ledger's (memtables, cache,
// filters) but without the ledger, in dir (which should be new and empty),
// and performs ops operations from concurrency goroutines, each operation
// being two synced batch commits — a ~600-byte record value, then a record
// overwrite plus a ~200-byte event key — the fsyncs one ungated execution
// needs. It returns the wall time per operation and operations per second.
// It exists so that benchmarks outside this package need not import Pebble.
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
	record, event []byte
}

// OpenRawBench opens a plain Pebble database in dir for RawBench.Run. The
// caller must Close it.
func OpenRawBench(dir string) (*RawBench, error) {
	opts := Options{Dir: dir, Logger: discardLogger()}
	popts := pebbleOptions(*opts.EnsureDefaults())
	defer popts.Cache.Unref()
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("ledger: raw bench open %s: %w", dir, err)
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

// Run performs ops operations from concurrency goroutines (see
// RawSyncBench) and returns the wall time per operation and operations per
// second.
func (rb *RawBench) Run(ctx context.Context, ops, concurrency int) (perOp time.Duration, perSecond float64, err error) {
	if ops < 1 || concurrency < 1 {
		return 0, 0, fmt.Errorf("%w: ops %d and concurrency %d must be >= 1", ErrInvalid, ops, concurrency)
	}
	var done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Add(1) <= int64(ops) && ctx.Err() == nil {
				if err := rawOp(rb.db, rb.next.Add(1), rb.record, rb.event); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
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

func rawOp(db *pebble.DB, i int64, record, event []byte) error {
	id := fmt.Sprintf("ex_%026d", i)
	b := db.NewBatch()
	_ = b.Set(recordKey(id), record, nil)
	_ = b.Set(eventKey(id, 1), event, nil)
	_ = b.Set(pendingKey(id), nil, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		_ = b.Close()
		return err
	}
	_ = b.Close()
	b = db.NewBatch()
	defer b.Close()
	_ = b.Set(recordKey(id), record, nil)
	_ = b.Set(eventKey(id, 2), event, nil)
	_ = b.Delete(pendingKey(id), nil)
	return b.Commit(pebble.Sync)
}

// Compact compacts the whole key space, so that data written by BulkLoad
// sits in a steady-state LSM instead of the level-0 files a bulk load
// leaves behind (whose compactions would otherwise run during the next
// Open and skew a measurement). Like BulkLoad it is for setup and
// benchmarks; a live ledger is compacted by Pebble in the background.
func (d *DB) Compact(ctx context.Context) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.exit()
	if err := d.db.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
		return fmt.Errorf("ledger: compact: %w", err)
	}
	return nil
}
