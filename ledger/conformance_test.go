package ledger_test

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/ledgertest"
)

// TestConformance runs the backend conformance suite against the Pebble
// ledger, on an in-memory filesystem whose crash clones keep only what was
// synced, with the raw keyspaces checked after every scenario step.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, ledgertest.Backend{
		New: func(testing.TB) ledgertest.Store { return &pebbleStore{fs: vfs.NewCrashableMem()} },
		Check: func(t testing.TB, l ledger.Ledger) {
			t.Helper()
			ledger.CheckStorage(t, l.(*ledger.DB))
		},
	})
}

type pebbleStore struct{ fs *vfs.MemFS }

func (s *pebbleStore) Open(t testing.TB, now func() time.Time) ledger.Ledger {
	t.Helper()
	db, err := ledger.OpenOnFS(s.fs, now)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return db
}

// Crash keeps what was synced when it is called; the abandoned ledger is
// closed afterwards, on the old filesystem, only to stop its goroutines.
func (s *pebbleStore) Crash(_ testing.TB, l ledger.Ledger) {
	s.fs = s.fs.CrashClone(vfs.CrashCloneCfg{})
	_ = l.Close()
}
