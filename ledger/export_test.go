package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Exports for the conformance test (package ledger_test), which imports
// ledgertest and so cannot be part of this package.

// OpenOnFS opens a ledger on fs (an in-memory filesystem) with the clock
// now. Commits are synced, as in production, so that a crash clone of fs
// keeps exactly what the ledger acknowledged.
func OpenOnFS(fs vfs.FS, now func() time.Time) (*DB, error) {
	return Open(context.Background(), Options{Dir: "ledger", fs: fs, Logger: discardLogger(), Now: now})
}

// CheckStorage runs checkInvariants: the raw keyspaces, the write cache
// and the fence counts agree with the records.
func CheckStorage(t testing.TB, db *DB) { checkInvariants(t, db) }
