// Package pgledger is a ledger.Ledger on PostgreSQL, for a fleet of
// connhost nodes that share one ledger. The Pebble ledger (ledger.Open)
// stays the embedded default; this backend has the same semantics, pinned
// by the conformance suite in ledger/ledgertest: the same grammar (it calls
// ledger.Start and ledger.Step), the same errors, append-only events, a
// pending index that recovery reads alone, fences, session classification
// and retention with tombstones.
//
// Every Create and Apply is one SQL statement in its own transaction: the
// execution's row (its record and, appended to it, its event), its row in
// the pending set while it is not terminal, and (for a session's first
// record) the session's classification are written together or not at
// all, and the row is changed only if it still holds the version (event
// count), state and attempt the change was checked against - a
// compare-and-set, so that of two writers racing on one execution, on one
// node or on two, exactly one wins and the other gets ErrConflict (or
// ErrTerminal). No column an index covers changes after the insert, so an
// outcome is a HOT update. See RATIONALE.md, "Why one row per execution,
// with what changes with its state beside it?" and "Why compare-and-set
// at READ COMMITTED, not SERIALIZABLE?".
//
// For fleet mode the schema records an owner node and lease epoch per
// execution, and DB implements ledger.Fleet: node leases (RegisterNode,
// RenewLease, ReleaseLease), an atomic claim of the executions of nodes
// whose lease expired (ClaimExpired), and writes fenced by the writer's
// lease (CreateOwned, ApplyOwned).
package pgledger

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/internal/witness"
)

// Errors of the fleet methods: ledger's (see ledger.Fleet), here for
// callers of this package. Callers compare with errors.Is.
var (
	// ErrLeaseExpired: the writer's lease has expired or was superseded
	// by a newer epoch of its node; the node must stop dispatching.
	ErrLeaseExpired = ledger.ErrLeaseExpired
	// ErrNotOwner: the execution has an attempt in flight owned by
	// another node's lease.
	ErrNotOwner = ledger.ErrNotOwner
)

// DefaultMaxConns is the default value of Options.MaxConns.
const DefaultMaxConns = 32

// DefaultApplicationName is the default value of Options.ApplicationName.
const DefaultApplicationName = "connhost"

// Options configures Open. The zero value of every field except DSN is
// replaced by its default in EnsureDefaults.
type Options struct {
	// DSN is the connection string of the database, as a URL
	// (postgres://user@host:5432/db?sslmode=verify-full) or key=value
	// pairs. It is required. The ledger's tables are created in the
	// connection's default schema.
	DSN string
	// MaxConns caps the connections to the database.
	// The default value is DefaultMaxConns (32).
	MaxConns int32
	// ApplicationName is reported to the server (pg_stat_activity).
	// The default value is DefaultApplicationName ("connhost").
	ApplicationName string
	// Now returns the current time; the ledger stamps UpdatedAt, event
	// times and the retention index with it. Leases use the database's
	// clock instead, which every node shares.
	// The default value is time.Now.
	Now func() time.Time
	// MaxRecordBytes caps the size of one encoded record; larger writes
	// fail with ledger.ErrTooLarge.
	// The default value is ledger.DefaultMaxRecordBytes (4 MiB).
	MaxRecordBytes int
	// Logger receives what the ledger reports (migrations applied).
	// The default value is slog.Default().
	Logger *slog.Logger
	// MustExist makes Open refuse a database that holds no ledger (no
	// schema) with ledger.ErrNoLedger instead of creating one: for
	// commands that only read, so that a mistyped DSN does not leave an
	// empty ledger behind. Such a DB checks its witness at Open but does
	// not write it. The default value is false.
	MustExist bool
	// WitnessPath is this node's witness: a file outside the database
	// that holds the ledger's identity, generation and commit position as
	// this node last saw them, and the sessions it wrote to (see
	// witness.go). Open refuses a database whose ledger is missing,
	// another one, or behind it (a *ledger.DamageError), and a DB that
	// finds it so while it runs refuses every operation from then on; a
	// restore is accepted deliberately with AcceptRestore. Give every node
	// its own, kept where a restore of the database does not reach.
	// The default value is "": no witness (the connhost commands give one
	// beside their data directory).
	WitnessPath string
	// WitnessInterval is how often the witness is brought up to date
	// (the commit position advanced after this node's writes, or read):
	// writes acknowledged in the last interval before a rollback are not
	// covered by it, and a rollback is seen within an interval.
	// The default value is ledger.DefaultMarkInterval (1s).
	WitnessInterval time.Duration
	// WitnessSessions is how many of the sessions it wrote to most
	// recently the witness names (see ledger.Options.WitnessSessions).
	// The default value is ledger.DefaultWitnessSessions.
	WitnessSessions int
	// Init starts a new ledger deliberately where the witness names one
	// that is gone (the database holds no ledger) or names another ledger
	// than the database holds: the witness is renamed aside and a new one
	// written. A database whose ledger is behind the witness is refused
	// (accept it with AcceptRestore), and so is one that holds the ledger
	// the witness names, with ledger.ErrInvalid. The default value is
	// false.
	Init bool

	// accepting is set by AcceptRestore: a ledger behind its witness
	// opens, and what it is behind is recorded instead.
	accepting bool
}

// EnsureDefaults fills every zero field that has a default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.ApplicationName == "" {
		o.ApplicationName = DefaultApplicationName
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = ledger.DefaultMaxRecordBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WitnessInterval == 0 {
		o.WitnessInterval = ledger.DefaultMarkInterval
	}
	if o.WitnessSessions == 0 {
		o.WitnessSessions = ledger.DefaultWitnessSessions
	}
	return o
}

// Validate reports every problem with o at once (joined, each wrapping
// ledger.ErrInvalid). Call it after EnsureDefaults.
func (o *Options) Validate() error {
	var errs []error
	if o.DSN == "" {
		errs = append(errs, fmt.Errorf("%w: Options.DSN is required", ledger.ErrInvalid))
	} else if _, err := pgxpool.ParseConfig(o.DSN); err != nil {
		errs = append(errs, fmt.Errorf("%w: Options.DSN: %w", ledger.ErrInvalid, err))
	}
	if o.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("%w: Options.MaxConns = %d, must be > 0", ledger.ErrInvalid, o.MaxConns))
	}
	if o.MaxRecordBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: Options.MaxRecordBytes = %d, must be > 0", ledger.ErrInvalid, o.MaxRecordBytes))
	}
	if o.WitnessInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: Options.WitnessInterval = %s, must be > 0", ledger.ErrInvalid, o.WitnessInterval))
	}
	if o.WitnessSessions < 0 || o.WitnessSessions > witness.MaxSessions {
		errs = append(errs, fmt.Errorf("%w: Options.WitnessSessions = %d, must be between 1 and %d", ledger.ErrInvalid, o.WitnessSessions, witness.MaxSessions))
	}
	if o.Init && o.WitnessPath == "" {
		errs = append(errs, fmt.Errorf("%w: Options.Init needs Options.WitnessPath: it replaces the witness's ledger", ledger.ErrInvalid))
	}
	return errors.Join(errs...)
}

// DB is the PostgreSQL implementation of ledger.Ledger. It is safe for
// concurrent use, and any number of DBs, on any number of machines, may
// share one database. Open returns it; Close releases its connections.
type DB struct {
	opts Options
	pool *pgxpool.Pool
	seed maphash.Seed
	// recent caches the last version of non-terminal records this DB
	// wrote, so the Apply that follows a Create (dispatch, then outcome)
	// needs no read. A stale entry (another node wrote since) costs a
	// refused compare-and-set and a read; it is never trusted beyond that.
	recent [cacheShards]cacheShard

	// closeMu is held for reading by every operation and for writing by
	// Close, so Close waits for operations in flight.
	closeMu sync.RWMutex
	closed  bool

	// name names the database in messages (never its password).
	name string
	// identity is the ledger's (connhost_ledger), as Open read it.
	identity string

	// The witness (Options.WitnessPath), see witness.go. wmu serialises
	// its updates; wit is its content as last written (nil without one,
	// for a reader, or until an accepted restore), unsaved set while a
	// write of it failed. sessions collects the sessions written since,
	// probe the last write, dirty whether there was one since the last
	// advance of the commit position. damage, once set, fails every
	// operation: the ledger was found behind the witness while open.
	wmu                      sync.Mutex
	wit                      *witness.File
	unsaved                  bool
	sessions                 *witness.Tracker
	probe                    atomic.Pointer[witness.Probe]
	dirty                    atomic.Bool
	damage                   atomic.Pointer[ledger.DamageError]
	stopWitness, witnessDone chan struct{}
	// setAside is set when Open set the witness aside (Init); restored,
	// found and frozen are an accepting Open's (AcceptRestore): what the
	// ledger is behind, the witness read, and that nothing advances the
	// witness until the restore is accepted.
	setAside bool
	restored *restoreFound
	found    *witness.File
	frozen   bool
}

var _ ledger.Fleet = (*DB)(nil)

// Open connects to the database, applies the schema migrations this
// release has and the database lacks (see migrate.go), checks the ledger
// against the witness (Options.WitnessPath; see witness.go), and returns
// the ledger. A database whose ledger is missing (its tables dropped),
// another one, or behind the witness (an older dump restored, tables
// emptied) is refused with a *ledger.DamageError, before any table is
// created. A database whose schema is newer than this release's, or whose
// applied migrations differ from this release's, is refused with an error
// matching ledger.ErrProtocol that names both versions. The caller owns
// the DB and must Close it.
func Open(ctx context.Context, opts Options) (*DB, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("%w: Options.DSN: %w", ledger.ErrInvalid, err)
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgledger: connect: %w", err)
	}
	d := &DB{opts: opts, pool: pool, seed: maphash.MakeSeed(),
		name: fmt.Sprintf("database %s on %s:%d", cfg.ConnConfig.Database, cfg.ConnConfig.Host, cfg.ConnConfig.Port)}
	if err := d.open(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// open runs Open's checks and migrations on d's new pool.
func (d *DB) open(ctx context.Context) error {
	w, err := d.readWitness()
	if err != nil {
		return err
	}
	var existed bool
	if err := d.pool.QueryRow(ctx, `SELECT to_regclass('connhost_schema_migrations') IS NOT NULL`).Scan(&existed); err != nil {
		return fmt.Errorf("pgledger: connect: %w", err)
	}
	if !existed {
		switch {
		case w != nil && d.opts.Init:
			if err := d.setAsideWitness(); err != nil {
				return err
			}
			w = nil
		case w != nil:
			d.wit = w
			return d.missing("it has no connhost tables; the tables were dropped, or this is another database")
		case d.opts.MustExist:
			return fmt.Errorf("pgledger: the database holds no connhost ledger: %w", ledger.ErrNoLedger)
		}
	}
	if err := d.migrate(ctx); err != nil {
		return err
	}
	return d.openWitness(ctx, w, existed)
}

// Role is the database role this DB connects as: the connection string's
// user, else $PGUSER, else the OS user's name, as libpq resolves it. It is
// who a decision made with the database's credentials alone is.
func (d *DB) Role() string { return d.pool.Config().ConnConfig.User }

// Close implements ledger.Ledger: it waits for operations in flight and
// closes the connections. Afterwards every method returns ErrClosed.
func (d *DB) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return ledger.ErrClosed
	}
	d.closed = true
	var err error
	if d.stopWitness != nil {
		close(d.stopWitness)
		<-d.witnessDone
		// The writes of the last interval: advance the position past them.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = d.advance(ctx)
		cancel()
		var de *ledger.DamageError
		if errors.As(err, &de) {
			err = nil // reported when it was found
		}
	}
	d.pool.Close()
	return err
}

// enter marks the start of an operation; the caller must call d.exit.
func (d *DB) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.closeMu.RLock()
	if d.closed {
		d.closeMu.RUnlock()
		return ledger.ErrClosed
	}
	if de := d.damage.Load(); de != nil {
		d.closeMu.RUnlock()
		return de
	}
	return nil
}

func (d *DB) exit() { d.closeMu.RUnlock() }

// leave is exit for an operation returning *err: a failure to reach the
// database is marked ledger.ErrUnavailable.
func (d *DB) leave(err *error) {
	d.exit()
	if *err == nil {
		return
	}
	var pgErr *pgconn.PgError
	if errors.As(*err, &pgErr) && pgErr.Code == "42P01" && !errors.As(*err, new(*ledger.DamageError)) {
		// undefined_table: the ledger's tables were dropped under this
		// process (or are being restored from a dump). That is damage,
		// as the witness would find within its interval: every later
		// operation is refused from now on.
		de := d.missing("its tables are gone (" + pgErr.Message + ")")
		d.fail(de)
		*err = de
		return
	}
	if unreachable(*err) && !errors.Is(*err, ledger.ErrUnavailable) {
		*err = fmt.Errorf("%w: %w", ledger.ErrUnavailable, *err)
	}
}

const (
	cacheShards    = 256
	shardCacheSize = 32
)

type cacheShard struct {
	mu sync.Mutex
	m  map[string]ledger.Record
}

func (d *DB) shard(id string) *cacheShard {
	return &d.recent[maphash.String(d.seed, id)%cacheShards]
}

// cached returns a copy of id's cached record.
func (d *DB) cached(id string) (ledger.Record, bool) {
	s := d.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.m[id]
	return clone(rec), ok
}

// remember caches rec as just committed, or forgets it when it is
// terminal (terminal records never change, so they are never written
// again).
func (d *DB) remember(rec ledger.Record) {
	s := d.shard(rec.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.State.Terminal() {
		delete(s.m, rec.ID)
		return
	}
	if s.m == nil || len(s.m) >= shardCacheSize {
		s.m = make(map[string]ledger.Record, shardCacheSize)
	}
	s.m[rec.ID] = clone(rec)
}

func (d *DB) forget(id string) {
	s := d.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// clone copies everything a caller could mutate through a record.
func clone(r ledger.Record) ledger.Record {
	r.Args = cloneBytes(r.Args)
	if r.Approval != nil {
		a := *r.Approval
		r.Approval = &a
	}
	if r.Outcome != nil {
		o := *r.Outcome
		o.Result = cloneBytes(o.Result)
		r.Outcome = &o
	}
	if r.Resolution != nil {
		res := *r.Resolution
		r.Resolution = &res
	}
	return r
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// querier is what reads run on: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
