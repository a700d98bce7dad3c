package ledger

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/connhost/connhost/internal/pebbleconf"
	"github.com/connhost/connhost/ledger/internal/witness"
)

// The Pebble ledger, one idea per file:
//
//   - db.go: the DB type, its per-id locks and the guard every operation
//     enters (Close waits for operations in flight);
//   - open.go: Open and Close, the protocol marker, the high-water count;
//     mark.go: the mark file kept outside the directory; walcheck.go:
//     damage in the newest write-ahead log;
//   - write.go: Create and Apply (check, batch, synced commit);
//   - read.go: Get, Events, Pending, List and the iterators under them;
//   - session.go: a session's classification by its first record;
//   - fences.go: the fence index of recovery_required calls, counted in
//     memory so Fenced rarely reads it; awaiting.go: the approval index,
//     counted in memory per namespace; due.go: the due index a recovery
//     pass reads;
//   - cache.go: the latest version of recent non-terminal records;
//   - prune.go: Prune, which replaces old terminal records by tombstones;
//   - keys.go: the key layout; codec.go and binary.go: the encodings;
//   - grammar.go: the transitions Create and Apply accept.

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
	// sessionLocks serialise the classification of a session by its
	// first record (see sessionMarker). Taken after an id's lock, never
	// before one.
	sessionLocks [64]sync.Mutex
	// intents serialise the guarded Creates of one intent (IntentKey):
	// the look-up of earlier records and the commit of the new one. Taken
	// before an id's lock, never after one.
	intents [numLocks]sync.Mutex

	// fences counts the fence entries (f/) of each session, keyed by its
	// fence prefix. Open loads it from the index and every commit that adds
	// or removes an entry updates it (see commit: it may over-report for a
	// moment, never under-report), so Fenced answers the common case - no
	// uncertain call in the session - without opening an iterator. The
	// ledger owns its directory (Pebble locks it), so no other writer can
	// change the index behind the count.
	fenceMu sync.RWMutex
	fences  map[string]int

	// awaiting counts the approval index (a/) per namespace, and
	// awaitTotal all of it, kept as fences is, so AwaitingApproval never
	// reads the index.
	awaitMu    sync.RWMutex
	awaiting   map[string]int
	awaitTotal int

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
	// openWrites is writes' value at Open (WALStats counts from there).
	openWrites uint64
	// markMu serialises updates of m/hwm and the mark (the background
	// updater and Close): they are the only writers of m/hwm, so its
	// stored value only grows. stored is the count last committed under
	// m/hwm, inMark the count the mark file holds.
	markMu         sync.Mutex
	stored, inMark uint64
	stopMarker     chan struct{}
	markerDone     chan struct{}
	// generation is the number of restores accepted (m/generation); it
	// changes only in AcceptRestore, under markMu.
	generation uint64

	// The witness (Options.WitnessPath; nil without one): wit is its
	// content as last written (or to be written), inWitness the count it
	// holds, both under markMu; sessions collects the sessions written
	// since, with the count of each one's last write.
	wit       *witness.File
	inWitness uint64
	sessions  *witness.Tracker
	// adopt is the witness Open found one generation or more behind the
	// ledger (a restore was accepted without it), whose sessions Open
	// fences before it returns.
	adopt *witness.File
	// restored is what an accepting Open (AcceptRestore) found the
	// ledger behind, found the witness it read. While frozen (set by such
	// an Open, cleared once the restore is accepted, under markMu) the
	// mark and the witness are not written.
	restored *restoreFound
	found    *witness.File
	frozen   bool

	// lazyWrites counts lazy commits (written, not synced), lazyDurable
	// how many of the first of them are known durable (a synced commit or
	// the syncer came after them), and lazySyncs the syncer's own syncs.
	// The syncer syncs only while lazyDurable < lazyWrites.
	lazyWrites, lazyDurable, lazySyncs atomic.Uint64
	stopSyncer, syncerDone             chan struct{}
}

var _ Ledger = (*DB)(nil)

// numLocks is the number of per-id mutexes. A writer that shares one with
// another waits for that writer's synced commit, which under load takes a
// millisecond or more; with 64 concurrent writers and 16,384 locks that
// happens to 0.4% of writes (with 1,024 it was 6%, and cost half the
// throughput). They take 128 KiB. See RATIONALE.md, "Why per-id locks, not
// a global lock?".
const numLocks = 1 << 14

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

// WALStats is what the ledger's write-ahead log has done since Open.
type WALStats struct {
	// Syncs is the number of fsyncs of the write-ahead log.
	Syncs uint64
	// Bytes is the number of bytes written to the write-ahead log.
	Bytes uint64
	// Commits is the number of write batches committed (synced or not).
	Commits uint64
}

// WALStats returns the write-ahead log's counts since Open: Commits over
// Syncs is how many writes share each fsync, the figure that bounds the
// throughput of many concurrent callers (connhost bench ledger reports it).
func (d *DB) WALStats() (WALStats, error) {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return WALStats{}, ErrClosed
	}
	m := d.db.Metrics()
	return WALStats{Syncs: pebbleconf.WALSyncs(m), Bytes: m.WAL.BytesWritten, Commits: d.writes.Load() - d.openWrites}, nil
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
