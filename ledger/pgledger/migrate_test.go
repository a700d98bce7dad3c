package pgledger

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
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
	// Migration 1 gave the ledger one identity, which every node read.
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
	t.Run("earlier development schema", func(t *testing.T) {
		// A database built by a build before one row per execution (its
		// migration 1, as that build recorded it) is refused with what to
		// do, and nothing of it is read or changed.
		dsn := testenv.NewPostgresDatabase(t)
		require.NoError(t, testenv.ExecDSN(ctx, dsn, createMigrationsTable))
		require.NoError(t, testenv.ExecDSN(ctx, dsn, `INSERT INTO connhost_schema_migrations (version, name, sha256)
VALUES (1, '0001_ledger', '5ee04ba2f0c97abed26624749858ce1bd68dce1e7151643cc2bbe1322f2e5913')`))
		for _, init := range []bool{false, true} {
			_, err := Open(ctx, Options{DSN: dsn, Logger: quietLog, Init: init, WitnessPath: filepath.Join(t.TempDir(), "w")})
			require.ErrorIs(t, err, ledger.ErrProtocol)
			require.Contains(t, err.Error(), "schema of an earlier development build")
			require.Contains(t, err.Error(), "no migration")
		}
		var tables int
		require.NoError(t, testenv.QueryDSN(ctx, dsn, `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'connhost_%'`, &tables))
		require.Equal(t, 1, tables, "tables created in a database of another schema")
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
