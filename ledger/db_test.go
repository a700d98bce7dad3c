package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/internal/pebbleconf"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func dispatchedRecord(id string) Record {
	return Record{ID: id, Namespace: DefaultNamespace, SessionID: "s1", ToolCallID: "call-" + id,
		Connector: "payments", Operation: "create_payment", Effect: "external", Policy: "idempotent-retry",
		Args: []byte(`{"amount":100}`), ArgsDigest: "d-" + id, State: StateDispatched, Attempt: 1, MaxAttempts: 3}
}

func TestOptionsValidate(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	require.NotNil(t, o.Now)
	require.Equal(t, DefaultMaxRecordBytes, o.MaxRecordBytes)
	require.NotNil(t, o.Logger)
	o.MaxRecordBytes = -1
	err := o.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	// Every problem is reported at once.
	require.Contains(t, err.Error(), "Options.Dir")
	require.Contains(t, err.Error(), "Options.MaxRecordBytes")

	_, err = Open(context.Background(), Options{})
	require.ErrorIs(t, err, ErrInvalid)
}

// TestFailurePaths lists what each method refuses and with which error.
func TestFailurePaths(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(db *DB) error
		want error
	}{
		{"get unknown", func(db *DB) error { _, err := db.Get(ctx, "nope"); return err }, ErrNotFound},
		{"events unknown", func(db *DB) error { _, err := db.Events(ctx, "nope"); return err }, ErrNotFound},
		{"apply unknown", func(db *DB) error {
			_, err := db.Apply(ctx, "nope", Transition{From: StateDispatched, FromAttempt: 1, To: StateFailed, Attempt: 1})
			return err
		}, ErrNotFound},
		{"create empty id", func(db *DB) error {
			_, err := db.Create(ctx, Record{State: StateDispatched, Attempt: 1, MaxAttempts: 1}, Event{})
			return err
		}, ErrInvalid},
		{"create outcome", func(db *DB) error {
			r := dispatchedRecord("a")
			r.Outcome = &Outcome{Kind: "ok", Attempt: 1}
			_, err := db.Create(ctx, r, Event{})
			return err
		}, ErrIllegalTransition},
		{"create too large", func(db *DB) error {
			r := dispatchedRecord("a")
			r.Args = make([]byte, 2048)
			_, err := db.Create(ctx, r, Event{})
			return err
		}, ErrTooLarge},
		{"apply too large", func(db *DB) error {
			if _, err := db.Create(ctx, dispatchedRecord("a"), Event{}); err != nil {
				return err
			}
			_, err := db.Apply(ctx, "a", Transition{From: StateDispatched, FromAttempt: 1, To: StateSucceeded, Attempt: 1,
				Outcome: &Outcome{Kind: "ok", Attempt: 1, Result: make([]byte, 2048)}})
			return err
		}, ErrTooLarge},
		{"cancelled context", func(db *DB) error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			_, err := db.Create(c, dispatchedRecord("a"), Event{})
			return err
		}, context.Canceled},
		{"closed", func(db *DB) error {
			require.NoError(t, db.Close())
			_, err := db.Get(ctx, "a")
			return err
		}, ErrClosed},
		{"close twice", func(db *DB) error {
			require.NoError(t, db.Close())
			return db.Close()
		}, ErrClosed},
		{"bulk load existing", func(db *DB) error {
			if _, err := db.Create(ctx, dispatchedRecord("a"), Event{}); err != nil {
				return err
			}
			return db.BulkLoad(ctx, []Record{dispatchedRecord("a")})
		}, ErrExists},
		{"bulk load duplicate", func(db *DB) error {
			return db.BulkLoad(ctx, []Record{dispatchedRecord("a"), dispatchedRecord("b"), dispatchedRecord("a")})
		}, ErrInvalid},
		{"bulk load invalid", func(db *DB) error { return db.BulkLoad(ctx, []Record{{ID: "x", State: "bogus", MaxAttempts: 1}}) }, ErrInvalid},
		{"corrupt record", func(db *DB) error {
			require.NoError(t, db.db.Set(recordKey("bad"), []byte{9, '{', '}'}, pebble.Sync))
			_, err := db.Get(ctx, "bad")
			return err
		}, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := memOptions(vfs.NewMem(), newFakeClock())
			o.MaxRecordBytes = 1024
			db, err := Open(ctx, o)
			require.NoError(t, err)
			defer db.Close()
			require.ErrorIs(t, tc.run(db), tc.want)
		})
	}
}

// TestProtocolMarker: a new directory gets the marker; another version,
// an unreadable marker or data without a marker is refused, naming both
// versions.
func TestProtocolMarker(t *testing.T) {
	ctx := context.Background()
	// A later protocol, and an earlier one of development, which this
	// release neither reads nor upgrades.
	for _, other := range []int{ProtocolVersion + 2, ProtocolVersion - 1} {
		fs := vfs.NewMem()
		db, err := Open(ctx, memOptions(fs, nil))
		require.NoError(t, err)
		require.NoError(t, db.db.Set(protocolKey, fmt.Appendf(nil, `{"protocol":%d}`, other), pebble.Sync))
		require.NoError(t, db.Close())
		_, err = Open(ctx, memOptions(fs, nil))
		require.ErrorIs(t, err, ErrProtocol)
		require.Contains(t, err.Error(), fmt.Sprintf("written by protocol %d", other))
		require.Contains(t, err.Error(), fmt.Sprintf("this release speaks protocol %d", ProtocolVersion))
	}

	fs2 := vfs.NewMem()
	raw, err := pebble.Open("ledger", &pebble.Options{FS: fs2, Logger: pebbleconf.Logger{L: discardLogger()}})
	require.NoError(t, err)
	require.NoError(t, raw.Set([]byte("r/x"), []byte("?"), pebble.Sync))
	require.NoError(t, raw.Close())
	_, err = Open(ctx, memOptions(fs2, nil))
	require.ErrorIs(t, err, ErrProtocol)
	require.Contains(t, err.Error(), "without a protocol marker")
}

// TestReopenOnDisk is the crash-consistency check on a real directory:
// every acknowledged write is there after Close and Open, with synced
// commits (the production path).
func TestReopenOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ledger")
	db, err := Open(ctx, Options{Dir: dir, Logger: discardLogger()})
	require.NoError(t, err)
	_, err = db.Create(ctx, dispatchedRecord("a"), Event{})
	require.NoError(t, err)
	_, err = db.Create(ctx, dispatchedRecord("b"), Event{})
	require.NoError(t, err)
	_, err = db.Apply(ctx, "a", Transition{From: StateDispatched, FromAttempt: 1, To: StateSucceeded, Attempt: 1,
		Outcome: &Outcome{Kind: "ok", Source: "connector", Attempt: 1, Receipt: "pi_1"}})
	require.NoError(t, err)
	_, err = db.Apply(ctx, "b", Transition{From: StateDispatched, FromAttempt: 1, To: StateRecoveryRequired, Attempt: 1})
	require.NoError(t, err)
	n, err := db.DiskUsage()
	require.NoError(t, err)
	require.Positive(t, n)
	require.NoError(t, db.Close())

	db, err = Open(ctx, Options{Dir: dir, Logger: discardLogger()})
	require.NoError(t, err)
	defer db.Close()
	checkInvariants(t, db)
	a, err := db.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, StateSucceeded, a.State)
	require.Equal(t, "pi_1", a.Outcome.Receipt)
	require.Equal(t, []byte(`{"amount":100}`), a.Args)
	fenced, err := db.Fenced(ctx, DefaultNamespace, "s1")
	require.NoError(t, err)
	require.Len(t, fenced, 1)
	require.Equal(t, "b", fenced[0].ID)
	var pending []string
	require.NoError(t, db.Pending(ctx, func(r Record) error { pending = append(pending, r.ID); return nil }))
	require.Equal(t, []string{"b"}, pending)
	evs, err := db.Events(ctx, "a")
	require.NoError(t, err)
	require.Len(t, evs, 2)
}

// TestKeysDoNotCollide: ids and sessions containing the separators used by
// the key layout stay apart.
func TestKeysDoNotCollide(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, nil)
	mk := func(id, ns, session string) Record {
		r := dispatchedRecord(id)
		r.Namespace, r.SessionID = ns, session
		return r
	}
	recs := []Record{
		mk("a", "n", "s\x00x"), mk("a\x00", "n\x00s", "x"), mk("a/b", "n", "s"), mk("a/", "n", "s/"),
		mk("x\x00\x01y", "n", "s\x00\x01"), mk("x", "n", "s"),
	}
	for _, r := range recs {
		_, err := db.Create(ctx, r, Event{})
		require.NoError(t, err, r.ID)
		_, err = db.Apply(ctx, r.ID, Transition{From: StateDispatched, FromAttempt: 1, To: StateRecoveryRequired, Attempt: 1})
		require.NoError(t, err)
	}
	checkInvariants(t, db)
	for _, r := range recs {
		got, err := db.Fenced(ctx, r.Namespace, r.SessionID)
		require.NoError(t, err)
		var ids []string
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		require.Contains(t, ids, r.ID)
		for _, g := range got {
			require.Equal(t, r.Namespace, g.Namespace)
			require.Equal(t, r.SessionID, g.SessionID)
		}
		evs, err := db.Events(ctx, r.ID)
		require.NoError(t, err)
		require.Len(t, evs, 2, r.ID)
	}
	ok, err := db.SessionKnown(ctx, "n", "s\x00")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestRandomTransitionsKeepIndexes drives random (mostly illegal)
// transitions and prunes, checking after every step that the indexes agree
// with the records and that refused transitions wrote nothing.
func TestRandomTransitionsKeepIndexes(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	fs := vfs.NewMem()
	db, err := Open(ctx, memOptions(fs, clock))
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "c", "d", "e", "f"}
	sessions := []string{"s1", "s2"}
	applied := 0
	for step := 0; step < 3000; step++ {
		clock.Advance(time.Duration(rng.IntN(5)) * time.Second)
		id := ids[rng.IntN(len(ids))]
		switch op := rng.IntN(20); {
		case op < 4:
			r := dispatchedRecord(id)
			r.SessionID = sessions[rng.IntN(2)]
			r.State = []State{StateAwaitingApproval, StateDispatched, StateRecoveryRequired}[rng.IntN(3)]
			r.Attempt = map[State]int{StateAwaitingApproval: 0, StateDispatched: 1, StateRecoveryRequired: 1}[r.State]
			_, err := db.Create(ctx, r, Event{})
			if err != nil && !errors.Is(err, ErrExists) && !errors.Is(err, ErrPruned) {
				t.Fatal(err)
			}
		case op == 4:
			_, err := db.Prune(ctx, clock.Now().Add(-time.Minute))
			require.NoError(t, err)
		case op == 5:
			require.NoError(t, db.Close())
			db, err = Open(ctx, memOptions(fs, clock))
			require.NoError(t, err)
		default:
			cur, err := db.Get(ctx, id)
			if err != nil {
				continue
			}
			before := rawKeys(t, db)
			tr := Transition{From: cur.State, FromAttempt: cur.Attempt, To: allStates[rng.IntN(len(allStates))], Attempt: cur.Attempt + rng.IntN(3) - 1}
			if rng.IntN(8) == 0 {
				tr.FromAttempt++
			}
			if rng.IntN(2) == 0 {
				tr.Outcome = &Outcome{Kind: "ok", Attempt: tr.Attempt - rng.IntN(2)}
			}
			if rng.IntN(6) == 0 {
				tr.CancelRequested = true
			}
			if tr.From == StateRecoveryRequired && rng.IntN(2) == 0 {
				tr.Resolution = &Resolution{Applied: true, By: "op"}
			}
			got, err := db.Apply(ctx, id, tr)
			if err != nil {
				require.Equal(t, before, rawKeys(t, db), "refused transition %+v wrote something: %v", tr, err)
				continue
			}
			applied++
			require.Equal(t, tr.To, got.State)
			require.NoError(t, CheckTransition(cur, tr))
		}
		checkInvariants(t, db)
		if t.Failed() {
			t.Fatalf("step %d", step)
		}
	}
	require.Positive(t, applied)
	t.Logf("%d transitions applied", applied)
}

// TestConcurrentCreateSameID: 64 racing Creates of one id create it once;
// the others get ErrExists and the record that won.
func TestConcurrentCreateSameID(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, nil)
	const n = 64
	var wg sync.WaitGroup
	recs := make([]Record, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := dispatchedRecord("same")
			r.ArgsDigest = fmt.Sprint("digest-", i)
			recs[i], errs[i] = db.Create(ctx, r, Event{})
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two creates succeeded")
			winner = i
		}
	}
	require.NotEqual(t, -1, winner)
	for i, err := range errs {
		if i != winner {
			require.ErrorIs(t, err, ErrExists)
			require.Equal(t, recs[winner], recs[i])
		}
	}
	checkInvariants(t, db)
}

// TestConcurrentApplySameTransition: 64 racing identical transitions apply
// once; the others get ErrConflict (or ErrTerminal once the record is
// terminal, which is also a lost race).
func TestConcurrentApplySameTransition(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, nil)
	for _, to := range []State{StateRetryWait, StateSucceeded} {
		t.Run(string(to), func(t *testing.T) {
			id := "x-" + string(to)
			_, err := db.Create(ctx, dispatchedRecord(id), Event{})
			require.NoError(t, err)
			const n = 64
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = db.Apply(ctx, id, Transition{From: StateDispatched, FromAttempt: 1, To: to, Attempt: 1,
						Outcome: &Outcome{Kind: "k", Attempt: 1}})
				}()
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case to.Terminal():
					require.ErrorIs(t, err, ErrTerminal)
				default:
					require.ErrorIs(t, err, ErrConflict)
				}
			}
			require.Equal(t, 1, ok)
			evs, err := db.Events(ctx, id)
			require.NoError(t, err)
			require.Len(t, evs, 2)
			checkInvariants(t, db)
		})
	}
}

func TestBulkLoadAndList(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	db := openMem(t, clock)
	var recs []Record
	for i := 0; i < 20000; i++ {
		r := dispatchedRecord(fmt.Sprintf("h%06d", i))
		r.State, r.Outcome = StateSucceeded, &Outcome{Kind: "ok", Attempt: 1}
		recs = append(recs, r)
	}
	for i := 0; i < 10; i++ {
		recs = append(recs, dispatchedRecord(fmt.Sprintf("p%02d", i)))
	}
	require.NoError(t, db.BulkLoad(ctx, recs))
	checkInvariants(t, db)
	n := 0
	require.NoError(t, db.Pending(ctx, func(Record) error { n++; return nil }))
	require.Equal(t, 10, n)
	got, err := db.List(ctx, Filter{})
	require.NoError(t, err)
	require.Len(t, got, DefaultListLimit)
	got, err = db.List(ctx, Filter{State: StateDispatched, After: "h", Limit: 5})
	require.NoError(t, err)
	require.Len(t, got, 5)
	require.Equal(t, "p00", got[0].ID)
	clock.Advance(time.Hour)
	pruned, err := db.Prune(ctx, clock.Now())
	require.NoError(t, err)
	require.Equal(t, 20000, pruned)
	checkInvariants(t, db)
	got, err = db.List(ctx, Filter{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, got, 10)
}

func TestPendingStopsAtError(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, nil)
	for _, id := range []string{"a", "b", "c"} {
		_, err := db.Create(ctx, dispatchedRecord(id), Event{})
		require.NoError(t, err)
	}
	stop := errors.New("stop")
	var seen []string
	err := db.Pending(ctx, func(r Record) error {
		seen = append(seen, r.ID)
		if r.ID == "b" {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, []string{"a", "b"}, seen)
}

// TestEncodingVersions: the decoder reads RecordVersion and refuses others
// as corrupt, the JSON of development version 1 included; a record written
// by this release reads back.
func TestEncodingVersions(t *testing.T) {
	r := dispatchedRecord("a")
	r.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.UpdatedAt = r.CreatedAt
	b, err := encodeRecord(r)
	require.NoError(t, err)
	got, err := decodeRecord(b)
	require.NoError(t, err)
	r.Version = RecordVersion
	require.Equal(t, r, got)
	for _, v := range []byte{0, 1, RecordVersion + 1, 0x7f} {
		bad := append([]byte{v}, b[1:]...)
		_, err := decodeRecord(bad)
		require.ErrorIs(t, err, ErrCorrupt, "version %d", v)
	}
	js, _ := json.Marshal(r)
	_, err = decodeRecord(append([]byte{1}, js...))
	require.ErrorIs(t, err, ErrCorrupt, "a JSON record")
	ejs, _ := json.Marshal(Event{Seq: 1, ExecutionID: "a"})
	_, err = decodeEvent(append([]byte{1}, ejs...))
	require.ErrorIs(t, err, ErrCorrupt, "a JSON event")
}

// TestWriteReturnsWhatGetReads: the record Create and Apply return equals
// the one a later Get decodes, whatever zone and clock reading the caller's
// times carry.
func TestWriteReturnsWhatGetReads(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, nil) // time.Now: local zone, monotonic reading
	r := dispatchedRecord("a")
	zone := time.FixedZone("X", 3600)
	r.CreatedAt = time.Now().In(zone)
	r.Deadline = time.Now().Add(time.Minute)
	r.Approval = &Approval{ID: "ap", RequestedAt: time.Now().In(zone), Decision: ApprovalApproved}
	created, err := db.Create(ctx, r, Event{})
	require.NoError(t, err)
	got, err := db.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, created, got)
	applied, err := db.Apply(ctx, "a", Transition{From: StateDispatched, FromAttempt: 1, To: StateRecoveryRequired, Attempt: 1,
		NextAttemptAt: time.Now().In(zone)})
	require.NoError(t, err)
	applied2, err := db.Apply(ctx, "a", Transition{From: StateRecoveryRequired, FromAttempt: 1, To: StateAbandoned, Attempt: 1,
		Resolution: &Resolution{By: "op", At: time.Now().In(zone)}})
	require.NoError(t, err)
	got, err = db.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, applied2, got)
	require.True(t, applied.NextAttemptAt.Equal(got.NextAttemptAt))
}

// TestReturnedRecordIsACopy: mutating a returned record changes nothing in
// the ledger (records are values; the write path caches recent records).
func TestReturnedRecordIsACopy(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, nil)
	r := dispatchedRecord("a")
	r.Approval = &Approval{ID: "ap", Decision: ApprovalApproved}
	created, err := db.Create(ctx, r, Event{})
	require.NoError(t, err)
	created.Args[0] = 'X'
	created.Approval.Decision = ApprovalRejected
	r.Args[1] = 'Y'
	applied, err := db.Apply(ctx, "a", Transition{From: StateDispatched, FromAttempt: 1, To: StateRetryWait, Attempt: 1,
		Outcome: &Outcome{Kind: "timeout", Attempt: 1, Result: []byte("r")}})
	require.NoError(t, err)
	require.Equal(t, []byte(`{"amount":100}`), applied.Args)
	require.Equal(t, ApprovalApproved, applied.Approval.Decision)
	applied.Outcome.Result[0] = 'Z'
	applied.Outcome.Kind = "mutated"
	next, err := db.Apply(ctx, "a", Transition{From: StateRetryWait, FromAttempt: 1, To: StateDispatched, Attempt: 2})
	require.NoError(t, err)
	require.Equal(t, "timeout", next.Outcome.Kind)
	require.Equal(t, []byte("r"), next.Outcome.Result)
	got, err := db.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, next, got)
}

// TestBlockCacheSurvivesMemtables: Pebble reserves each memtable's size in
// the block cache, so a cache sized without them is taken whole once the
// memtables reach full size, and every read goes to the files (Create's
// existence check then cost 15 µs instead of 3). After the memtables have
// grown to full size, a repeated read must still be served by the cache.
func TestBlockCacheSurvivesMemtables(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, Options{Dir: t.TempDir(), Logger: discardLogger(), CacheBytes: 1 << 20})
	require.NoError(t, err)
	defer db.Close()
	rec := dispatchedRecord("cached")
	_, err = db.Create(ctx, rec, Event{})
	require.NoError(t, err)
	// Fill memtables until they reach full size (each one that fills up
	// doubles the next one's size, up to the maximum): ~100 MiB, unsynced.
	filler := bytes.Repeat([]byte{'x'}, 256<<10)
	for i := range 400 {
		require.NoError(t, db.db.Set(fmt.Appendf(nil, "x/%d", i), filler, pebble.NoSync))
	}
	_, err = getRecord(db.db, "cached") // loads the blocks
	require.NoError(t, err)
	// A background flush or compaction that moves the record makes the
	// next read miss, so only a quiet window is measured: none ran or was
	// running at either end of it. Without room in the cache every one of
	// the reads misses. The filler's flushes can outlast many windows under
	// the race detector, so quiet is waited for by time, not by count.
	busy := func(m *pebble.Metrics) bool {
		return m.Flush.NumInProgress+m.Compact.NumInProgress > 0
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		m := db.db.Metrics()
		before, moves, wasBusy := m.BlockCache, m.Flush.Count+m.Compact.Count, busy(m)
		for range 100 {
			_, err = getRecord(db.db, "cached")
			require.NoError(t, err)
		}
		m = db.db.Metrics()
		if (wasBusy || busy(m) || m.Flush.Count+m.Compact.Count != moves) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		after := m.BlockCache
		require.Less(t, after.Misses-before.Misses, int64(20), "repeated reads of a record missed the block cache")
		require.GreaterOrEqual(t, after.Hits-before.Hits, int64(100), "repeated reads of a record were not served by the block cache")
		return
	}
}

// BulkLoad keeps a session's classification: a session whose first record
// was a resumed call with no record stays legacy, whatever is loaded into
// it later, and a new session loaded in bulk is known.
func TestBulkLoadKeepsSessionClassification(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, nil)
	first := dispatchedRecord("resumed")
	first.State, first.Attempt, first.Resumed = StateRecoveryRequired, 0, true
	_, err := db.Create(ctx, first, Event{})
	require.NoError(t, err)
	later := dispatchedRecord("later")
	later.State = StateSucceeded
	fresh := dispatchedRecord("fresh")
	fresh.SessionID, fresh.State = "s2", StateSucceeded
	require.NoError(t, db.BulkLoad(ctx, []Record{later, fresh}))
	known, err := db.SessionKnown(ctx, DefaultNamespace, "s1")
	require.NoError(t, err)
	require.False(t, known, "a bulk load reclassified a legacy session as known")
	known, err = db.SessionKnown(ctx, DefaultNamespace, "s2")
	require.NoError(t, err)
	require.True(t, known)
	checkInvariants(t, db)
}

// OrderNewest lists the most recently created records first, and a
// listing paged with After neither skips nor repeats a record, even while
// records are created, change state and are pruned between its pages.
func TestListNewest(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	db := openMem(t, clock)
	create := func(id, session string) {
		t.Helper()
		r := dispatchedRecord(id)
		r.SessionID = session
		_, err := db.Create(ctx, r, Event{Decision: "dispatch"})
		require.NoError(t, err)
		clock.Advance(time.Second)
	}
	// Ids in the opposite order of time, so id order and time order differ.
	for i := 9; i >= 0; i-- {
		create(fmt.Sprintf("x%d", i), fmt.Sprintf("s%d", i%2))
	}
	ids := func(recs []Record) []string {
		out := make([]string, len(recs))
		for i, r := range recs {
			out[i] = r.ID
		}
		return out
	}
	got, err := db.List(ctx, Filter{Order: OrderNewest})
	require.NoError(t, err)
	require.Equal(t, []string{"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"}, ids(got))
	byID, err := db.List(ctx, Filter{})
	require.NoError(t, err)
	require.Equal(t, "x0", byID[0].ID, "OrderID is still the default")

	// Page by 3 while the ledger changes under the listing.
	var seen []string
	after := ""
	for page := 0; ; page++ {
		got, err := db.List(ctx, Filter{Order: OrderNewest, After: after, Limit: 3})
		require.NoError(t, err)
		seen = append(seen, ids(got)...)
		if len(got) < 3 {
			break
		}
		after = got[len(got)-1].ID
		switch page {
		case 0:
			create("new", "s0") // newer than the listing: not on its pages
		case 1:
			// A listed record and an unlisted one change state.
			for _, id := range []string{"x1", "x7"} {
				_, err := db.Apply(ctx, id, Transition{From: StateDispatched, FromAttempt: 1, To: StateSucceeded, Attempt: 1,
					Outcome: &Outcome{Kind: "ok", Source: "connector", Attempt: 1}})
				require.NoError(t, err)
			}
		}
	}
	require.Equal(t, []string{"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"}, seen)

	got, err = db.List(ctx, Filter{Order: OrderNewest, SessionID: "s1", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"x1", "x3"}, ids(got))
	got, err = db.List(ctx, Filter{Order: OrderNewest, State: StateSucceeded})
	require.NoError(t, err)
	require.Equal(t, []string{"x1", "x7"}, ids(got))

	// Pruned records leave the index with their record.
	clock.Advance(time.Hour)
	n, err := db.Prune(ctx, clock.Now())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	checkInvariants(t, db)
	got, err = db.List(ctx, Filter{Order: OrderNewest, Limit: 4})
	require.NoError(t, err)
	require.Equal(t, []string{"new", "x0", "x2", "x3"}, ids(got))
	_, err = db.List(ctx, Filter{Order: OrderNewest, After: "x1"})
	require.ErrorIs(t, err, ErrPruned)
	_, err = db.List(ctx, Filter{Order: OrderNewest, After: "nope"})
	require.ErrorIs(t, err, ErrNotFound)
	_, err = db.List(ctx, Filter{Order: 7})
	require.ErrorIs(t, err, ErrInvalid)
}
