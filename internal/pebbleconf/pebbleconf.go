// Package pebbleconf is the Pebble configuration of the ledger, in one
// place for the two programs that open Pebble: the ledger itself and the
// raw baseline the ledger's write path is benchmarked against
// (devkit/bench), so that both measure the same engine configured the
// same way.
package pebbleconf

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	dto "github.com/prometheus/client_model/go"
)

// Options returns the Pebble configuration of a ledger: a block cache of
// cacheBytes plus room for the memtables, 32 MiB memtables, bloom filters,
// logging to logger. fs, when not nil, replaces the OS filesystem (tests).
// The caller owns the returned options' cache reference (Unref it once the
// database is open).
func Options(cacheBytes int64, logger *slog.Logger, fs vfs.FS) *pebble.Options {
	// Pebble accounts its memtables against the block cache (it reserves
	// each one's size there), so a cache of cacheBytes alone would be
	// entirely taken by memtables once they reach full size, and every
	// read - Create's existence check included - would go to the files.
	// The cache is sized for the memtables it must hold (the active one,
	// those being flushed and the one kept for reuse) plus cacheBytes.
	// The memtables are larger than Pebble's 4 MiB default: each execution
	// writes a few KiB, and fewer flushes mean less background work
	// competing with the commit path.
	const memTableSize, memTableStop = 32 << 20, 2
	popts := &pebble.Options{
		Logger:                      Logger{logger},
		FormatMajorVersion:          pebble.FormatNewest,
		Cache:                       pebble.NewCache(cacheBytes + (memTableStop+1)*memTableSize),
		MemTableSize:                memTableSize,
		MemTableStopWritesThreshold: memTableStop,
	}
	// Bloom filters on every level: Create's existence check is a Get of
	// an id that is almost always absent, which without a filter reads an
	// index block of every overlapping table.
	popts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	if fs != nil {
		popts.FS = fs
	}
	return popts
}

// Logger adapts slog to Pebble's logger: informational messages at debug
// level, errors at error level.
type Logger struct{ L *slog.Logger }

// Infof implements pebble.Logger.
func (p Logger) Infof(format string, args ...any) {
	p.L.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

// Errorf implements pebble.Logger.
func (p Logger) Errorf(format string, args ...any) {
	p.L.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf logs and exits like Pebble's default logger: Pebble calls it only
// for invariant violations it cannot continue from.
func (p Logger) Fatalf(format string, args ...any) {
	p.L.Error(fmt.Sprintf(format, args...), "component", "pebble", "fatal", true)
	os.Exit(1)
}

// WALSyncs returns the number of write-ahead log fsyncs since the database
// opened: Pebble observes each one in its fsync latency histogram, whose
// sample count this is. Divided into the commits that asked for a sync, it
// says how many of them each fsync made durable.
func WALSyncs(m *pebble.Metrics) uint64 {
	h := m.LogWriter.FsyncLatency
	if h == nil {
		return 0
	}
	var out dto.Metric
	if err := h.Write(&out); err != nil {
		return 0
	}
	return out.GetHistogram().GetSampleCount()
}
