package ledger

import (
	"context"
	"sync/atomic"
	"time"
)

// WriteTimes is what one write of the Pebble ledger tells about its
// commit, for a caller that traces it (the executor opens a span for the
// fsync a synced write waited for). Create, Apply and ApplyFrom fill the
// WriteTimes of a context made by WithWriteTimes; other writes and other
// ledgers leave it as it is.
type WriteTimes struct {
	// Synced is set when the write waited for the log's fsync (a lazy
	// write does not).
	Synced bool
	// SyncWait is how long the commit waited for its fsync (Pebble's
	// commit wait: publishing the write, which is short, and the sync).
	SyncWait time.Duration
}

type writeTimesKey struct{}

// writeTimesUsed is set by the first WithWriteTimes: until then a write
// does not look in its context at all (a look-up through a context made
// by context.WithoutCancel, as the executor's writes are, allocates).
var writeTimesUsed atomic.Bool

// WithWriteTimes returns ctx carrying wt, which the ledger's write made
// with it fills.
func WithWriteTimes(ctx context.Context, wt *WriteTimes) context.Context {
	writeTimesUsed.Store(true)
	return context.WithValue(ctx, writeTimesKey{}, wt)
}

// writeTimesFrom returns the WriteTimes ctx carries, or nil.
func writeTimesFrom(ctx context.Context) *WriteTimes {
	if !writeTimesUsed.Load() {
		return nil
	}
	wt, _ := ctx.Value(writeTimesKey{}).(*WriteTimes)
	return wt
}
