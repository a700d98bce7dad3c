package ledger

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestWriteTimes: a synced Create and Apply on disk say they waited for
// the log's fsync, and for how long; a lazy Apply says it did not; a write
// without WithWriteTimes is not told anything.
func TestWriteTimes(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, Options{Dir: filepath.Join(t.TempDir(), "ledger"), Logger: discardLogger(), MarkInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var created WriteTimes
	rec := dispatchedRecord("a")
	rec.Policy = PolicyIdempotentRetry
	if _, err := db.Create(WithWriteTimes(ctx, &created), rec, Event{}); err != nil {
		t.Fatal(err)
	}
	if !created.Synced || created.SyncWait <= 0 {
		t.Errorf("synced Create: %+v, want Synced with a wait", created)
	}
	lazy := WriteTimes{Synced: true, SyncWait: time.Hour}
	tr := succeed(1)
	tr.Lazy = true
	if _, err := db.Apply(WithWriteTimes(ctx, &lazy), "a", tr); err != nil {
		t.Fatal(err)
	}
	if lazy.Synced || lazy.SyncWait != time.Hour {
		t.Errorf("lazy Apply: %+v, want not synced (and the wait left as it was)", lazy)
	}
	if _, err := db.Create(ctx, dispatchedRecord("b"), Event{}); err != nil {
		t.Fatal(err)
	}
}
