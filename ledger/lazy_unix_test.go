//go:build unix

package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lazyHelperEnv switches the test binary into the lazy-write helper (see
// TestMain): its value is the ledger directory to write into.
const lazyHelperEnv = "LEDGER_TEST_LAZY_HELPER"

// lazyHelper writes lazy and synced transitions into a ledger that loses
// unsynced writes (Options.loseUnsynced, no background sync), then
// SIGKILLs itself:
//
//	a, b: created, succeeded lazily, then c created → c's synced write makes both durable
//	f: created, succeeded lazily, then g created     → g's synced write makes f durable,
//	   then syncLazy                                   so the background sync does not sync
//	d, e: created; d succeeded lazily, then syncLazy → the background sync makes d durable
//	      (no synced write comes after it)
//	e: succeeded lazily, then the kill               → the outcome is lost
//
// It prints "ready" and the number of background syncs (1: d's).
func lazyHelper(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "lazy helper:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	db, err := Open(ctx, Options{Dir: dir, Logger: discardLogger(), MarkInterval: time.Hour,
		LazySyncInterval: time.Hour, loseUnsynced: true})
	if err != nil {
		fail(err)
	}
	create := func(id string) {
		rec := dispatchedRecord(id)
		rec.Policy = PolicyIdempotentRetry
		if _, err := db.Create(ctx, rec, Event{}); err != nil {
			fail(err)
		}
	}
	succeedLazily := func(id string) {
		t := succeed(1)
		t.Lazy = true
		if _, err := db.Apply(ctx, id, t); err != nil {
			fail(err)
		}
	}
	for _, id := range []string{"a", "b"} {
		create(id)
		succeedLazily(id)
	}
	create("c")
	create("f")
	succeedLazily("f")
	create("g")
	db.syncLazy(db.lazyWrites.Load())
	create("d")
	create("e")
	succeedLazily("d")
	db.syncLazy(db.lazyWrites.Load())
	succeedLazily("e")
	fmt.Println("ready", db.lazySyncs.Load())
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// A lazy transition is written without its own fsync: after a crash that
// loses unsynced writes it is gone, unless a synced write or the
// background sync came after it. Under loseUnsynced the loss is real: the
// helper process is SIGKILLed and the log holds only synced data.
func TestLazyTransitionsAfterAPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a helper process")
	}
	dir := filepath.Join(t.TempDir(), "ledger")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lazyHelperEnv+"="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "helper: %v %s", err, stderr.String())
	require.Equal(t, "ready 1\n", stdout.String(), "the background syncs: only d's; %s", stderr.String())

	ctx := context.Background()
	db, err := Open(ctx, Options{Dir: dir, Logger: discardLogger()})
	require.NoError(t, err)
	defer db.Close()
	for id, want := range map[string]State{
		"a": StateSucceeded, "b": StateSucceeded, "c": StateDispatched, "d": StateSucceeded,
		"f": StateSucceeded, "g": StateDispatched, "e": StateDispatched,
	} {
		rec, err := db.Get(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, want, rec.State, id)
	}
	checkInvariants(t, db)
}

// Without loseUnsynced a lazy transition survives the process (the kernel
// writes what the process wrote), and Close makes it durable.
func TestLazyTransitionSurvivesClose(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ledger")
	db, err := Open(ctx, Options{Dir: dir, Logger: discardLogger(), LazySyncInterval: time.Hour})
	require.NoError(t, err)
	createSucceededLazily(t, db, "a", PolicyReconcile)
	require.NoError(t, db.Close())
	db, err = Open(ctx, Options{Dir: dir, Logger: discardLogger()})
	require.NoError(t, err)
	defer db.Close()
	got, err := db.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateSucceeded, got.State)
}

// The background syncer makes a lazy write that no synced commit covers
// durable on its own, with one sync (it looks every half interval and
// syncs what was already there at its previous look).
func TestLazySyncerSyncsAnUncoveredWrite(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, Options{Dir: filepath.Join(t.TempDir(), "ledger"), Logger: discardLogger(), LazySyncInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer db.Close()
	createSucceededLazily(t, db, "a", PolicyIdempotentRetry)
	require.Eventually(t, func() bool { return db.lazyDurable.Load() == 1 }, 10*time.Second, time.Millisecond,
		"the syncer never made the lazy write durable")
	require.Equal(t, uint64(1), db.lazySyncs.Load())
}

// createSucceededLazily records a dispatched call id under policy and
// its success as a lazy transition.
func createSucceededLazily(t *testing.T, db *DB, id, policy string) {
	t.Helper()
	ctx := context.Background()
	rec := dispatchedRecord(id)
	rec.Policy = policy
	_, err := db.Create(ctx, rec, Event{})
	require.NoError(t, err)
	tr := succeed(1)
	tr.Lazy = true
	_, err = db.Apply(ctx, id, tr)
	require.NoError(t, err)
}
