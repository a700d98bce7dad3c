package pgledger

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/internal/devkit/testing/testenv"
	"github.com/connhost/connhost/ledger"
)

var quietLog = slog.New(slog.DiscardHandler)

func open(t *testing.T, dsn string) *DB {
	t.Helper()
	d, err := Open(context.Background(), Options{DSN: dsn, Logger: quietLog})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func versions(t *testing.T, d *DB) []int {
	t.Helper()
	ms, err := appliedMigrations(context.Background(), d.pool)
	require.NoError(t, err)
	var vs []int
	for _, m := range ms {
		vs = append(vs, m.version)
	}
	return vs
}

// A new database gets every migration once; opening it again applies
// nothing; nodes opening a new database at the same time apply each
// migration once between them.
func TestMigrationsApplyOnce(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	const nodes = 8
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	dbs := make([]*DB, nodes)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = Open(ctx, Options{DSN: dsn, Logger: quietLog})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "node %d", i)
		defer dbs[i].Close()
	}
	want := []int{}
	for v := 1; v <= SchemaVersion; v++ {
		want = append(want, v)
	}
	require.Equal(t, want, versions(t, dbs[0]))
	d := open(t, dsn)
	require.Equal(t, want, versions(t, d))
	// Migration 3 gave the ledger one identity, which every node read.
	require.Len(t, d.identity, 32)
	for i := range nodes {
		require.Equal(t, d.identity, dbs[i].identity, "node %d", i)
	}
}

// A database migrated by a newer release, or by another build whose
// migration differs, is refused with ErrProtocol naming both sides; a
// newer release's migration is applied on top and refused by this one.
func TestMigrationsRefuse(t *testing.T) {
	ctx := context.Background()
	ms := mustMigrations()
	next := migration{version: len(ms) + 1, name: fmt.Sprintf("%04d_next", len(ms)+1),
		sql: "ALTER TABLE connhost_executions ADD COLUMN next_release_column INT", sum: "ab12"}

	t.Run("newer", func(t *testing.T) {
		dsn := testenv.NewPostgresDatabase(t)
		d := open(t, dsn)
		require.NoError(t, migrateTo(ctx, d, append(ms[:len(ms):len(ms)], next)))
		require.Equal(t, len(ms)+1, len(versions(t, d)))
		_, err := Open(ctx, Options{DSN: dsn, Logger: quietLog})
		require.ErrorIs(t, err, ledger.ErrProtocol)
		require.Contains(t, err.Error(), fmt.Sprintf("schema is version %d (%s)", next.version, next.name))
		require.Contains(t, err.Error(), fmt.Sprintf("knows versions up to %d", SchemaVersion))
	})
	t.Run("other build", func(t *testing.T) {
		dsn := testenv.NewPostgresDatabase(t)
		d := open(t, dsn)
		_, err := d.pool.Exec(ctx, `UPDATE connhost_schema_migrations SET sha256 = 'ffff' WHERE version = 1`)
		require.NoError(t, err)
		_, err = Open(ctx, Options{DSN: dsn, Logger: quietLog})
		require.ErrorIs(t, err, ledger.ErrProtocol)
		require.Contains(t, err.Error(), "differs from this release's")
	})
	t.Run("gap", func(t *testing.T) {
		dsn := testenv.NewPostgresDatabase(t)
		d := open(t, dsn)
		// A version beyond the next one: the ones between are missing.
		_, err := d.pool.Exec(ctx, `INSERT INTO connhost_schema_migrations (version, name, sha256) VALUES ($1, 'x', 'y')`, SchemaVersion+2)
		require.NoError(t, err)
		_, err = Open(ctx, Options{DSN: dsn, Logger: quietLog})
		require.ErrorIs(t, err, ledger.ErrProtocol)
		require.Contains(t, err.Error(), "skip")
	})
	t.Run("failed migration applies nothing", func(t *testing.T) {
		dsn := testenv.NewPostgresDatabase(t)
		d := open(t, dsn)
		bad := next
		bad.sql = "ALTER TABLE connhost_executions ADD COLUMN half INT; SELECT no_such_function()"
		err := migrateTo(ctx, d, append(ms[:len(ms):len(ms)], bad))
		require.Error(t, err)
		require.Contains(t, err.Error(), fmt.Sprintf("schema migration %d", bad.version))
		require.Equal(t, len(ms), len(versions(t, d)), "a failed migration was recorded")
		var n int
		require.NoError(t, d.pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE column_name = 'half'`).Scan(&n))
		require.Zero(t, n, "half of a failed migration stayed")
	})
}

func TestLoadMigrationsNumbering(t *testing.T) {
	ok := fstest.MapFS{"migrations/0001_a.sql": {Data: []byte("x")}, "migrations/0002_b.sql": {Data: []byte("y")}}
	ms, err := loadMigrations(ok)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, "0002_b", ms[1].name)
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"migrations/0001_a.sql": {}, "migrations/0003_c.sql": {}},
		"no number": {"migrations/a.sql": {}},
		"from zero": {"migrations/0000_a.sql": {}},
	} {
		_, err := loadMigrations(fsys)
		require.Error(t, err, name)
	}
}

// The retry loop runs a transaction again after a serialization failure or
// a deadlock (real errors raised by the server), and returns any other
// error at once.
func TestRetry(t *testing.T) {
	ctx := context.Background()
	d := open(t, testenv.NewPostgresDatabase(t))
	raise := func(code string) error {
		_, err := d.pool.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '%s'; END $$`, code))
		return err
	}
	for _, code := range []string{"40001", "40P01"} {
		calls := 0
		err := d.retry(ctx, func() error {
			calls++
			if calls < 3 {
				return raise(code)
			}
			return nil
		})
		require.NoError(t, err, code)
		require.Equal(t, 3, calls, code)
	}
	calls := 0
	err := d.retry(ctx, func() error { calls++; return raise("23505") })
	require.Error(t, err)
	require.Equal(t, 1, calls, "a unique violation is not retried")
	calls = 0
	err = d.retry(ctx, func() error { calls++; return raise("23505") }, "23505")
	require.Error(t, err)
	require.Equal(t, maxRetries+1, calls, "retries are bounded")
	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	err = d.retry(cctx, func() error { calls++; cancel(); return raise("40001") })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, calls)
}

// TestCorruptRecord: a row whose record does not decode, or holds another
// execution's record, is ErrCorrupt, not a wrong answer.
func TestCorruptRecord(t *testing.T) {
	ctx := context.Background()
	d := open(t, testenv.NewPostgresDatabase(t))
	for _, id := range []string{"a", "b"} {
		r := ledger.Record{ID: id, Namespace: "n", SessionID: "s", State: ledger.StateDispatched, Attempt: 1, MaxAttempts: 1}
		_, err := d.Create(ctx, r, ledger.Event{})
		require.NoError(t, err)
	}
	_, err := d.pool.Exec(ctx, `UPDATE connhost_executions SET record = '\x09ffff' WHERE id = 'a'`)
	require.NoError(t, err)
	_, err = d.Get(ctx, "a")
	require.ErrorIs(t, err, ledger.ErrCorrupt)
	_, err = d.pool.Exec(ctx, `UPDATE connhost_executions SET record = (SELECT record FROM connhost_executions WHERE id = 'a') WHERE id = 'b'`)
	require.NoError(t, err)
	err = d.Pending(ctx, func(ledger.Record) error { return nil })
	require.ErrorIs(t, err, ledger.ErrCorrupt)
	_, err = d.pool.Exec(ctx, `UPDATE connhost_executions SET record = $1 WHERE id = 'b'`, []byte{2})
	require.NoError(t, err)
	_, err = d.Get(ctx, "b")
	require.ErrorIs(t, err, ledger.ErrCorrupt)
	require.True(t, strings.HasPrefix(err.Error(), "execution[b]"), err.Error())
	var n int
	require.NoError(t, d.pool.QueryRow(ctx, `SELECT count(*) FROM connhost_executions`).Scan(&n))
	require.Equal(t, 2, n)
}

// A version-1 database gets created_ns from its records when migration 2
// is applied, so a listing by time misses no older record.
func TestMigration2FillsCreated(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := Open(ctx, Options{DSN: dsn, Logger: quietLog, Now: func() time.Time { return now }})
	require.NoError(t, err)
	for _, id := range []string{"b", "a", "c"} {
		r := ledger.Record{ID: id, Namespace: ledger.DefaultNamespace, SessionID: "s1", ToolCallID: "call-" + id,
			Connector: "payments", Operation: "create_payment", Effect: "external", Policy: "idempotent-retry",
			ArgsDigest: "d-" + id, State: ledger.StateDispatched, Attempt: 1, MaxAttempts: 3}
		_, err := d.Create(ctx, r, ledger.Event{Decision: "dispatch"})
		require.NoError(t, err)
		now = now.Add(time.Minute)
	}
	// Make it what version 1 wrote.
	_, err = d.pool.Exec(ctx, undoMigration6+undoMigration5+`DROP TABLE connhost_ledger, connhost_restores;
DROP INDEX connhost_executions_newest;
ALTER TABLE connhost_executions DROP COLUMN created_ns;
DELETE FROM connhost_schema_migrations WHERE version >= 2`, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	require.NoError(t, d.Close())

	d = open(t, dsn)
	var all []int
	for v := 1; v <= SchemaVersion; v++ {
		all = append(all, v)
	}
	require.Equal(t, all, versions(t, d))
	got, err := d.List(ctx, ledger.Filter{Order: ledger.OrderNewest})
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []string{"c", "a", "b"}, []string{got[0].ID, got[1].ID, got[2].ID})
}

// undoMigration6 makes a database what version 5 wrote.
const undoMigration6 = `DROP TABLE connhost_intent_locks;
DROP INDEX connhost_executions_intent;
ALTER TABLE connhost_executions DROP COLUMN intent_key;
DELETE FROM connhost_schema_migrations WHERE version = 6;
`

// undoMigration5 makes a database what version 4 wrote (after
// undoMigration6).
const undoMigration5 = `DROP INDEX connhost_executions_due;
DROP INDEX connhost_executions_awaiting;
ALTER TABLE connhost_executions DROP COLUMN due_ns;
DELETE FROM connhost_schema_migrations WHERE version = 5;
`

// A version-4 database gets due_ns from its pending records when migration
// 5 is applied, so a recovery pass misses no due execution, and a
// terminal or recovery_required one stays out of the due index.
func TestMigration5FillsDue(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := Open(ctx, Options{DSN: dsn, Logger: quietLog, Now: func() time.Time { return now }})
	require.NoError(t, err)
	rec := func(id string, state ledger.State, attempt int) ledger.Record {
		return ledger.Record{ID: id, Namespace: "tenant-a", SessionID: "s1", ToolCallID: "call-" + id,
			Connector: "payments", Operation: "create_payment", Effect: "external", Policy: "idempotent-retry",
			ArgsDigest: "d-" + id, State: state, Attempt: attempt, MaxAttempts: 3}
	}
	_, err = d.Create(ctx, rec("d", ledger.StateDispatched, 1), ledger.Event{Decision: "dispatch"})
	require.NoError(t, err)
	g := rec("g", ledger.StateAwaitingApproval, 0)
	g.Approval = &ledger.Approval{ID: "ap_g", ArgsDigest: "d-g", ExpiresAt: now.Add(time.Hour), Decision: ledger.ApprovalPending}
	_, err = d.Create(ctx, g, ledger.Event{})
	require.NoError(t, err)
	_, err = d.Create(ctx, rec("r", ledger.StateRecoveryRequired, 1), ledger.Event{})
	require.NoError(t, err)
	_, err = d.Create(ctx, rec("s", ledger.StateDispatched, 1), ledger.Event{Decision: "dispatch"})
	require.NoError(t, err)
	_, err = d.Apply(ctx, "s", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Source: "connector", Attempt: 1}})
	require.NoError(t, err)
	_, err = d.pool.Exec(ctx, undoMigration6+undoMigration5, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	require.NoError(t, d.Close())

	d = open(t, dsn)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6}, versions(t, d))
	var due []string
	require.NoError(t, d.Due(ctx, now.Add(2*time.Hour), func(id string) error { due = append(due, id); return nil }))
	require.Equal(t, []string{"d", "g"}, due)
	due = nil
	require.NoError(t, d.Due(ctx, now, func(id string) error { due = append(due, id); return nil }))
	require.Equal(t, []string{"d"}, due, "the approval is due at its expiry, not before")
	n, err := d.AwaitingApproval(ctx, "tenant-a")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}
