package pgledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connhost/connhost/ledger"
)

// The schema is a sequence of migrations, migrations/NNNN_name.sql, applied
// in order at Open. Each is applied once, in a transaction that first
// inserts its row into connhost_schema_migrations: of nodes that open a
// database at the same time, the first to insert the row applies the
// migration, and the others wait on that row, then find it applied. A
// migration file never changes once released: its sha256 is recorded, and
// a database whose recorded migrations differ from this release's, or that
// has migrations this release does not know (a newer release migrated it),
// is refused with ledger.ErrProtocol. A release that changes what the
// record column holds (a new record encoding) adds a migration, so that
// older releases refuse the database instead of failing on its records.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one schema step.
type migration struct {
	version int
	name    string
	sql     string
	sum     string // hex sha256 of sql
}

// SchemaVersion is the schema version this release creates and reads: the
// number of its last migration.
var SchemaVersion = len(mustMigrations())

func mustMigrations() []migration {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		panic(err)
	}
	return ms
}

// loadMigrations reads migrations/*.sql, which must be numbered 1, 2, …
// without gaps.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for i, n := range names { // Glob sorts
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("pgledger: migration %s: want the number %04d", n, i+1)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b), sum: hex.EncodeToString(sum[:])})
	}
	return ms, nil
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS connhost_schema_migrations (
    version    INT         PRIMARY KEY,
    name       TEXT        NOT NULL,
    sha256     TEXT        NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`

// migrate brings the schema to this release's version, or refuses it.
func (d *DB) migrate(ctx context.Context) error {
	return migrateTo(ctx, d, mustMigrations())
}

func migrateTo(ctx context.Context, d *DB, ms []migration) error {
	// Two nodes creating the table at once can collide in the catalog
	// (unique_violation, duplicate_table, or duplicate_object for its row
	// type): the loser's retry finds it created.
	err := d.retry(ctx, func() error {
		_, err := d.pool.Exec(ctx, createMigrationsTable)
		return err
	}, "23505", "42P07", "42710")
	if err != nil {
		return fmt.Errorf("pgledger: create connhost_schema_migrations: %w", err)
	}
	for {
		applied, err := appliedMigrations(ctx, d.pool)
		if err != nil {
			return err
		}
		if err := checkApplied(applied, ms); err != nil {
			return err
		}
		if len(applied) == len(ms) {
			return nil
		}
		m := ms[len(applied)]
		done, err := d.applyMigration(ctx, m)
		if err != nil {
			return err
		}
		if done {
			d.opts.Logger.Info("pgledger: applied schema migration", "version", m.version, "name", m.name)
		}
	}
}

// appliedMigrations returns the recorded migrations in version order.
func appliedMigrations(ctx context.Context, q querier) ([]migration, error) {
	rows, err := q.Query(ctx, `SELECT version, name, sha256 FROM connhost_schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("pgledger: read connhost_schema_migrations: %w", err)
	}
	var out []migration
	for rows.Next() {
		var m migration
		if err := rows.Scan(&m.version, &m.name, &m.sum); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgledger: read connhost_schema_migrations: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgledger: read connhost_schema_migrations: %w", err)
	}
	return out, nil
}

// supersededSchemas are the sha256 of migrations of development builds
// that this release's schema replaced, with what they stored: nothing was
// released with them, so there is no migration from them, and a database
// they built is refused with what to do instead of being read.
var supersededSchemas = map[string]string{
	"5ee04ba2f0c97abed26624749858ce1bd68dce1e7151643cc2bbe1322f2e5913": "events in a table of their own, the pending executions found by partial indexes of the executions' table",
}

// checkApplied refuses a database whose recorded migrations are not a
// prefix of ms.
func checkApplied(applied, ms []migration) error {
	for i, a := range applied {
		if was, ok := supersededSchemas[a.sum]; ok {
			return fmt.Errorf("%w: the database holds a connhost ledger in the schema of an earlier development build (migration %d, %s, sha256 %.12s: %s); this release stores one row per execution, does not read that schema and has no migration from it: give the ledger a new database, or drop the connhost_* tables there (losing what they record)",
				ledger.ErrProtocol, a.version, a.name, a.sum, was)
		}
		if a.version != i+1 {
			return fmt.Errorf("%w: the database's schema migrations skip from %d to %d; this release's schema is version %d",
				ledger.ErrProtocol, i, a.version, len(ms))
		}
		if i >= len(ms) {
			last := applied[len(applied)-1]
			return fmt.Errorf("%w: the database's schema is version %d (%s), this release knows versions up to %d: a newer release migrated it; run that release",
				ledger.ErrProtocol, last.version, last.name, len(ms))
		}
		if a.sum != ms[i].sum || a.name != ms[i].name {
			return fmt.Errorf("%w: the database's schema migration %d (%s, sha256 %.12s) differs from this release's (%s, sha256 %.12s): it was migrated by another build",
				ledger.ErrProtocol, a.version, a.name, a.sum, ms[i].name, ms[i].sum)
		}
	}
	return nil
}

// applyMigration applies m in one transaction that first records it. It
// returns false if another node recorded m first.
func (d *DB) applyMigration(ctx context.Context, m migration) (bool, error) {
	done := false
	err := d.retry(ctx, func() error {
		done = false
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `INSERT INTO connhost_schema_migrations (version, name, sha256) VALUES ($1, $2, $3)`,
			m.version, m.name, m.sum); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" {
				return nil // another node applied it while we waited on its row
			}
			return err
		}
		// The simple protocol runs the file's statements as one script.
		if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		if fill := migrationData[m.version]; fill != nil {
			if err := fill(ctx, tx); err != nil {
				return err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("pgledger: schema migration %d (%s): %w", m.version, m.name, err)
	}
	return done, nil
}

// migrationData holds the steps of a migration that SQL cannot do, run in
// its transaction after its file.
var migrationData = map[int]func(ctx context.Context, tx pgx.Tx) error{
	1: newIdentity,
}

// newIdentity gives the ledger its random identity: 16 random bytes in
// hex, as the Pebble ledger's.
func newIdentity(ctx context.Context, tx pgx.Tx) error {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	_, err := tx.Exec(ctx, `INSERT INTO connhost_ledger (identity) VALUES ($1)`, hex.EncodeToString(b[:]))
	return err
}
