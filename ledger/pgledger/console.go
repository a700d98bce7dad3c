package pgledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connhost/connhost/ledger"
)

var _ ledger.ConsoleSessions = (*DB)(nil)

// AddConsoleSession implements ledger.ConsoleSessions.
func (d *DB) AddConsoleSession(ctx context.Context, s ledger.ConsoleSession) (err error) {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.leave(&err)
	var n int64
	err = d.retry(ctx, func() error {
		tag, err := d.pool.Exec(ctx, `INSERT INTO connhost_console_sessions (key, principal, created_ns, expires_ns)
VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING`, s.Key[:], s.Principal, s.Created.UnixNano(), s.Expires.UnixNano())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("pgledger: add console session: %w", err)
	}
	if n == 0 {
		return ledger.ErrExists
	}
	return nil
}

// ConsoleSession implements ledger.ConsoleSessions.
func (d *DB) ConsoleSession(ctx context.Context, key [32]byte) (_ ledger.ConsoleSession, err error) {
	if err := d.enter(ctx); err != nil {
		return ledger.ConsoleSession{}, err
	}
	defer d.leave(&err)
	s := ledger.ConsoleSession{Key: key}
	var created, expires int64
	var revoked *int64
	err = d.pool.QueryRow(ctx, `SELECT principal, created_ns, expires_ns, revoked_ns FROM connhost_console_sessions WHERE key = $1`,
		key[:]).Scan(&s.Principal, &created, &expires, &revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.ConsoleSession{}, ledger.ErrNotFound
	}
	if err != nil {
		return ledger.ConsoleSession{}, fmt.Errorf("pgledger: read console session: %w", err)
	}
	s.Created, s.Expires = time.Unix(0, created).UTC(), time.Unix(0, expires).UTC()
	if revoked != nil {
		s.Revoked = time.Unix(0, *revoked).UTC()
	}
	return s, nil
}

// RevokeConsoleSession implements ledger.ConsoleSessions.
func (d *DB) RevokeConsoleSession(ctx context.Context, key [32]byte, at time.Time) (err error) {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.leave(&err)
	var n int64
	err = d.retry(ctx, func() error {
		// One statement: the row, revoked now or before; none when unknown.
		tag, err := d.pool.Exec(ctx, `UPDATE connhost_console_sessions SET revoked_ns = COALESCE(revoked_ns, $2) WHERE key = $1`,
			key[:], at.UnixNano())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("pgledger: revoke console session: %w", err)
	}
	if n == 0 {
		return ledger.ErrNotFound
	}
	return nil
}

// RevokeConsoleSessions implements ledger.ConsoleSessions, in one
// statement.
func (d *DB) RevokeConsoleSessions(ctx context.Context, principal string, at time.Time) (_ int, err error) {
	if err := d.enter(ctx); err != nil {
		return 0, err
	}
	defer d.leave(&err)
	var n int64
	err = d.retry(ctx, func() error {
		tag, err := d.pool.Exec(ctx, `UPDATE connhost_console_sessions SET revoked_ns = $2
WHERE principal = $1 AND revoked_ns IS NULL AND expires_ns > $2`, principal, at.UnixNano())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pgledger: revoke the console sessions of %q: %w", principal, err)
	}
	return int(n), nil
}

// pruneConsole deletes the console sessions that expired before
// olderThan.
func (d *DB) pruneConsole(ctx context.Context, olderThan time.Time) error {
	err := d.retry(ctx, func() error {
		_, err := d.pool.Exec(ctx, `DELETE FROM connhost_console_sessions WHERE expires_ns < $1`, olderThan.UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("pgledger: prune console sessions: %w", err)
	}
	return nil
}
