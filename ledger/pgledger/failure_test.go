package pgledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/ledgertest"
	"github.com/connhost/connhost/ledger/pgledger"
)

// TestConformanceSerializable runs the suite with the database's
// transactions SERIALIZABLE, as CockroachDB runs every transaction: the
// racing writers then also meet serialization failures (40001), which the
// ledger must retry from the read, not report.
func TestConformanceSerializable(t *testing.T) {
	ledgertest.Run(t, ledgertest.Backend{
		New: func(t testing.TB) ledgertest.Store {
			s := newStore(t)
			conn, err := pgx.Connect(context.Background(), s.dsn)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			_, err = conn.Exec(context.Background(), `DO $$ BEGIN
  EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation TO serializable', current_database());
END $$`)
			require.NoError(t, err)
			return s
		},
		Check: checkStorage,
	})
}

// waitBlocked polls pg_stat_activity until a session of app waits for a
// lock: the statement under test has done its first writes and waits on
// the test's transaction.
func waitBlocked(t *testing.T, pg *testenv.Postgres, app string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	for {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n))
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the write never blocked on the test's lock")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestConnectionLostMidWrite kills the ledger's connection in the middle
// of a Create and of an Apply: each statement stops on a lock the test
// holds, after it wrote part of what it writes, and the server then ends
// its session. Nothing of either write is visible afterwards, the caller
// got an error, and the same write then succeeds on a new connection.
func TestConnectionLostMidWrite(t *testing.T) {
	ctx := context.Background()
	pg := testenv.SharedPostgres(t)
	dsn := testenv.NewPostgresDatabase(t)
	app := fmt.Sprint("victim-", apps.Add(1))
	db, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, ApplicationName: app, Logger: quiet})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Create(ctx, ledgertest.Dispatched("a"), ledger.Event{})
	require.NoError(t, err)
	blocker, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer blocker.Close(ctx)
	kill := func() {
		waitBlocked(t, pg, app)
		require.NoError(t, pg.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app))
	}

	t.Run("apply", func(t *testing.T) {
		// The test holds the pending row of "a": Apply's statement
		// updates the execution's row, then waits to delete it.
		tx, err := blocker.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM connhost_pending WHERE id = 'a' FOR UPDATE`)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := db.Apply(ctx, "a", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
				Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
			done <- err
		}()
		kill()
		require.Error(t, <-done, "Apply reported success on a lost connection")
		require.NoError(t, tx.Rollback(ctx))
		rec, err := db.Get(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, ledger.StateDispatched, rec.State, "half of a lost Apply is visible")
		require.EqualValues(t, 1, rec.Events)
		evs, err := db.Events(ctx, "a")
		require.NoError(t, err)
		require.Len(t, evs, 1)
		rec, err = db.Apply(ctx, "a", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
			Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
		require.NoError(t, err)
		require.Equal(t, ledger.StateSucceeded, rec.State)
	})

	t.Run("create", func(t *testing.T) {
		// The test holds the classification of session "new": Create's
		// statement inserts the execution and its event, then waits.
		tx, err := blocker.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO connhost_sessions (namespace, session_id, legacy) VALUES ('default', 'new', false)`)
		require.NoError(t, err)
		r := ledgertest.Dispatched("b")
		r.SessionID = "new"
		done := make(chan error, 1)
		go func() {
			_, err := db.Create(ctx, r, ledger.Event{})
			done <- err
		}()
		kill()
		require.Error(t, <-done, "Create reported success on a lost connection")
		require.NoError(t, tx.Rollback(ctx))
		_, err = db.Get(ctx, "b")
		require.ErrorIs(t, err, ledger.ErrNotFound, "half of a lost Create is visible")
		known, err := db.SessionKnown(ctx, ledger.DefaultNamespace, "new")
		require.NoError(t, err)
		require.False(t, known)
		_, err = db.Create(ctx, r, ledger.Event{})
		require.NoError(t, err)
		known, err = db.SessionKnown(ctx, ledger.DefaultNamespace, "new")
		require.NoError(t, err)
		require.True(t, known)
	})
	checkTables(t, dsn)
}

// TestServerCrash: every write the ledger acknowledged survives an
// immediate shutdown of a durable server (no checkpoint: the restart
// replays the write-ahead log), and the ledger reopens on it.
func TestServerCrash(t *testing.T) {
	ctx := context.Background()
	pg, err := testenv.StartPostgres(testenv.PostgresOptions{Durable: true})
	if err != nil {
		testenv.PostgresSkipOrFail(t, err)
	}
	defer pg.Stop()
	dsn, err := pg.CreateDatabase(ctx)
	require.NoError(t, err)
	db, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, Logger: quiet})
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c"} {
		_, err := db.Create(ctx, ledgertest.Dispatched(id), ledger.Event{})
		require.NoError(t, err)
	}
	_, err = db.Apply(ctx, "a", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1, Receipt: "pi_1"}})
	require.NoError(t, err)
	_, err = db.Apply(ctx, "b", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRecoveryRequired, Attempt: 1})
	require.NoError(t, err)
	require.NoError(t, pg.Crash())
	_ = db.Close()
	require.NoError(t, pg.Start())

	db, err = pgledger.Open(ctx, pgledger.Options{DSN: dsn, Logger: quiet})
	require.NoError(t, err)
	defer db.Close()
	a, err := db.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "pi_1", a.Outcome.Receipt)
	var pending []string
	require.NoError(t, db.Pending(ctx, func(r ledger.Record) error { pending = append(pending, r.ID); return nil }))
	require.Equal(t, []string{"b", "c"}, pending)
	fenced, err := db.Fenced(ctx, ledger.DefaultNamespace, "s1")
	require.NoError(t, err)
	require.Len(t, fenced, 1)
	ledgertest.Invariants(t, db, []string{"a", "b", "c"}, [][2]string{{ledger.DefaultNamespace, "s1"}})
	checkTables(t, dsn)
}

// TestStaleWriterOnAnotherNode: two ledgers on one database, as two nodes.
// A node whose view of a record is stale never overwrites the newer state
// another node wrote: its write is checked again against the stored record
// and either applies on top of it or gets the grammar's refusal.
func TestStaleWriterOnAnotherNode(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	a, b := openDB(t, dsn, nil), openDB(t, dsn, nil)
	_, err := a.Create(ctx, ledgertest.Dispatched("x"), ledger.Event{}) // a now holds x at version 1
	require.NoError(t, err)
	_, err = b.Apply(ctx, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 1, CancelRequested: true})
	require.NoError(t, err)
	// a's outcome is still legal on the newer record: it applies on top of
	// it and keeps b's cancel request.
	got, err := a.Apply(ctx, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
	require.NoError(t, err)
	require.True(t, got.CancelRequested, "a stale writer dropped another node's change")
	require.EqualValues(t, 3, got.Events)
	// b's view (version 2) is stale now; its write finds x terminal.
	_, err = b.Apply(ctx, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRecoveryRequired, Attempt: 1})
	require.ErrorIs(t, err, ledger.ErrTerminal)

	_, err = a.Create(ctx, ledgertest.Dispatched("y"), ledger.Event{})
	require.NoError(t, err)
	_, err = b.Apply(ctx, "y", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2})
	require.NoError(t, err)
	// a still holds y at attempt 1: its retry_wait for attempt 1 lost.
	_, err = a.Apply(ctx, "y", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRetryWait, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "timeout", Attempt: 1}})
	require.ErrorIs(t, err, ledger.ErrConflict)
	y, err := b.Get(ctx, "y")
	require.NoError(t, err)
	require.Equal(t, 2, y.Attempt)
	require.Nil(t, y.Outcome)
	ledgertest.Invariants(t, a, []string{"x", "y"}, [][2]string{{ledger.DefaultNamespace, "s1"}})
	checkTables(t, dsn)
}
