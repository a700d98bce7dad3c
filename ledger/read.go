package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// reader is what Get and iterators read from: the DB or a snapshot.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// getRecord reads r/<id>: ErrNotFound, ErrPruned (with the tombstone's
// partial record), ErrCorrupt or the record.
func getRecord(r reader, id string) (Record, error) {
	v, closer, err := r.Get(recordKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return Record{}, fmt.Errorf("execution[%s]: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("ledger: read execution[%s]: %w", id, err)
	}
	defer closer.Close()
	rec, err := decodeRecord(v)
	if errors.Is(err, ErrPruned) {
		return rec, fmt.Errorf("execution[%s]: %w", id, err)
	}
	if err != nil {
		return Record{}, fmt.Errorf("execution[%s]: %w", id, err)
	}
	return rec, nil
}

// Get implements Ledger. For a pruned id it returns ErrPruned together with
// the partial record the tombstone keeps (id, namespace, session, tool
// call, args digest, final state).
func (d *DB) Get(ctx context.Context, id string) (Record, error) {
	if err := d.enter(ctx); err != nil {
		return Record{}, err
	}
	defer d.exit()
	return getRecord(d.db, id)
}

// Events implements Ledger. A pruned id is ErrPruned; an unknown id returns
// ErrNotFound.
func (d *DB) Events(ctx context.Context, id string) ([]Event, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.exit()
	snap := d.db.NewSnapshot()
	defer snap.Close()
	if _, err := getRecord(snap, id); err != nil {
		return nil, err
	}
	var evs []Event
	err := scan(snap, eventPrefix(id), func(_, v []byte) error {
		e, err := decodeEvent(v)
		if err != nil {
			return fmt.Errorf("execution[%s] event: %w", id, err)
		}
		evs = append(evs, e)
		return nil
	})
	return evs, err
}

// Pending implements Ledger. It reads a consistent snapshot: the p/ index
// and, for each entry, the record it names; fn may write to the ledger.
func (d *DB) Pending(ctx context.Context, fn func(Record) error) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.exit()
	snap := d.db.NewSnapshot()
	defer snap.Close()
	return scan(snap, []byte(prefixPending), func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := decodeRecord(v)
		if err != nil {
			return fmt.Errorf("pending entry %q: %w", k, err)
		}
		return fn(rec)
	})
}

// DefaultListLimit is the number of records List returns when Filter.Limit
// is 0.
const DefaultListLimit = 100

// List implements Ledger. With OrderID it walks the records in id order
// from f.After, skipping tombstones of pruned executions; with OrderNewest
// it walks the creation index backwards from f.After's entry, reading
// each record it names. A filter on state, namespace or session is applied
// while walking, so a selective filter over a large history reads more
// than it returns.
func (d *DB) List(ctx context.Context, f Filter) ([]Record, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.exit()
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	switch f.Order {
	case OrderID:
	case OrderNewest:
		return d.listNewest(ctx, f, limit)
	case OrderDue:
		return d.listDue(ctx, f, limit)
	default:
		return nil, fmt.Errorf("%w: list order %d", ErrInvalid, f.Order)
	}
	lower := []byte(prefixRecord)
	if f.After != "" {
		lower = append(recordKey(f.After), 0)
	}
	var recs []Record
	errStop := errors.New("stop")
	err := scanRange(d.db, lower, prefixEnd([]byte(prefixRecord)), func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(v) > 0 && v[0] == tombstoneTag {
			return nil
		}
		rec, err := decodeRecord(v)
		if err != nil {
			return fmt.Errorf("execution[%s]: %w", k[len(prefixRecord):], err)
		}
		if !f.matches(rec) {
			return nil
		}
		recs = append(recs, rec)
		if len(recs) >= limit {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return recs, err
}

// listNewest is List in OrderNewest.
func (d *DB) listNewest(ctx context.Context, f Filter, limit int) ([]Record, error) {
	upper := prefixEnd([]byte(prefixCreated))
	if f.After != "" {
		after, err := getRecord(d.db, f.After)
		if err != nil {
			return nil, fmt.Errorf("ledger: list after execution[%s]: %w", f.After, err)
		}
		upper = createdKey(after.CreatedAt, after.ID)
	}
	var recs []Record
	errStop := errors.New("stop")
	err := scanRangeReverse(d.db, []byte(prefixCreated), upper, func(k, _ []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, ok := idFromCreatedKey(k)
		if !ok {
			return fmt.Errorf("%w: creation key %q", ErrCorrupt, k)
		}
		rec, err := getRecord(d.db, id)
		if err != nil {
			// The entry goes with the record in the same batch (Create,
			// Prune): a record missing behind it is damage.
			return fmt.Errorf("ledger: creation index entry of execution[%s]: %w", id, err)
		}
		if !f.matches(rec) {
			return nil
		}
		recs = append(recs, rec)
		if len(recs) >= limit {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return recs, err
}

// listDue is List in OrderDue: the due index from f's position on, each
// entry's record read from one snapshot.
func (d *DB) listDue(ctx context.Context, f Filter, limit int) ([]Record, error) {
	lower := []byte(prefixDue)
	if f.After != "" {
		lower = append(dueKey(f.AfterDue, f.After), 0)
	}
	snap := d.db.NewSnapshot()
	defer snap.Close()
	var recs []Record
	errStop := errors.New("stop")
	err := scanRange(snap, lower, prefixEnd([]byte(prefixDue)), func(k, _ []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, ok := idFromTimeKey(prefixDue, k)
		if !ok {
			return fmt.Errorf("%w: due key %q", ErrCorrupt, k)
		}
		rec, err := getRecord(snap, id)
		if err != nil {
			// The entry goes with the record in the same batch: a record
			// missing behind it is damage.
			return fmt.Errorf("ledger: due index entry of execution[%s]: %w", id, err)
		}
		if !f.matches(rec) {
			return nil
		}
		recs = append(recs, rec)
		if len(recs) >= limit {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return recs, err
}

// matches reports whether f selects rec.
func (f Filter) matches(rec Record) bool {
	return (f.State == "" || rec.State == f.State) &&
		(f.Namespace == "" || rec.Namespace == f.Namespace) &&
		(len(f.Namespaces) == 0 || slices.Contains(f.Namespaces, rec.Namespace)) &&
		(f.SessionID == "" || rec.SessionID == f.SessionID)
}

// scan calls fn for every key with the prefix, in order. The slices are
// only valid during the call.
func scan(r reader, prefix []byte, fn func(k, v []byte) error) error {
	return scanRange(r, prefix, prefixEnd(prefix), fn)
}

func scanRange(r reader, lower, upper []byte, fn func(k, v []byte) error) error {
	return scanDir(r, lower, upper, false, fn)
}

// scanRangeReverse is scanRange from the last key to the first.
func scanRangeReverse(r reader, lower, upper []byte, fn func(k, v []byte) error) error {
	return scanDir(r, lower, upper, true, fn)
}

func scanDir(r reader, lower, upper []byte, reverse bool, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("ledger: iterator: %w", err)
	}
	first, next := it.First, it.Next
	if reverse {
		first, next = it.Last, it.Prev
	}
	for valid := first(); valid; valid = next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("ledger: read %q: %w", it.Key(), err)
		}
		if err := fn(it.Key(), v); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return fmt.Errorf("ledger: iterate: %w", err)
	}
	return it.Close()
}
