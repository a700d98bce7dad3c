package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"

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
	var fences []countChange
	sessions := map[string]struct{}{}
	for i, rec := range recs {
		if rec.UpdatedAt.IsZero() {
			rec.UpdatedAt = now
		}
		if rec.CreatedAt.IsZero() {
			rec.CreatedAt = rec.UpdatedAt
		}
		rec.Version, rec.Events = RecordVersion, 1
		Normalize(&rec)
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
			d.noteCounts(fences...)
			fences = fences[:0]
			_ = b.Close()
			b = d.db.NewBatch()
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("ledger: bulk load commit: %w", err)
	}
	d.writes.Add(1)
	d.noteCounts(fences...)
	if err := d.db.Flush(); err != nil {
		return fmt.Errorf("ledger: bulk load flush: %w", err)
	}
	return nil
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
