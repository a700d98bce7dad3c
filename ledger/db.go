package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/connhost/connhost/internal/pebbleconf"
)

// DB is the Pebble implementation of Ledger. It is safe for concurrent use.
// Open returns it; Close releases the Pebble database it owns.
//
// Each Create and Apply holds one of a fixed set of mutexes, chosen by a
// hash of the execution id, across its read, its check and its synced
// commit, so the check-then-write is atomic per execution while writes to
// different executions proceed (and their fsyncs are group-committed by
// Pebble) in parallel. There is no global write lock.
type DB struct {
	opts   Options
	db     *pebble.DB
	wo     *pebble.WriteOptions
	seed   maphash.Seed
	locks  [numLocks]sync.Mutex
	recent [numCacheShards]cacheShard
	// sessions serialise the classification of a session by its first
	// record (see sessionMarker). Taken after an id's lock, never before
	// one.
	sessions [64]sync.Mutex

	// fences counts the fence entries (f/) of each session, keyed by its
	// fence prefix. Open loads it from the index and every commit that adds
	// or removes an entry updates it (see commit: it may over-report for a
	// moment, never under-report), so Fenced answers the common case - no
	// uncertain call in the session - without opening an iterator. The
	// ledger owns its directory (Pebble locks it), so no other writer can
	// change the index behind the count.
	fenceMu sync.RWMutex
	fences  map[string]int

	// marked holds session markers known to be committed, so the Creates
	// of a known session skip reading its marker (see sessionMarked).
	markedMu sync.RWMutex
	marked   map[string]struct{}

	// closeMu is held for reading by every operation and for writing by
	// Close, so Close waits for operations in flight.
	closeMu sync.RWMutex
	closed  bool

	// fs is the filesystem of the directory and the mark; dirLock is the
	// directory's lock, held from before the checks of Open until Close.
	fs      vfs.FS
	dirLock *pebble.Lock
	// created is set when Open created the ledger.
	created bool
	// identity is the ledger's identity (m/identity and the mark).
	identity string
	// writes counts the committed write batches (Create, Apply, Prune
	// and BulkLoad batches), continuing from the count stored under m/hwm
	// at Open. It is only ever incremented, after a successful commit.
	writes atomic.Uint64
	// markMu serialises updates of m/hwm and the mark (the background
	// updater and Close): they are the only writers of m/hwm, so its
	// stored value only grows. stored is the count last committed under
	// m/hwm, inMark the count the mark file holds.
	markMu         sync.Mutex
	stored, inMark uint64
	stopMarker     chan struct{}
	markerDone     chan struct{}
}

var _ Ledger = (*DB)(nil)

// numLocks is the number of per-id mutexes. A writer that shares one with
// another waits for that writer's synced commit, which under load takes a
// millisecond or more; with 64 concurrent writers and 16,384 locks that
// happens to 0.4% of writes (with 1,024 it was 6%, and cost half the
// throughput). They take 128 KiB.
const numLocks = 1 << 14

// cacheShard caches the latest committed version of a few non-terminal
// records, so the Apply that follows a Create (the hot path: dispatch, then
// outcome) skips reading and decoding the record it just wrote. An id's
// entry is only read and written while holding the id's lock, only after a
// successful commit, and never holds a terminal record — Prune, which
// writes without the locks, touches terminal records only. The shard's own
// mutex only guards the map.
type cacheShard struct {
	mu sync.Mutex
	m  map[string]Record
	_  [48]byte // keep shards on separate cache lines
}

const (
	numCacheShards = 1024
	// shardCacheSize caps the records cached per shard (1,024 × 8).
	shardCacheSize = 8
)

func (d *DB) shard(id string) *cacheShard {
	return &d.recent[maphash.String(d.seed, id)%numCacheShards]
}

// cached returns a copy of id's cached record. The caller holds id's lock.
func (d *DB) cached(id string) (Record, bool) {
	s := d.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.m[id]
	if !ok {
		return Record{}, false
	}
	return cloneRecord(rec), true
}

// remember caches rec as just committed. The caller holds rec.ID's lock.
func (d *DB) remember(rec Record) {
	s := d.shard(rec.ID)
	if rec.State.Terminal() {
		s.mu.Lock()
		delete(s.m, rec.ID)
		s.mu.Unlock()
		return
	}
	rec = cloneRecord(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= shardCacheSize {
		s.m = make(map[string]Record, shardCacheSize)
	}
	s.m[rec.ID] = rec
}

// cloneRecord copies everything a caller could mutate through a Record.
func cloneRecord(r Record) Record {
	r.Args = bytes.Clone(r.Args)
	if r.Approval != nil {
		a := *r.Approval
		r.Approval = &a
	}
	if r.Outcome != nil {
		o := *r.Outcome
		o.Result = bytes.Clone(o.Result)
		r.Outcome = &o
	}
	if r.Resolution != nil {
		res := *r.Resolution
		r.Resolution = &res
	}
	return r
}

// pebbleOptions returns the Pebble configuration of a ledger (see
// internal/pebbleconf, which the raw benchmark baseline shares). The
// caller owns the returned options' cache reference.
func pebbleOptions(opts Options) *pebble.Options {
	return pebbleconf.Options(opts.CacheBytes, opts.Logger, opts.fs)
}

// loadFences counts the fence index per session.
func (d *DB) loadFences() error {
	d.fences = make(map[string]int)
	return scan(d.db, []byte(prefixFence), func(k, _ []byte) error {
		p, ok := fenceSessionPrefix(k)
		if !ok {
			return fmt.Errorf("%w: fence key %q", ErrCorrupt, k)
		}
		d.fences[string(p)]++
		return nil
	})
}

// fenceChange is one fence entry added (+1) or removed (-1) by a write,
// applied to DB.fences around its commit (see commit).
type fenceChange struct {
	session string // the session's fence prefix
	delta   int
}

// commit commits b, whose writes change the fence index by fc, so that the
// fence count never under-reports: an added entry is counted before the
// commit (and uncounted if the commit fails), a removed one after it. A
// count that is briefly too high only makes Fenced read the index.
func (d *DB) commit(b *pebble.Batch, fc fenceChange) error {
	if fc.delta > 0 {
		d.noteFences(fc)
	}
	err := b.Commit(d.wo)
	if err == nil {
		d.writes.Add(1)
	}
	switch {
	case err != nil && fc.delta > 0:
		d.noteFences(fenceChange{fc.session, -fc.delta})
	case err == nil && fc.delta < 0:
		d.noteFences(fc)
	}
	return err
}

func (d *DB) noteFences(changes ...fenceChange) {
	if !slices.ContainsFunc(changes, func(c fenceChange) bool { return c.delta != 0 }) {
		return
	}
	d.fenceMu.Lock()
	defer d.fenceMu.Unlock()
	for _, c := range changes {
		if c.delta == 0 {
			continue
		}
		if n := d.fences[c.session] + c.delta; n > 0 {
			d.fences[c.session] = n
		} else {
			delete(d.fences, c.session)
		}
	}
}

// enter marks the start of an operation; the caller must call d.exit.
func (d *DB) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.closeMu.RLock()
	if d.closed {
		d.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (d *DB) exit() { d.closeMu.RUnlock() }

// lock locks id's mutex; the caller must Unlock it.
func (d *DB) lock(id string) *sync.Mutex {
	mu := &d.locks[maphash.String(d.seed, id)%numLocks]
	mu.Lock()
	return mu
}

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

// Create implements Ledger. The ledger fills in the event's Seq (1), Time,
// ExecutionID, ToolCallID, Attempt and To, sets Version, Events (1),
// UpdatedAt and (if zero) CreatedAt. The initial state must be one the
// grammar allows (see grammar.go), else ErrIllegalTransition; an empty id or
// MaxAttempts < 1 is ErrInvalid. An id that was pruned is refused with
// ErrPruned: a pruned execution never runs again as new.
func (d *DB) Create(ctx context.Context, rec Record, ev Event) (Record, error) {
	if err := d.enter(ctx); err != nil {
		return Record{}, err
	}
	defer d.exit()
	if err := checkCreate(rec); err != nil {
		return Record{}, err
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

	now := d.opts.Now()
	rec.Version = RecordVersion
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.UpdatedAt = now
	rec.Events = 1
	ev.Seq, ev.Time, ev.ExecutionID, ev.ToolCallID = 1, now, rec.ID, rec.ToolCallID
	ev.Attempt, ev.From, ev.To = rec.Attempt, "", rec.State
	if ev.Decision == "" {
		ev.Decision = "intent"
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
		sm := &d.sessions[maphash.Bytes(d.seed, sk)%uint64(len(d.sessions))]
		sm.Lock()
		defer sm.Unlock()
		if marked, err = d.has(sk); err != nil {
			return Record{}, err
		}
		if !marked {
			_ = b.Set(sk, sessionMarker(rec), nil)
		}
	}
	if err := d.commit(b, fc); err != nil {
		return Record{}, fmt.Errorf("ledger: commit execution[%s]: %w", rec.ID, err)
	}
	d.remember(rec)
	d.noteSessionMarked(sk)
	return rec, nil
}

// sessionMarked reports whether sk is known to have a committed session
// marker. Markers are never deleted, so a yes stays true.
func (d *DB) sessionMarked(sk []byte) bool {
	d.markedMu.RLock()
	defer d.markedMu.RUnlock()
	_, ok := d.marked[string(sk)]
	return ok
}

// maxMarkedSessions bounds the set of sessions known to be marked; past
// it, the set starts again (and Create reads a marker to learn it again).
const maxMarkedSessions = 1 << 16

func (d *DB) noteSessionMarked(sk []byte) {
	if d.sessionMarked(sk) {
		return
	}
	d.markedMu.Lock()
	defer d.markedMu.Unlock()
	if d.marked == nil || len(d.marked) >= maxMarkedSessions {
		d.marked = make(map[string]struct{})
	}
	d.marked[string(sk)] = struct{}{}
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

// writeRecord adds to b the record, its newest event and every index change
// between old (nil for a new record) and rec. It returns the record as it
// will read back: times are normalized (UTC, no monotonic reading) so that
// what a write returns equals what a later Get decodes.
func (d *DB) writeRecord(b *pebble.Batch, old *Record, rec Record, ev Event) (Record, fenceChange, error) {
	var fc fenceChange
	normalize(&rec)
	ev.Time = normTime(ev.Time)
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
		fc = fenceChange{string(fencePrefix(rec.Namespace, rec.SessionID)), +1}
	case !isFenced && wasFenced:
		_ = b.Delete(fenceKey(old.Namespace, old.SessionID, old.ID), nil)
		fc = fenceChange{string(fencePrefix(old.Namespace, old.SessionID)), -1}
	}
	return rec, fc, nil
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

// Apply implements Ledger; the grammar it enforces is documented in
// grammar.go. The ledger sets UpdatedAt, Events and the event's Seq, Time,
// ExecutionID, ToolCallID, Attempt, From and To. A pruned id is ErrPruned.
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
	if err := checkTransition(old, t); err != nil {
		return Record{}, err
	}
	now := d.opts.Now()
	rec := old
	rec.Version = RecordVersion // what this write stores, whatever old was read from
	rec.State, rec.Attempt, rec.UpdatedAt = t.To, t.Attempt, now
	if !t.Deadline.IsZero() {
		rec.Deadline = t.Deadline
	}
	if !t.NextAttemptAt.IsZero() {
		rec.NextAttemptAt = t.NextAttemptAt
	}
	if t.Approval != nil {
		a := *t.Approval
		rec.Approval = &a
	}
	if t.Outcome != nil {
		o := *t.Outcome
		rec.Outcome = &o
	}
	if t.Resolution != nil {
		r := *t.Resolution
		rec.Resolution = &r
	}
	if t.CancelRequested {
		rec.CancelRequested = true
	}
	switch {
	case t.Uncertain:
		rec.Uncertain = true
	case t.RuledOut || rec.State.Terminal():
		rec.Uncertain = false
	}
	rec.Events = old.Events + 1
	ev := t.Event
	ev.Seq, ev.Time, ev.ExecutionID, ev.ToolCallID = rec.Events, now, id, rec.ToolCallID
	ev.Attempt, ev.From, ev.To = rec.Attempt, old.State, rec.State

	b := d.db.NewBatch()
	defer b.Close()
	rec, fc, err := d.writeRecord(b, &old, rec, ev)
	if err != nil {
		return Record{}, err
	}
	if err := d.commit(b, fc); err != nil {
		return Record{}, fmt.Errorf("ledger: commit execution[%s]: %w", id, err)
	}
	d.remember(rec)
	return rec, nil
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

// scan calls fn for every key with the prefix, in order. The slices are
// only valid during the call.
func scan(r reader, prefix []byte, fn func(k, v []byte) error) error {
	return scanRange(r, prefix, prefixEnd(prefix), fn)
}

func scanRange(r reader, lower, upper []byte, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("ledger: iterator: %w", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
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

// Fenced implements Ledger. A session without fence entries is answered
// from memory; otherwise it reads only the session's fence index.
func (d *DB) Fenced(ctx context.Context, namespace, sessionID string) ([]Record, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.exit()
	prefix := fencePrefix(namespace, sessionID)
	d.fenceMu.RLock()
	n := d.fences[string(prefix)]
	d.fenceMu.RUnlock()
	if n == 0 {
		return nil, nil
	}
	snap := d.db.NewSnapshot()
	defer snap.Close()
	var recs []Record
	err := scan(snap, prefix, func(k, _ []byte) error {
		id, ok := unescape(k[len(prefix):])
		if !ok {
			return fmt.Errorf("%w: fence key %q", ErrCorrupt, k)
		}
		rec, err := getRecord(snap, id)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
		return nil
	})
	return recs, err
}

// unescape decodes one escaped, terminated part that must fill b.
func unescape(b []byte) (string, bool) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", false
		}
		switch b[i+1] {
		case 0xff:
			out = append(out, 0)
			i++
		case 1:
			return string(out), i+2 == len(b)
		default:
			return "", false
		}
	}
	return "", false
}

// SessionKnown implements Ledger.
func (d *DB) SessionKnown(ctx context.Context, namespace, sessionID string) (bool, error) {
	if err := d.enter(ctx); err != nil {
		return false, err
	}
	defer d.exit()
	v, closer, err := d.db.Get(sessionKey(namespace, sessionID))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: read session marker: %w", err)
	}
	legacy := string(v) == legacySession
	return !legacy, closer.Close()
}

// legacySession marks a session whose first record was a call resumed from
// history the ledger did not see: the session predates the ledger, so "no
// record" never proves "never ran" in it — not even after that first call
// is resolved, and not for calls added to it later.
const legacySession = "legacy"

// sessionMarker is the value of a new session's marker: empty (known under
// the current protocol) unless its first record is a resumed call the
// ledger had no record of.
func sessionMarker(first Record) []byte {
	if first.Resumed && first.State == StateRecoveryRequired {
		return []byte(legacySession)
	}
	return nil
}

// DefaultListLimit is the number of records List returns when Filter.Limit
// is 0.
const DefaultListLimit = 100

// List implements Ledger. It walks the records in id order from f.After,
// skipping tombstones of pruned executions; a filter on state, namespace or
// session is applied while walking, so a selective filter over a large
// history reads more than it returns.
func (d *DB) List(ctx context.Context, f Filter) ([]Record, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.exit()
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
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
		if (f.State != "" && rec.State != f.State) ||
			(f.Namespace != "" && rec.Namespace != f.Namespace) ||
			(f.SessionID != "" && rec.SessionID != f.SessionID) {
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

// pruneBatch is the number of records Prune replaces per synced batch.
const pruneBatch = 512

// Prune implements Ledger. It walks the retention index up to olderThan
// and, per record, deletes its events and index entries and replaces the
// record with a tombstone, in synced batches of up to 512 records. Records
// are terminal, so no Create or Apply can race with their removal (both
// only read a terminal record); a crash between batches leaves a prefix of
// the work done and the rest still in the index for the next Prune.
func (d *DB) Prune(ctx context.Context, olderThan time.Time) (int, error) {
	if err := d.enter(ctx); err != nil {
		return 0, err
	}
	defer d.exit()
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
	v, err := encodeTombstone(tombstone{
		ID: id, Namespace: rec.Namespace, SessionID: rec.SessionID, ToolCallID: rec.ToolCallID,
		ArgsDigest: rec.ArgsDigest, State: rec.State, TerminalAt: rec.UpdatedAt, PrunedAt: now,
	})
	if err != nil {
		return err
	}
	return b.Set(recordKey(id), v, nil)
}

// DiskUsage returns the bytes the ledger's data directory uses on disk, as
// Pebble accounts them (tables, WAL, manifests).
func (d *DB) DiskUsage() (int64, error) {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return 0, ErrClosed
	}
	return int64(d.db.Metrics().DiskSpaceUsage()), nil
}

// normTime returns t as the record encoding reads it back: UTC, without a
// monotonic clock reading.
func normTime(t time.Time) time.Time { return t.Round(0).UTC() }

// normalize gives r the form a later read decodes: times as normTime
// returns them, empty byte slices nil.
func normalize(r *Record) {
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
