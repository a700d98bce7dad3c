//go:build unix

package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// crashHelperEnv switches the test binary into the crash helper (see
// TestMain): its value is the ledger directory to write into.
const crashHelperEnv = "LEDGER_TEST_CRASH_HELPER"

// crashCalls is the number of executions the crash helper writes before
// its mark covers them; LEDGER_TEST_CRASH_CALLS overrides it.
const crashCallsEnv = "LEDGER_TEST_CRASH_CALLS"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		crashHelper(dir)
	}
	if dir := os.Getenv(lazyHelperEnv); dir != "" {
		lazyHelper(dir)
	}
	os.Exit(m.Run())
}

// crashHelper writes into the ledger in dir and then SIGKILLs its own
// process, leaving the directory as a crash does: every write synced, but
// only in the write-ahead log (no flush, no Close). It writes executions
// c0…c<n-1> (each created, then succeeded: two writes) and a call "f" of
// session "fenced" left recovery_required, brings the mark up to date,
// and then creates "tail", a write the mark does not cover.
func crashHelper(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		os.Exit(3)
	}
	n := 10
	if s := os.Getenv(crashCallsEnv); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil {
			fail(err)
		}
	}
	ctx := context.Background()
	db, err := Open(ctx, Options{Dir: dir, Logger: discardLogger(), MarkInterval: time.Hour})
	if err != nil {
		fail(err)
	}
	for i := range n {
		id := fmt.Sprint("c", i)
		if _, err := db.Create(ctx, dispatchedRecord(id), Event{}); err != nil {
			fail(err)
		}
		if _, err := db.Apply(ctx, id, succeed(1)); err != nil {
			fail(err)
		}
	}
	f := dispatchedRecord("f")
	f.SessionID = "fenced"
	if _, err := db.Create(ctx, f, Event{}); err != nil {
		fail(err)
	}
	if _, err := db.Apply(ctx, "f", Transition{From: StateDispatched, FromAttempt: 1, To: StateRecoveryRequired, Attempt: 1}); err != nil {
		fail(err)
	}
	if err := db.updateMark(); err != nil {
		fail(err)
	}
	if _, err := db.Create(ctx, dispatchedRecord("tail"), Event{}); err != nil {
		fail(err)
	}
	fmt.Println("ready")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func succeed(attempt int) Transition {
	return Transition{From: StateDispatched, FromAttempt: attempt, To: StateSucceeded, Attempt: attempt,
		Outcome: &Outcome{Kind: "ok", Source: "connector", Attempt: attempt, Receipt: "r"}}
}

// crashedLedger runs the crash helper (a real process, killed with
// SIGKILL) on a new directory and returns the directory.
func crashedLedger(t *testing.T, calls int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ledger")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir, fmt.Sprint(crashCallsEnv, "=", calls))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stdout %q stderr %q", stdout.String(), stderr.String())
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "helper ended with %v: %s", err, stderr.String())
	require.Equal(t, "ready\n", stdout.String())
	return dir
}

// copyLedger copies a ledger directory and its mark to a new place.
func copyLedger(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "ledger")
	require.NoError(t, os.CopyFS(to, os.DirFS(dir)))
	b, err := os.ReadFile(dir + MarkSuffix)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to+MarkSuffix, b, 0o644))
	return to
}

// newestWAL returns the path of the newest write-ahead log in dir and the
// offsets of its valid chunks, in order.
func newestWAL(t *testing.T, dir string) (string, []int64) {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	sort.Strings(logs)
	path := logs[len(logs)-1]
	var num uint32
	_, err = fmt.Sscanf(filepath.Base(path), "%06d.log", &num)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var chunks []int64
	for blk := 0; blk < len(b); blk += walBlockSize {
		block := b[blk:min(blk+walBlockSize, len(b))]
		for i := 0; i < len(block); {
			kind, next := walChunk(block, i, num)
			if kind != chunkValid {
				break
			}
			chunks = append(chunks, int64(blk+i))
			i = next
		}
	}
	require.NotEmpty(t, chunks)
	return path, chunks
}

func openOnDisk(dir string, mod ...func(*Options)) (*DB, error) {
	o := Options{Dir: dir, Logger: discardLogger(), MarkInterval: time.Hour}
	for _, f := range mod {
		f(&o)
	}
	return Open(context.Background(), o)
}

// snapshot returns the names and sizes of the files in dir and the mark's
// bytes, to show that a refused Open changed nothing.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		if info, err := e.Info(); err == nil && !e.IsDir() {
			fmt.Fprintf(&b, "%s %d\n", p, info.Size())
		}
		return nil
	})
	m, err := os.ReadFile(dir + MarkSuffix)
	fmt.Fprintf(&b, "mark %q %v\n", m, err)
	return b.String()
}

// requireIntact checks what the crash helper wrote before its mark: every
// execution succeeded, and the session "fenced" still fenced.
func requireIntact(t *testing.T, db *DB, calls int) {
	t.Helper()
	ctx := context.Background()
	for i := range calls {
		rec, err := db.Get(ctx, fmt.Sprint("c", i))
		require.NoError(t, err)
		require.Equal(t, StateSucceeded, rec.State)
	}
	fenced, err := db.Fenced(ctx, DefaultNamespace, "fenced")
	require.NoError(t, err)
	require.Len(t, fenced, 1)
	checkInvariants(t, db)
}

// TestCrashDamage is the damage table of the ledger: a ledger left by a
// real SIGKILL (its last writes only in the write-ahead log), then damaged
// as an operator, a disk or a script could while the process is stopped.
// A normal crash, a torn or zeroed tail after the mark, and a lost mark
// open; everything that would open short or empty is refused with a
// *DamageError that names what is missing, and the refusal writes nothing.
// It runs on a small log (one 32 KiB block, where Pebble's own replay
// cannot tell damage from a torn tail) and on a log of many blocks.
func TestCrashDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns crash helper processes")
	}
	for _, size := range []struct {
		name  string
		calls int
	}{{"one block", 5}, {"many blocks", 600}} {
		t.Run(size.name, func(t *testing.T) {
			crashed := crashedLedger(t, size.calls)
			path, chunks := newestWAL(t, crashed)
			require.Equal(t, size.calls > 5, chunks[len(chunks)-1] > walBlockSize, "log size as the case name says")
			other := crashedLedger(t, 1)

			cases := []struct {
				name   string
				damage func(t *testing.T, dir string)
				// want is the refusal's kind; "" opens.
				want DamageKind
				// tail: the write after the mark survives.
				tail bool
				// says: words the refusal must contain.
				says []string
				// preOpen: refused before the storage engine opened the
				// directory, which is then left exactly as it was.
				preOpen bool
			}{
				{name: "none", damage: func(*testing.T, string) {}, tail: true},
				{name: "torn tail after the mark", damage: func(t *testing.T, dir string) {
					wal, chunks := newestWAL(t, dir)
					require.NoError(t, os.Truncate(wal, chunks[len(chunks)-1]+10))
				}},
				{name: "zeroed tail after the mark", damage: func(t *testing.T, dir string) {
					wal, chunks := newestWAL(t, dir)
					zeroFrom(t, wal, chunks[len(chunks)-1])
				}},
				{name: "mark removed", damage: func(t *testing.T, dir string) {
					require.NoError(t, os.Remove(dir+MarkSuffix))
				}, tail: true},
				{name: "four bytes flipped in the middle of the log", damage: func(t *testing.T, dir string) {
					wal, chunks := newestWAL(t, dir)
					flip(t, wal, chunks[len(chunks)/2]+20, 4)
				}, want: DamageLog, says: []string{filepath.Base(path), "damaged at byte", "follow at byte"}, preOpen: true},
				{name: "log truncated in the middle", damage: func(t *testing.T, dir string) {
					wal, chunks := newestWAL(t, dir)
					require.NoError(t, os.Truncate(wal, chunks[len(chunks)/2]+20))
				}, want: DamageBehind, says: []string{"behind its mark", "missing"}},
				{name: "every log deleted", damage: func(t *testing.T, dir string) {
					logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
					require.NoError(t, err)
					for _, l := range logs {
						require.NoError(t, os.Remove(l))
					}
				}, want: DamageMissing, says: []string{"holds no data", "committed writes"}},
				{name: "directory deleted", damage: func(t *testing.T, dir string) {
					require.NoError(t, os.RemoveAll(dir))
				}, want: DamageMissing, says: []string{"is missing", "committed writes"}, preOpen: true},
				{name: "directory emptied", damage: func(t *testing.T, dir string) {
					es, err := os.ReadDir(dir)
					require.NoError(t, err)
					for _, e := range es {
						require.NoError(t, os.RemoveAll(filepath.Join(dir, e.Name())))
					}
				}, want: DamageMissing, says: []string{"is empty"}, preOpen: true},
				{name: "another ledger's directory", damage: func(t *testing.T, dir string) {
					require.NoError(t, os.RemoveAll(dir))
					require.NoError(t, os.CopyFS(dir, os.DirFS(other)))
				}, want: DamageIdentity, says: []string{"belongs to ledger", "replaced by another ledger's"}},
				{name: "mark unreadable", damage: func(t *testing.T, dir string) {
					require.NoError(t, os.WriteFile(dir+MarkSuffix, []byte(`{"identity":`), 0o644))
				}, want: DamageMark, says: []string{"unreadable"}, preOpen: true},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					dir := copyLedger(t, crashed)
					tc.damage(t, dir)
					before := snapshot(t, dir)
					db, err := openOnDisk(dir)
					if tc.want == "" {
						require.NoError(t, err)
						defer db.Close()
						requireIntact(t, db, size.calls)
						_, err := db.Get(context.Background(), "tail")
						if tc.tail {
							require.NoError(t, err)
						} else {
							require.ErrorIs(t, err, ErrNotFound)
						}
						return
					}
					require.Error(t, err)
					require.ErrorIs(t, err, ErrCorrupt)
					var de *DamageError
					require.ErrorAs(t, err, &de)
					require.Equal(t, tc.want, de.Kind, "%v", err)
					says := append(tc.says, dir, "init")
					if tc.want != DamageLog {
						says = append(says, dir+MarkSuffix)
					}
					for _, s := range says {
						require.Contains(t, err.Error(), s)
					}
					// No remedy uses a restored ledger as it is.
					require.NotContains(t, err.Error(), "to accept the backup")
					if tc.want != DamageMark && tc.want != DamageIdentity {
						require.Contains(t, err.Error(), "AcceptRestore")
					}
					// Refused again, the same way: nothing was adopted or
					// created.
					_, err2 := openOnDisk(dir)
					require.Equal(t, err.Error(), err2.Error())
					if tc.preOpen {
						require.Equal(t, before, snapshot(t, dir), "a refusal before the storage engine opens writes nothing")
					}
				})
			}
		})
	}
}

// flip inverts n bytes of the file at path from off.
func flip(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	for i := range b {
		b[i] ^= 0xff
	}
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// zeroFrom overwrites the file at path with zeroes from off to its end.
func zeroFrom(t *testing.T, path string, off int64) {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, st.Size()-off), off)
	require.NoError(t, err)
}

// TestCrashedLedgerReopens: after a real SIGKILL every synced write is
// there, the write after the mark's last update included, and the next
// mark covers it.
func TestCrashedLedgerReopens(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a crash helper process")
	}
	dir := crashedLedger(t, 3)
	before := readMarkFile(t, dir+MarkSuffix)
	db, err := openOnDisk(dir)
	require.NoError(t, err)
	requireIntact(t, db, 3)
	_, err = db.Get(context.Background(), "tail")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	after := readMarkFile(t, dir+MarkSuffix)
	require.Equal(t, before.Identity, after.Identity)
	// 3×2 writes, then f's two, then the tail the mark had not covered.
	require.Equal(t, uint64(8), before.HighWater)
	require.Equal(t, uint64(8), after.HighWater, "the tail's write was not counted before the crash; the count restarts from the stored one")
}

func readMarkFile(t *testing.T, path string) mark {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := decodeMark(bytes.TrimSpace(b))
	require.NoError(t, err)
	return m
}

// TestCloseFlushes: after a clean Close the data is in the table files,
// so deleting every write-ahead log afterwards loses nothing, and the
// mark records every write.
func TestCloseFlushes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ledger")
	db, err := openOnDisk(dir)
	require.NoError(t, err)
	for i := range 20 {
		id := fmt.Sprint("c", i)
		_, err := db.Create(ctx, dispatchedRecord(id), Event{})
		require.NoError(t, err)
		_, err = db.Apply(ctx, id, succeed(1))
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	m := readMarkFile(t, dir+MarkSuffix)
	require.Equal(t, uint64(40), m.HighWater)

	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	for _, l := range logs {
		require.NoError(t, os.Remove(l))
	}
	db, err = openOnDisk(dir)
	require.NoError(t, err)
	defer db.Close()
	for i := range 20 {
		rec, err := db.Get(ctx, fmt.Sprint("c", i))
		require.NoError(t, err)
		require.Equal(t, StateSucceeded, rec.State)
	}
	require.Equal(t, m.Identity, db.identity)
	require.Equal(t, uint64(40), db.writes.Load())
}

// TestInit: init replaces a missing or damaged ledger with a new, empty
// one and keeps the remains aside, creates one where there is none, and
// never replaces a healthy ledger.
func TestInit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a crash helper process")
	}
	ctx := context.Background()
	initOpt := func(o *Options) { o.Create = CreateInit }

	dir := crashedLedger(t, 2)
	wal, chunks := newestWAL(t, dir)
	require.NoError(t, os.Truncate(wal, chunks[len(chunks)/2]))
	old := readMarkFile(t, dir+MarkSuffix)
	_, err := openOnDisk(dir)
	require.ErrorIs(t, err, ErrCorrupt)

	db, err := openOnDisk(dir, initOpt)
	require.NoError(t, err)
	_, err = db.Get(ctx, "c0")
	require.ErrorIs(t, err, ErrNotFound, "a new, empty ledger")
	require.NotEqual(t, old.Identity, db.identity)
	require.NoError(t, db.Close())
	aside, err := filepath.Glob(dir + ".aside-*")
	require.NoError(t, err)
	require.Len(t, aside, 1, "the damaged directory is kept aside")
	marks, err := filepath.Glob(dir + MarkSuffix + ".aside-*")
	require.NoError(t, err)
	require.Len(t, marks, 1, "its mark too")
	require.Equal(t, old, readMarkFile(t, marks[0]))
	kept, err := openOnDisk(aside[0])
	require.NoError(t, err, "the remains open on their own (without their mark)")
	_, err = kept.Get(ctx, "c0")
	require.NoError(t, err)
	require.NoError(t, kept.Close())

	// The new ledger is healthy: init refuses to replace it.
	_, err = openOnDisk(dir, initOpt)
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "healthy ledger")
	db, err = openOnDisk(dir)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	// Where there is nothing, init creates.
	fresh := filepath.Join(t.TempDir(), "ledger")
	db, err = openOnDisk(fresh, initOpt)
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

// TestCreateNever: with CreateNever, a place without a ledger is refused
// and left as it was; an existing ledger opens.
func TestCreateNever(t *testing.T) {
	never := func(o *Options) { o.Create = CreateNever }
	dir := filepath.Join(t.TempDir(), "ledger")
	_, err := openOnDisk(dir, never)
	require.ErrorIs(t, err, ErrNoLedger)
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Stat(dir + MarkSuffix)
	require.ErrorIs(t, err, fs.ErrNotExist)

	db, err := openOnDisk(dir)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	db, err = openOnDisk(dir, never)
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

// TestAdoptLegacyLedger: a ledger written before marks (no identity, no
// high-water mark, no mark file) opens as it is and gets an identity and a
// mark.
func TestAdoptLegacyLedger(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ledger")
	db, err := openOnDisk(dir)
	require.NoError(t, err)
	_, err = db.Create(ctx, dispatchedRecord("a"), Event{})
	require.NoError(t, err)
	// Make it a ledger of the previous release.
	require.NoError(t, db.db.Delete(identityKey, nil))
	require.NoError(t, db.db.Delete(hwmKey, nil))
	require.NoError(t, db.Close())
	require.NoError(t, os.Remove(dir+MarkSuffix))

	var logs bytes.Buffer
	db, err = openOnDisk(dir, func(o *Options) { o.Logger = newTextLogger(&logs) })
	require.NoError(t, err)
	_, err = db.Get(ctx, "a")
	require.NoError(t, err)
	require.Contains(t, logs.String(), "adopted a ledger written before marks")
	id := db.identity
	require.True(t, validIdentity(id))
	checkInvariants(t, db)
	require.NoError(t, db.Close())
	m := readMarkFile(t, dir+MarkSuffix)
	require.Equal(t, id, m.Identity)

	// From now on it is checked like any other.
	require.NoError(t, os.RemoveAll(dir))
	_, err = openOnDisk(dir)
	var de *DamageError
	require.ErrorAs(t, err, &de)
	require.Equal(t, DamageMissing, de.Kind)
}

// TestMarkUpdatedInBackground: while the ledger is written to, the mark
// catches up without a Close.
func TestMarkUpdatedInBackground(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ledger")
	db, err := openOnDisk(dir, func(o *Options) { o.MarkInterval = time.Millisecond })
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Create(ctx, dispatchedRecord("a"), Event{})
	require.NoError(t, err)
	// A bound that keeps a broken updater from hanging the test, not a
	// timing assertion.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(dir + MarkSuffix)
		require.NoError(t, err)
		var m mark
		require.NoError(t, json.Unmarshal(b, &m))
		if m.HighWater == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "mark still at %d", m.HighWater)
		time.Sleep(time.Millisecond)
	}
	v, closer, err := db.db.Get(hwmKey)
	require.NoError(t, err)
	require.Equal(t, encodeHWM(1), v, "the directory holds the count before the mark says so")
	require.NoError(t, closer.Close())
}

// TestOptionsMarkPath: the mark is a sibling of the directory by default
// and may not live inside it.
func TestOptionsMarkPath(t *testing.T) {
	o := Options{Dir: "/data/ledger/"}
	o.EnsureDefaults()
	require.Equal(t, "/data/ledger.mark", o.MarkPath)
	o.MarkPath = "/data/ledger/x.mark"
	err := o.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "inside Options.Dir")
	_, err = Open(context.Background(), Options{Dir: t.TempDir(), Create: CreateMode(7)})
	require.ErrorIs(t, err, ErrInvalid)
	require.True(t, errors.Is(err, ErrInvalid))
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
