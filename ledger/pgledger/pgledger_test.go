package pgledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/ledgertest"
	"github.com/connhost/connhost/ledger/pgledger"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.StopSharedPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

var quiet = slog.New(slog.DiscardHandler)

var apps atomic.Int64

// pgStore is one fresh database on the test binary's cluster.
type pgStore struct {
	t   testing.TB
	dsn string
	app string // the application_name of its ledgers' connections
}

// dsns maps each open ledger to its database, for checkStorage.
var dsns sync.Map

func newStore(t testing.TB) *pgStore {
	return &pgStore{t: t, dsn: testenv.NewPostgresDatabase(t), app: fmt.Sprint("connhost-test-", apps.Add(1))}
}

func (s *pgStore) Open(t testing.TB, now func() time.Time) ledger.Ledger {
	t.Helper()
	db, err := pgledger.Open(context.Background(), pgledger.Options{DSN: s.dsn, Now: now, ApplicationName: s.app, Logger: quiet})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	dsns.Store(db, s.dsn)
	return db
}

// Crash ends the ledger's sessions from the server's side
// (pg_terminate_backend), as the death of its process would: what they
// committed stays, anything in flight is rolled back. The abandoned ledger
// is closed afterwards only to release its pool.
func (s *pgStore) Crash(t testing.TB, l ledger.Ledger) {
	t.Helper()
	err := testenv.SharedPostgres(t).Exec(context.Background(),
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, s.app)
	require.NoError(t, err)
	_ = l.Close()
}

// TestConformance runs the backend conformance suite against PostgreSQL,
// with the tables checked after every scenario step.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, ledgertest.Backend{
		New:   func(t testing.TB) ledgertest.Store { return newStore(t) },
		Check: checkStorage,
	})
}

// checkStorage checks the tables against each other: every live row's
// record decodes to the row's own key columns, state, attempt and version;
// terminal_ns is set exactly for terminal rows, at the record's UpdatedAt;
// exactly the rows that are not terminal have a pending row, with their
// namespace, session and state, and due_ns the record's due time
// (ledger.DueAt), NULL when it has none; the trail holds events 1..events
// of the execution; a pruned row keeps no record and no events; every
// execution's session is classified; no pending row outlives its
// execution's pending state.
func checkStorage(t testing.TB, l ledger.Ledger) {
	t.Helper()
	dsn, ok := dsns.Load(l)
	require.True(t, ok, "ledger not opened by a pgStore")
	checkTables(t, dsn.(string))
}

// checkTables is checkStorage on the database dsn.
func checkTables(t testing.TB, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT x.id, x.namespace, x.session_id, x.tool_call_id, x.args_digest, x.state, x.attempt,
  x.events, x.terminal_ns, x.pruned_ns, x.record, x.trail,
  p.id IS NOT NULL, p.namespace, p.session_id, p.state, p.due_ns,
  EXISTS (SELECT 1 FROM connhost_sessions s WHERE s.namespace = x.namespace AND s.session_id = x.session_id)
FROM connhost_executions x LEFT JOIN connhost_pending p ON p.id = x.id`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id, ns, session, tool, digest, v, pns, psession []byte
		var trail [][]byte
		var state string
		var pstate *string
		var attempt int
		var events int64
		var terminal, pruned, due *int64
		var pending, classified bool
		require.NoError(t, rows.Scan(&id, &ns, &session, &tool, &digest, &state, &attempt, &events, &terminal, &pruned, &v, &trail,
			&pending, &pns, &psession, &pstate, &due, &classified))
		if !classified {
			t.Errorf("storage: the session of %q is not classified", id)
		}
		if pruned != nil {
			if v != nil || trail != nil || pending || terminal == nil || !ledger.State(state).Terminal() {
				t.Errorf("storage: pruned %q keeps record %v, %d events, pending row %v, terminal_ns %v, state %s", id, v != nil, len(trail), pending, terminal, state)
			}
			continue
		}
		var rec ledger.Record
		if err := rec.UnmarshalBinary(v); err != nil {
			t.Errorf("storage: %q: %v", id, err)
			continue
		}
		if rec.ID != string(id) || rec.Namespace != string(ns) || rec.SessionID != string(session) ||
			rec.ToolCallID != string(tool) || rec.ArgsDigest != string(digest) ||
			string(rec.State) != state || rec.Attempt != attempt || int64(rec.Events) != events {
			t.Errorf("storage: row %q (%s@%d v%d) holds record %+v", id, state, attempt, events, rec)
		}
		if rec.State.Terminal() != (terminal != nil) || (terminal != nil && *terminal != rec.UpdatedAt.UnixNano()) {
			t.Errorf("storage: %q is %s with terminal_ns %v (updated %s)", id, state, terminal, rec.UpdatedAt)
		}
		if rec.State.Terminal() == pending {
			t.Errorf("storage: %q is %s, pending row %v", id, state, pending)
		}
		if pending && (string(pns) != rec.Namespace || string(psession) != rec.SessionID || *pstate != state) {
			t.Errorf("storage: %q (%s) has the pending row %q/%q %s", id, state, pns, psession, *pstate)
		}
		if at, ok := ledger.DueAt(rec); pending && (ok != (due != nil) || (ok && *due != ledger.DueUnixNano(at))) {
			t.Errorf("storage: %q is %s with due_ns %v, due at %s (%v)", id, state, due, at, ok)
		}
		if int64(len(trail)) != events {
			t.Errorf("storage: %q counts %d events, its trail holds %d", id, events, len(trail))
		}
		for i, b := range trail {
			var e ledger.Event
			if err := e.UnmarshalBinary(b); err != nil || e.Seq != uint64(i+1) || e.ExecutionID != string(id) {
				t.Errorf("storage: %q event %d: seq %d of %q (%v)", id, i+1, e.Seq, e.ExecutionID, err)
			}
		}
	}
	require.NoError(t, rows.Err())
	var orphans int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM connhost_pending p
WHERE NOT EXISTS (SELECT 1 FROM connhost_executions x WHERE x.id = p.id AND x.terminal_ns IS NULL)`).Scan(&orphans))
	require.Zero(t, orphans, "pending rows without a pending execution")
}

func openDB(t testing.TB, dsn string, now func() time.Time) *pgledger.DB {
	t.Helper()
	db, err := pgledger.Open(context.Background(), pgledger.Options{DSN: dsn, Now: now, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestOptionsValidate(t *testing.T) {
	var o pgledger.Options
	o.EnsureDefaults()
	require.Equal(t, int32(pgledger.DefaultMaxConns), o.MaxConns)
	require.Equal(t, ledger.DefaultMaxRecordBytes, o.MaxRecordBytes)
	require.NotNil(t, o.Now)
	o.MaxRecordBytes, o.MaxConns = -1, -2
	err := o.Validate()
	require.ErrorIs(t, err, ledger.ErrInvalid)
	for _, field := range []string{"Options.DSN", "Options.MaxConns", "Options.MaxRecordBytes"} {
		require.Contains(t, err.Error(), field)
	}
	o = pgledger.Options{DSN: "postgres://x:y@[bad"}
	require.ErrorIs(t, o.EnsureDefaults().Validate(), ledger.ErrInvalid)
	_, err = pgledger.Open(context.Background(), pgledger.Options{})
	require.ErrorIs(t, err, ledger.ErrInvalid)
}

func TestTooLarge(t *testing.T) {
	ctx := context.Background()
	db, err := pgledger.Open(ctx, pgledger.Options{DSN: testenv.NewPostgresDatabase(t), MaxRecordBytes: 1024, Logger: quiet})
	require.NoError(t, err)
	defer db.Close()
	r := ledgertest.Dispatched("a")
	r.Args = make([]byte, 2048)
	_, err = db.Create(ctx, r, ledger.Event{})
	require.ErrorIs(t, err, ledger.ErrTooLarge)
	_, err = db.Create(ctx, ledgertest.Dispatched("a"), ledger.Event{})
	require.NoError(t, err)
	_, err = db.Apply(ctx, "a", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1, Result: make([]byte, 2048)}})
	require.ErrorIs(t, err, ledger.ErrTooLarge)
	got, err := db.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, ledger.StateDispatched, got.State)
}

// TestMustExist: a reader's Open refuses a database without a ledger and
// leaves it empty; once a ledger exists there, it opens it.
func TestMustExist(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	_, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, MustExist: true, Logger: quiet})
	require.ErrorIs(t, err, ledger.ErrNoLedger)
	var tables int
	require.NoError(t, testenv.QueryDSN(ctx, dsn, `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'connhost_%'`, &tables))
	require.Zero(t, tables, "a refused Open created something")
	openDB(t, dsn, nil)
	db, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, MustExist: true, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, db.Close())
}
