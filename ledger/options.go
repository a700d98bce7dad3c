package ledger

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/connhost/connhost/ledger/internal/witness"
)

// ProtocolVersion is the version of the ledger's on-disk protocol (key
// layout, marker and value encodings) written by this release. Open
// refuses a directory that carries any other marker with ErrProtocol,
// naming both versions. It starts at 5: the development protocols before
// it were never released and are not read.
const ProtocolVersion = 5

// DefaultMaxRecordBytes is the default value of Options.MaxRecordBytes.
const DefaultMaxRecordBytes = 4 << 20

// DefaultLazySyncInterval is the default value of Options.LazySyncInterval.
const DefaultLazySyncInterval = 20 * time.Millisecond

// DefaultCacheBytes is the default value of Options.CacheBytes.
const DefaultCacheBytes = 64 << 20

// DefaultMarkInterval is the default value of Options.MarkInterval.
const DefaultMarkInterval = time.Second

// MarkSuffix is appended to Options.Dir to name the mark file by default.
const MarkSuffix = ".mark"

// WitnessSuffix is appended to a data directory to name its witness file
// by default (host.Options.WitnessPath, the connhost CLI).
const WitnessSuffix = ".witness"

// DefaultWitnessSessions is the default value of Options.WitnessSessions.
const DefaultWitnessSessions = witness.DefaultSessions

// CreateMode says when Open may create a new, empty ledger (see
// Options.Create).
type CreateMode int

const (
	// CreateIfNew creates a ledger where there has never been one: neither
	// the directory nor its mark exists (a first run). A ledger that is
	// missing or damaged is refused with a *DamageError.
	CreateIfNew CreateMode = iota
	// CreateNever refuses to create a ledger: where there is none, Open
	// fails with ErrNoLedger.
	CreateNever
	// CreateInit starts a new, empty ledger in place of a missing or
	// damaged one: the remains (the directory and its mark, whichever
	// exist) are renamed aside with the suffix ".aside-<UTC time>", never
	// deleted. Where there is no ledger it creates one, as CreateIfNew
	// does. A healthy ledger is never replaced: Open refuses it with
	// ErrInvalid, so that init cannot be left on by mistake.
	CreateInit
)

// Options configures Open. The zero value of every field except Dir is
// replaced by its default in EnsureDefaults.
//
// There is deliberately no option to turn off fsync: every Create, Apply
// and Prune commits with a synced write. Only BulkLoad (setup and
// benchmarks) writes unsynced, and it flushes before it returns.
type Options struct {
	// Dir is the data directory; it is created on a first run (see
	// Create). It is required.
	Dir string
	// MarkPath is the ledger's mark file: a small file outside Dir that
	// holds the ledger's identity and the number of writes it is known to
	// have committed, so that Open can tell a ledger that lost data, or
	// was replaced or deleted, from a new one (see RATIONALE.md, "Why does a
	// ledger have a mark outside its directory?"). It must not lie inside
	// Dir.
	// The default value is Dir + MarkSuffix (a sibling file, "ledger.mark"
	// beside "ledger").
	MarkPath string
	// MarkInterval is how often the mark is brought up to date while the
	// ledger is written to (never on the commit path; Close writes it
	// too). Writes committed after the mark's last update are not covered
	// by its check.
	// The default value is DefaultMarkInterval (1s).
	MarkInterval time.Duration
	// WitnessPath is the ledger's witness: a file that holds what this
	// deployment has acknowledged of the ledger (its identity, the number
	// of writes it is known to hold, the sessions written recently), kept
	// where a restore of the ledger does not reach. The mark guards the
	// directory against losing part of itself; the witness guards it
	// against being replaced whole: an older copy of the directory and its
	// mark, restored together, is behind the witness, and a deleted one is
	// missing. Open refuses both (*DamageError), and AcceptRestore accepts
	// a restore deliberately, fencing what the backup does not know. The
	// witness is brought up to date with the mark (every MarkInterval
	// while the ledger is written to, and at Close). It must lie outside
	// Dir; put it on another volume than the one backups restore.
	// The default value is "": no witness (host.Open and the connhost
	// commands give one beside the data directory, see WitnessSuffix).
	// See RATIONALE.md, "Why a witness, a second mark where a restore does
	// not reach?".
	WitnessPath string
	// WitnessSessions is how many of the most recently written sessions
	// the witness names, so that AcceptRestore can fence every session
	// written after the backup. A restore older than the oldest of them
	// cannot be told which sessions it forgot (see AcceptRestore).
	// The default value is DefaultWitnessSessions (4096).
	WitnessSessions int
	// Create says when Open may create a new, empty ledger.
	// The default value is CreateIfNew.
	Create CreateMode
	// Now returns the current time; the ledger stamps UpdatedAt, event
	// times and the retention index with it. Tests use a fake clock.
	// The default value is time.Now.
	Now func() time.Time
	// MaxRecordBytes caps the size of one encoded record (arguments,
	// result and metadata together); larger writes fail with ErrTooLarge.
	// The default value is DefaultMaxRecordBytes (4 MiB).
	MaxRecordBytes int
	// CacheBytes is the size of the block cache that keeps recently read
	// parts of the on-disk tables in memory (Create's existence check, Get,
	// recovery's Pending scan). The memtables (up to 3 × 32 MiB) come on
	// top of it.
	// The default value is DefaultCacheBytes (64 MiB).
	CacheBytes int64
	// Logger receives the storage engine's messages (informational
	// messages at debug level, errors at error level).
	// The default value is slog.Default().
	Logger *slog.Logger
	// LazySyncInterval bounds how long a lazy transition (Transition.Lazy)
	// stays written but not synced: a background sync runs that often while
	// lazy writes wait (any synced write makes them durable earlier).
	// The default value is DefaultLazySyncInterval (20ms).
	LazySyncInterval time.Duration
	// loseUnsynced holds the write-ahead log in memory until synced
	// (lossyFS), for crash tests: set by Open from a context marked by
	// crash.WithLoseUnsynced, or by this package's tests.
	loseUnsynced bool

	// fs and noSync are for this package's tests only: an in-memory
	// filesystem, and unsynced commits on it.
	fs     vfs.FS
	noSync bool
	// accepting is set by AcceptRestore: a ledger behind its mark or its
	// witness opens, and what it is behind is recorded instead.
	accepting bool
	// replaced is set by RestoreBackup with accepting: a backup was put
	// in place of the ledger, so it is behind what it replaced even where
	// the mark and the witness had not caught up with the last writes.
	replaced bool
}

// EnsureDefaults fills every zero field that has a default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MarkPath == "" && o.Dir != "" {
		o.MarkPath = filepath.Clean(o.Dir) + MarkSuffix
	}
	if o.MarkInterval == 0 {
		o.MarkInterval = DefaultMarkInterval
	}
	if o.LazySyncInterval == 0 {
		o.LazySyncInterval = DefaultLazySyncInterval
	}
	if o.WitnessSessions == 0 {
		o.WitnessSessions = DefaultWitnessSessions
	}
	return o
}

// Validate reports every problem with o at once (joined, each wrapping
// ErrInvalid). Call it after EnsureDefaults.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, fmt.Errorf("%w: Options.Dir is required", ErrInvalid))
	}
	if o.MaxRecordBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: Options.MaxRecordBytes = %d, must be > 0", ErrInvalid, o.MaxRecordBytes))
	}
	if o.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: Options.CacheBytes = %d, must be > 0", ErrInvalid, o.CacheBytes))
	}
	if o.LazySyncInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: Options.LazySyncInterval = %s, must be > 0", ErrInvalid, o.LazySyncInterval))
	}
	if o.MarkInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: Options.MarkInterval = %s, must be > 0", ErrInvalid, o.MarkInterval))
	}
	if o.WitnessSessions < 0 || o.WitnessSessions > witness.MaxSessions {
		errs = append(errs, fmt.Errorf("%w: Options.WitnessSessions = %d, must be between 1 and %d", ErrInvalid, o.WitnessSessions, witness.MaxSessions))
	}
	if o.Create < CreateIfNew || o.Create > CreateInit {
		errs = append(errs, fmt.Errorf("%w: Options.Create = %d is not a CreateMode", ErrInvalid, o.Create))
	}
	if o.Dir != "" && o.MarkPath != "" {
		dir, mark := absPath(o.Dir), absPath(o.MarkPath)
		if mark == dir || strings.HasPrefix(mark, dir+string(filepath.Separator)) {
			errs = append(errs, fmt.Errorf("%w: Options.MarkPath %s lies inside Options.Dir %s: the mark must survive the loss of the directory", ErrInvalid, o.MarkPath, o.Dir))
		}
	}
	if o.Dir != "" && o.WitnessPath != "" {
		dir, w := absPath(o.Dir), absPath(o.WitnessPath)
		switch {
		case w == dir || strings.HasPrefix(w, dir+string(filepath.Separator)):
			errs = append(errs, fmt.Errorf("%w: Options.WitnessPath %s lies inside Options.Dir %s: the witness must survive the loss of the directory", ErrInvalid, o.WitnessPath, o.Dir))
		case o.MarkPath != "" && w == absPath(o.MarkPath):
			errs = append(errs, fmt.Errorf("%w: Options.WitnessPath %s is the mark's path", ErrInvalid, o.WitnessPath))
		}
	}
	return errors.Join(errs...)
}

// absPath is path made absolute where possible, else cleaned.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return filepath.Clean(path)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
