package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// pruneBatch is the number of records Prune replaces per synced batch.
const pruneBatch = 512

// Prune implements Ledger. It walks the retention index up to olderThan
// and, per record, deletes its events and index entries and replaces the
// record with a tombstone, in synced batches of up to 512 records. Records
// are terminal, so no Create or Apply can race with their removal (both
// only read a terminal record); a crash between batches leaves a prefix of
// the work done and the rest still in the index for the next Prune. It
// first deletes the console sessions that expired before olderThan
// (ConsoleSessions).
func (d *DB) Prune(ctx context.Context, olderThan time.Time) (int, error) {
	if err := d.enter(ctx); err != nil {
		return 0, err
	}
	defer d.exit()
	if err := d.pruneConsole(olderThan); err != nil {
		return 0, err
	}
	pruned := 0
	now := d.opts.Now()
	for {
		if err := ctx.Err(); err != nil {
			return pruned, err
		}
		var keys [][]byte
		errFull := errors.New("full")
		err := scanRange(d.db, []byte(prefixTerm), termPrefixUntil(olderThan), func(k, _ []byte) error {
			keys = append(keys, bytes.Clone(k))
			if len(keys) >= pruneBatch {
				return errFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errFull) {
			return pruned, err
		}
		if len(keys) == 0 {
			return pruned, nil
		}
		b := d.db.NewBatch()
		for _, k := range keys {
			if err := d.pruneOne(b, k, now); err != nil {
				_ = b.Close()
				return pruned, err
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			_ = b.Close()
			return pruned, fmt.Errorf("ledger: commit prune: %w", err)
		}
		d.writes.Add(1)
		_ = b.Close()
		pruned += len(keys)
	}
}

func (d *DB) pruneOne(b *pebble.Batch, termKey []byte, now time.Time) error {
	_ = b.Delete(termKey, nil)
	id, ok := idFromTermKey(termKey)
	if !ok {
		return fmt.Errorf("%w: retention key %q", ErrCorrupt, termKey)
	}
	rec, err := getRecord(d.db, id)
	if errors.Is(err, ErrPruned) || errors.Is(err, ErrNotFound) {
		return nil // a stale index entry: dropping it is the repair
	}
	if err != nil {
		return err
	}
	if !rec.State.Terminal() {
		return fmt.Errorf("%w: execution[%s] in the retention index is %s", ErrCorrupt, id, rec.State)
	}
	for seq := uint64(1); seq <= rec.Events; seq++ {
		_ = b.Delete(eventKey(id, seq), nil)
	}
	_ = b.Delete(pendingKey(id), nil)
	_ = b.Delete(fenceKey(rec.Namespace, rec.SessionID, id), nil)
	_ = b.Delete(createdKey(rec.CreatedAt, id), nil)
	if rec.DuplicateWindow > 0 {
		_ = b.Delete(intentKey(rec), nil)
	}
	v, err := encodeTombstone(tombstone{
		ID: id, Namespace: rec.Namespace, SessionID: rec.SessionID, ToolCallID: rec.ToolCallID,
		ArgsDigest: rec.ArgsDigest, State: rec.State, TerminalAt: rec.UpdatedAt, PrunedAt: now,
	})
	if err != nil {
		return err
	}
	return b.Set(recordKey(id), v, nil)
}
