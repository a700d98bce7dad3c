package ledger

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ProtocolVersion is the version of the ledger's on-disk protocol (key
// layout, marker and value encodings) written by this release: 3 since
// records carry the Uncertain field, 2 since values are binary (1 stored
// JSON). Open upgrades a protocol-1 or -2 directory, whose values it reads,
// and refuses any other version with ErrProtocol.
const ProtocolVersion = 3

// DefaultMaxRecordBytes is the default value of Options.MaxRecordBytes.
const DefaultMaxRecordBytes = 4 << 20

// DefaultCacheBytes is the default value of Options.CacheBytes.
const DefaultCacheBytes = 64 << 20

// Options configures Open. The zero value of every field except Dir is
// replaced by its default in EnsureDefaults.
//
// There is deliberately no option to turn off fsync: every Create, Apply
// and Prune commits with a synced write. Only BulkLoad (setup and
// benchmarks) writes unsynced, and it flushes before it returns.
type Options struct {
	// Dir is the data directory; it is created if missing. It is required.
	Dir string
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

	// fs and noSync are for this package's tests only: an in-memory
	// filesystem, and unsynced commits on it.
	fs     vfs.FS
	noSync bool
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
	return errors.Join(errs...)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
