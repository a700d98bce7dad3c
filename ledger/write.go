package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Create implements Ledger. What it stores is what Start returns: the
// ledger fills in the event's Seq (1), Time, ExecutionID, ToolCallID,
// Attempt and To, sets Version, Events (1), UpdatedAt and (if zero)
// CreatedAt. The initial state must be one the grammar allows (see
// grammar.go), else ErrIllegalTransition; an empty id or MaxAttempts < 1 is
// ErrInvalid. An id that was pruned is refused with
// ErrPruned: a pruned execution never runs again as new.
func (d *DB) Create(ctx context.Context, rec Record, ev Event) (Record, error) {
	if err := d.enter(ctx); err != nil {
		return Record{}, err
	}
	defer d.exit()
	rec, ev, err := Start(rec, ev, d.opts.Now())
	if err != nil {
		return Record{}, err
	}
	guarded := rec.DuplicateWindow > 0 && rec.DuplicateOf == ""
	if guarded {
		// The intent's lock before the id's: the look-up below and the
		// commit are one step for every guarded Create of the intent (see
		// RATIONALE.md, "Why is the duplicate check part of the ledger's
		// Create?").
		ik := IntentKey(rec)
		mu := &d.intents[maphash.Bytes(d.seed, ik[:])%uint64(len(d.intents))]
		mu.Lock()
		defer mu.Unlock()
	}
	defer d.lock(rec.ID).Unlock()

	existing, err := getRecord(d.db, rec.ID)
	switch {
	case err == nil:
		return existing, fmt.Errorf("execution[%s]: %w", rec.ID, ErrExists)
	case errors.Is(err, ErrPruned):
		return existing, fmt.Errorf("execution[%s] cannot be created again: %w", rec.ID, ErrPruned)
	case !errors.Is(err, ErrNotFound):
		return Record{}, err
	}
	if guarded {
		earlier, found, err := d.repeated(rec)
		if err != nil {
			return Record{}, err
		}
		if found {
			return earlier, fmt.Errorf("execution[%s] repeats execution[%s] (%s, created %s): %w",
				rec.ID, earlier.ID, earlier.State, earlier.CreatedAt.Format(time.RFC3339Nano), ErrDuplicate)
		}
	}

	b := d.db.NewBatch()
	defer b.Close()
	rec, fc, err := d.writeRecord(b, nil, rec, ev)
	if err != nil {
		return Record{}, err
	}
	// The session is classified by its first record and never
	// reclassified. Once its marker is committed no lock is needed; until
	// then the session's lock is held across the commit, so two first
	// records cannot race. Only a session's first records wait for each
	// other; later ones commit (and group-commit) in parallel.
	sk := sessionKey(rec.Namespace, rec.SessionID)
	marked := d.sessionMarked(sk)
	if !marked {
		if marked, err = d.has(sk); err != nil {
			return Record{}, err
		}
	}
	if !marked {
		sm := &d.sessionLocks[maphash.Bytes(d.seed, sk)%uint64(len(d.sessionLocks))]
		sm.Lock()
		defer sm.Unlock()
		if marked, err = d.has(sk); err != nil {
			return Record{}, err
		}
		if !marked {
			_ = b.Set(sk, sessionMarker(rec), nil)
		}
	}
	if err := d.commit(b, fc, &rec); err != nil {
		return Record{}, fmt.Errorf("ledger: commit execution[%s]: %w", rec.ID, err)
	}
	noteWriteTimes(ctx, b, d.wo.Sync)
	d.remember(rec)
	d.noteSessionMarked(sk)
	return rec, nil
}

// repeated returns the record of rec's intent that rec repeats (see
// Repeated) among those created within its duplicate window before it. The
// caller holds the intent's lock, so no record of the intent is created
// meanwhile.
func (d *DB) repeated(rec Record) (Record, bool, error) {
	ik := IntentKey(rec)
	var (
		out   Record
		found bool
		n     int
	)
	errFound := errors.New("found")
	err := scanRange(d.db, intentKeyAfter(ik, rec.CreatedAt.Add(-rec.DuplicateWindow)), prefixEnd(intentPrefix(ik)), func(k, _ []byte) error {
		id, ok := idFromIntentKey(k)
		if !ok {
			return fmt.Errorf("%w: duplicate-intent key %q", ErrCorrupt, k)
		}
		r, ok := d.cached(id)
		if !ok {
			var err error
			if r, err = getRecord(d.db, id); errors.Is(err, ErrPruned) || errors.Is(err, ErrNotFound) {
				return nil // an entry Prune has not removed yet
			} else if err != nil {
				return err
			}
		}
		if !CountsAsRepeated(r) {
			return nil
		}
		if !found || out.DuplicateOf != "" && r.DuplicateOf == "" {
			out, found = r, true
		}
		if n++; out.DuplicateOf == "" || n >= MaxRepeatCandidates {
			return errFound
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return Record{}, false, err
	}
	return out, found, nil
}

// Apply implements Ledger; the grammar it enforces is documented in
// grammar.go, and what it stores is what Step returns (the ledger sets
// UpdatedAt, Events and the event's Seq, Time, ExecutionID, ToolCallID,
// Attempt, From and To). A pruned id is ErrPruned.
func (d *DB) Apply(ctx context.Context, id string, t Transition) (Record, error) {
	if err := d.enter(ctx); err != nil {
		return Record{}, err
	}
	defer d.exit()
	defer d.lock(id).Unlock()

	old, ok := d.cached(id)
	if !ok {
		var err error
		if old, err = getRecord(d.db, id); err != nil {
			return Record{}, err
		}
	}
	rec, ev, err := Step(old, t, d.opts.Now())
	if err != nil {
		return Record{}, err
	}
	b := d.db.NewBatch()
	defer b.Close()
	rec, fc, err := d.writeRecord(b, &old, rec, ev)
	if err != nil {
		return Record{}, err
	}
	commit := d.commit
	if t.Lazy {
		commit = d.commitLazy
	}
	if err := commit(b, fc, &rec); err != nil {
		return Record{}, fmt.Errorf("ledger: commit execution[%s]: %w", id, err)
	}
	noteWriteTimes(ctx, b, d.wo.Sync && !t.Lazy)
	d.remember(rec)
	return rec, nil
}

// runLazySyncer makes each lazy write durable within LazySyncInterval.
// It looks every half interval, and syncs the log only for lazy writes
// that were already there at its previous look and that no synced commit
// has covered since: so each waits at most the interval, and under a flow
// of calls (each new call's intent is a synced commit, which covers every
// lazy write before it within milliseconds) the syncer has nothing to do.
// Syncing at every look instead would sync nearly every time under
// concurrency, when some lazy write is always a moment old.
func (d *DB) runLazySyncer() {
	defer close(d.syncerDone)
	t := time.NewTicker(max(d.opts.LazySyncInterval/2, 1))
	defer t.Stop()
	var seen uint64 // lazy writes committed at the previous look
	for {
		select {
		case <-d.stopSyncer:
			d.syncLazy(d.lazyWrites.Load())
			return
		case <-t.C:
			before := seen
			seen = d.lazyWrites.Load()
			d.syncLazy(before)
		}
	}
}

// syncLazy syncs the write-ahead log if one of the first n lazy writes is
// not known durable (a synced commit or an earlier sync came after it).
func (d *DB) syncLazy(n uint64) {
	if d.lazyDurable.Load() >= n {
		return
	}
	all := d.lazyWrites.Load() // the sync covers every write committed before it
	if err := d.db.LogData(nil, pebble.Sync); err != nil {
		d.opts.Logger.Error("ledger: sync lazy writes", "err", err)
		return
	}
	d.lazySyncs.Add(1)
	d.noteLazyDurable(all)
}

// noteLazyDurable records that the first n lazy writes are durable.
func (d *DB) noteLazyDurable(n uint64) {
	for {
		cur := d.lazyDurable.Load()
		if cur >= n || d.lazyDurable.CompareAndSwap(cur, n) {
			return
		}
	}
}

// writeRecord adds to b the record, its newest event and every index change
// between old (nil for a new record) and rec. rec and ev must be
// normalized (Start and Step return them so), so that what a write returns
// equals what a later Get decodes.
func (d *DB) writeRecord(b *pebble.Batch, old *Record, rec Record, ev Event) (Record, countChange, error) {
	var fc countChange
	v, err := encodeRecord(rec)
	if err != nil {
		return Record{}, fc, err
	}
	if len(v) > d.opts.MaxRecordBytes {
		return Record{}, fc, fmt.Errorf("execution[%s] is %d bytes, limit %d: %w", rec.ID, len(v), d.opts.MaxRecordBytes, ErrTooLarge)
	}
	e, err := encodeEvent(ev)
	if err != nil {
		return Record{}, fc, err
	}
	_ = b.Set(recordKey(rec.ID), v, nil)
	_ = b.Set(eventKey(rec.ID, ev.Seq), e, nil)
	if old == nil {
		_ = b.Set(createdKey(rec.CreatedAt, rec.ID), nil, nil)
		if rec.DuplicateWindow > 0 {
			_ = b.Set(intentKey(rec), nil, nil)
		}
	}
	switch {
	case !rec.State.Terminal():
		// The pending entry carries the record itself, so recovery reads
		// only the pending range: no point read per pending execution into
		// an LSM that holds the whole history.
		_ = b.Set(pendingKey(rec.ID), v, nil)
	case rec.State.Terminal():
		_ = b.Delete(pendingKey(rec.ID), nil)
		_ = b.Set(termKey(rec.UpdatedAt, rec.ID), nil, nil)
	}
	wasFenced := old != nil && old.State == StateRecoveryRequired
	switch isFenced := rec.State == StateRecoveryRequired; {
	case isFenced && !wasFenced:
		_ = b.Set(fenceKey(rec.Namespace, rec.SessionID, rec.ID), nil, nil)
		fc.session, fc.delta = string(fencePrefix(rec.Namespace, rec.SessionID)), +1
	case !isFenced && wasFenced:
		_ = b.Delete(fenceKey(old.Namespace, old.SessionID, old.ID), nil)
		fc.session, fc.delta = string(fencePrefix(old.Namespace, old.SessionID)), -1
	}
	wasAwaiting := old != nil && old.State == StateAwaitingApproval
	switch isAwaiting := rec.State == StateAwaitingApproval; {
	case isAwaiting && !wasAwaiting:
		_ = b.Set(awaitKey(rec.Namespace, rec.ID), nil, nil)
		fc.namespace, fc.awaiting = rec.Namespace, +1
	case !isAwaiting && wasAwaiting:
		_ = b.Delete(awaitKey(old.Namespace, old.ID), nil)
		fc.namespace, fc.awaiting = old.Namespace, -1
	}
	var oldDue time.Time
	wasDue := false
	if old != nil {
		oldDue, wasDue = DueAt(*old)
	}
	newDue, isDue := DueAt(rec)
	if wasDue && (!isDue || !newDue.Equal(oldDue)) {
		_ = b.Delete(dueKey(oldDue, old.ID), nil)
	}
	if isDue && (!wasDue || !newDue.Equal(oldDue)) {
		_ = b.Set(dueKey(newDue, rec.ID), nil, nil)
	}
	return rec, fc, nil
}

// commit commits b, the write of rec, whose writes change the fence and
// approval indexes by fc, so that their counts never under-report: an added
// entry is counted before the commit (and uncounted if the commit fails), a
// removed one after it. A fence count that is briefly too high only makes
// Fenced read the index; an approval count, a limit refuse a call a moment
// early. The write is counted, and its session noted for the witness with
// the count that includes it. See RATIONALE.md, "Why one synced batch per
// change?".
func (d *DB) commit(b *pebble.Batch, fc countChange, rec *Record) error {
	return d.commitWith(b, fc, d.wo, rec)
}

// commitLazy commits b without waiting for its own fsync (see
// Transition.Lazy): the background syncer, or any synced commit after it,
// makes it durable.
func (d *DB) commitLazy(b *pebble.Batch, fc countChange, rec *Record) error {
	err := d.commitWith(b, fc, pebble.NoSync, rec)
	if err == nil {
		d.lazyWrites.Add(1)
	}
	return err
}

func (d *DB) commitWith(b *pebble.Batch, fc countChange, wo *pebble.WriteOptions, rec *Record) error {
	if add := fc.added(); !add.zero() {
		d.noteCounts(add)
	}
	// A synced commit makes every write before it in the log durable
	// (Pebble syncs the log up to its record, and syncs a log it rotates
	// away from before it writes to the next one), so also each lazy
	// write that had committed when it began: the syncer need not sync
	// for those.
	lazyBefore := d.lazyWrites.Load()
	err := b.Commit(wo)
	if err == nil && wo.Sync {
		d.noteLazyDurable(lazyBefore)
	}
	if err == nil {
		n := d.writes.Add(1)
		if d.sessions != nil {
			d.sessions.Touch(rec.Namespace, rec.SessionID, n)
		}
	}
	switch {
	case err != nil && !fc.added().zero():
		d.noteCounts(fc.added().negated())
	case err == nil && !fc.removed().zero():
		d.noteCounts(fc.removed())
	}
	return err
}

// has reports whether key is present.
func (d *DB) has(key []byte) (bool, error) {
	_, closer, err := d.db.Get(key)
	switch {
	case err == nil:
		return true, closer.Close()
	case errors.Is(err, pebble.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("ledger: read %q: %w", key, err)
	}
}

// normTime returns t as the record encoding reads it back: UTC, without a
// monotonic clock reading.
func normTime(t time.Time) time.Time { return t.Round(0).UTC() }

// Normalize gives r the form a later read decodes: times in UTC without a
// monotonic clock reading, empty byte slices nil. Start and Step return
// normalized records; a backend that stores records another way than this
// package's encoding must keep that form.
func Normalize(r *Record) {
	if len(r.Args) == 0 {
		r.Args = nil
	}
	if r.Outcome != nil && r.Outcome.Result != nil && len(r.Outcome.Result) == 0 {
		o := *r.Outcome
		o.Result = nil
		r.Outcome = &o
	}
	r.CreatedAt, r.UpdatedAt = normTime(r.CreatedAt), normTime(r.UpdatedAt)
	r.Deadline, r.NextAttemptAt = normTime(r.Deadline), normTime(r.NextAttemptAt)
	if r.Approval != nil {
		a := *r.Approval
		a.RequestedAt, a.ExpiresAt, a.DecidedAt = normTime(a.RequestedAt), normTime(a.ExpiresAt), normTime(a.DecidedAt)
		r.Approval = &a
	}
	if r.Resolution != nil {
		res := *r.Resolution
		res.At = normTime(res.At)
		r.Resolution = &res
	}
}

// noteWriteTimes fills the WriteTimes ctx carries, if any, from the
// committed batch b.
func noteWriteTimes(ctx context.Context, b *pebble.Batch, synced bool) {
	if wt := writeTimesFrom(ctx); wt != nil {
		wt.Synced = synced
		if synced {
			wt.SyncWait = b.CommitStats().CommitWaitDuration
		}
	}
}
