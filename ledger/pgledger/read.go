package pgledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connhost/connhost/ledger"
)

const getSQL = `SELECT record, pruned_ns, namespace, session_id, tool_call_id, args_digest, state, terminal_ns
FROM connhost_executions WHERE id = $1`

// Get implements ledger.Ledger. For a pruned id it returns ErrPruned with
// the partial record its tombstone keeps (ledger.Pruned).
func (d *DB) Get(ctx context.Context, id string) (_ ledger.Record, err error) {
	if err := d.enter(ctx); err != nil {
		return ledger.Record{}, err
	}
	defer d.leave(&err)
	return d.get(ctx, id)
}

func (d *DB) get(ctx context.Context, id string) (ledger.Record, error) {
	var (
		v                              []byte
		prunedNs, terminalNs           *int64
		ns, session, toolCall, argsDig []byte
		state                          string
	)
	err := d.pool.QueryRow(ctx, getSQL, []byte(id)).Scan(&v, &prunedNs, &ns, &session, &toolCall, &argsDig, &state, &terminalNs)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ledger.Record{}, fmt.Errorf("execution[%s]: %w", id, ledger.ErrNotFound)
	case err != nil:
		return ledger.Record{}, fmt.Errorf("pgledger: read execution[%s]: %w", id, err)
	case prunedNs != nil:
		var at time.Time
		if terminalNs != nil {
			at = time.Unix(0, *terminalNs)
		}
		return ledger.Pruned(id, string(ns), string(session), string(toolCall), string(argsDig), ledger.State(state), at),
			fmt.Errorf("execution[%s]: %w", id, ledger.ErrPruned)
	}
	return decode(id, v)
}

// decode decodes a record value of execution id.
func decode(id string, v []byte) (ledger.Record, error) {
	var rec ledger.Record
	if err := rec.UnmarshalBinary(v); err != nil {
		return ledger.Record{}, fmt.Errorf("execution[%s]: %w", id, err)
	}
	if rec.ID != id {
		return ledger.Record{}, fmt.Errorf("execution[%s]: %w: the row holds the record of %q", id, ledger.ErrCorrupt, rec.ID)
	}
	return rec, nil
}

// Events implements ledger.Ledger: the execution's events in order, read
// from its row's trail. A pruned id is ErrPruned, an unknown one
// ErrNotFound.
func (d *DB) Events(ctx context.Context, id string) (_ []ledger.Event, err error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.leave(&err)
	var (
		pruned *int64
		trail  [][]byte
	)
	err = d.pool.QueryRow(ctx, `SELECT pruned_ns, trail FROM connhost_executions WHERE id = $1`, []byte(id)).Scan(&pruned, &trail)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("execution[%s]: %w", id, ledger.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("pgledger: read events of execution[%s]: %w", id, err)
	case pruned != nil:
		return nil, fmt.Errorf("execution[%s]: %w", id, ledger.ErrPruned)
	}
	evs := make([]ledger.Event, 0, len(trail))
	for _, b := range trail {
		var e ledger.Event
		if err := e.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("execution[%s] event: %w", id, err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// Pending implements ledger.Ledger. It reads the executions of
// connhost_pending only (one row per execution that is not terminal), in
// id order, in one statement, so the records are one consistent snapshot; fn may write
// to the ledger meanwhile (on other connections).
// A record that does not decode is skipped; once the others were handed
// to fn, Pending returns a *ledger.CorruptRecordsError naming them.
func (d *DB) Pending(ctx context.Context, fn func(ledger.Record) error) (err error) {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.leave(&err)
	return d.scanPending(ctx, fn, `SELECT x.id, x.record FROM connhost_pending p
CROSS JOIN LATERAL (`+executionOf+`) x ORDER BY p.id`)
}

// executionOf is the subquery that reads the execution of pending row p
// by its primary key. Its LIMIT keeps the planner from flattening it into
// a join, which, with many pending rows, it may run as a scan of the whole
// executions table: one index look-up per pending execution keeps a
// recovery's cost with the pending work, whatever the history's size.
const executionOf = `SELECT id, record, state, owner_node, owner_epoch, terminal_ns FROM connhost_executions WHERE id = p.id LIMIT 1`

// Due implements ledger.Ledger: the ids of the executions due by until,
// in due order, from the due index of connhost_pending, in one statement; fn may write to the ledger meanwhile.
func (d *DB) Due(ctx context.Context, until time.Time, fn func(id string) error) (err error) {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.leave(&err)
	return d.scanIDs(ctx, fn, `SELECT id FROM connhost_pending WHERE due_ns <= $1 ORDER BY due_ns, id`, ledger.DueUnixNano(until))
}

// scanIDs calls fn for each id the query returns, stopping at fn's first
// error, which it returns as it is. The rows are read before fn runs, so
// fn may use the pool.
func (d *DB) scanIDs(ctx context.Context, fn func(id string) error, sql string, args ...any) error {
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("pgledger: query: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("pgledger: read: %w", err)
		}
		ids = append(ids, string(id))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgledger: read: %w", err)
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

// AwaitingApproval implements ledger.Ledger from the approval index of
// connhost_pending.
func (d *DB) AwaitingApproval(ctx context.Context, namespace string) (_ int, err error) {
	if err := d.enter(ctx); err != nil {
		return 0, err
	}
	defer d.leave(&err)
	var n int
	if namespace == "" {
		err = d.pool.QueryRow(ctx, `SELECT count(*) FROM connhost_pending WHERE state = 'awaiting_approval'`).Scan(&n)
	} else {
		err = d.pool.QueryRow(ctx, `SELECT count(*) FROM connhost_pending WHERE state = 'awaiting_approval' AND namespace = $1`,
			[]byte(namespace)).Scan(&n)
	}
	if err != nil {
		return 0, fmt.Errorf("pgledger: count executions awaiting approval: %w", err)
	}
	return n, nil
}

// scan calls fn for each (id, record) row of the query, stopping at fn's
// first error, which it returns as it is.
func (d *DB) scan(ctx context.Context, fn func(ledger.Record) error, sql string, args ...any) error {
	return d.scanRows(ctx, func(id string, v []byte) error {
		rec, err := decode(id, v)
		if err != nil {
			return err
		}
		return fn(rec)
	}, sql, args...)
}

// scanRows calls fn with the id and record value of each row the query
// returns (id, record), stopping at fn's first error.
func (d *DB) scanRows(ctx context.Context, fn func(id string, v []byte) error, sql string, args ...any) error {
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("pgledger: query: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, v []byte
		if err := rows.Scan(&id, &v); err != nil {
			return fmt.Errorf("pgledger: read: %w", err)
		}
		if err := fn(string(id), v); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgledger: read: %w", err)
	}
	return nil
}

// scanPending is scan for recovery's reads: a record that does not decode
// (a row edited or copied in the database) is skipped, the others are
// handed to fn, and the skipped ones are reported at the end as a
// *ledger.CorruptRecordsError: one bad row must not keep a node from
// starting or recovering every other execution.
func (d *DB) scanPending(ctx context.Context, fn func(ledger.Record) error, sql string, args ...any) error {
	var bad ledger.CorruptRecordsError
	err := d.scanRows(ctx, func(id string, v []byte) error {
		rec, err := decode(id, v)
		if err != nil {
			bad.IDs, bad.Errs = append(bad.IDs, id), append(bad.Errs, err)
			return nil
		}
		return fn(rec)
	}, sql, args...)
	if err == nil && len(bad.IDs) > 0 {
		return &bad
	}
	return err
}

// Fenced implements ledger.Ledger: the session's recovery_required
// executions in id order, from the fence index of connhost_pending.
func (d *DB) Fenced(ctx context.Context, namespace, sessionID string) (_ []ledger.Record, err error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.leave(&err)
	var recs []ledger.Record
	err = d.scan(ctx, func(r ledger.Record) error { recs = append(recs, r); return nil },
		`SELECT x.id, x.record FROM connhost_pending p JOIN connhost_executions x ON x.id = p.id
WHERE p.namespace = $1 AND p.session_id = $2 AND p.state = 'recovery_required' ORDER BY p.id`,
		[]byte(namespace), []byte(sessionID))
	return recs, err
}

// SessionKnown implements ledger.Ledger.
func (d *DB) SessionKnown(ctx context.Context, namespace, sessionID string) (_ bool, err error) {
	if err := d.enter(ctx); err != nil {
		return false, err
	}
	defer d.leave(&err)
	var legacy bool
	err = d.pool.QueryRow(ctx, `SELECT legacy FROM connhost_sessions WHERE namespace = $1 AND session_id = $2`,
		[]byte(namespace), []byte(sessionID)).Scan(&legacy)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("pgledger: read session: %w", err)
	}
	return !legacy, nil
}

// List implements ledger.Ledger: records without pruned ones, filtered by
// the database, in id order after f.After, (ledger.OrderNewest) by
// created_ns and id descending after the record f.After names, or
// (ledger.OrderDue) by due time and id from the due index of
// connhost_pending, after the position (f.AfterDue, f.After).
func (d *DB) List(ctx context.Context, f ledger.Filter) (_ []ledger.Record, err error) {
	if f.Order != ledger.OrderID && f.Order != ledger.OrderNewest && f.Order != ledger.OrderDue {
		return nil, fmt.Errorf("pgledger: list order %d: %w", f.Order, ledger.ErrInvalid)
	}
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.leave(&err)
	limit := f.Limit
	if limit <= 0 {
		limit = ledger.DefaultListLimit
	}
	from := "connhost_executions x"
	where := []string{"x.pruned_ns IS NULL"}
	var args []any
	add := func(cond string, v ...any) {
		for _, a := range v {
			args = append(args, a)
			cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1)
		}
		where = append(where, cond)
	}
	if f.State != "" {
		add("x.state = ?", string(f.State))
	}
	if f.Namespace != "" {
		add("x.namespace = ?", []byte(f.Namespace))
	}
	if len(f.Namespaces) > 0 {
		nss := make([][]byte, len(f.Namespaces))
		for i, ns := range f.Namespaces {
			nss[i] = []byte(ns)
		}
		add("x.namespace = ANY(?::BYTEA[])", nss)
	}
	if f.SessionID != "" {
		add("x.session_id = ?", []byte(f.SessionID))
	}
	order := "x.id"
	switch {
	case f.Order == ledger.OrderNewest:
		order = "x.created_ns DESC, x.id DESC"
		if f.After != "" {
			var created, pruned *int64
			err := d.pool.QueryRow(ctx, `SELECT created_ns, pruned_ns FROM connhost_executions WHERE id = $1`, []byte(f.After)).Scan(&created, &pruned)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return nil, fmt.Errorf("pgledger: list after execution[%s]: %w", f.After, ledger.ErrNotFound)
			case err != nil:
				return nil, fmt.Errorf("pgledger: list after execution[%s]: %w", f.After, err)
			case pruned != nil || created == nil:
				return nil, fmt.Errorf("pgledger: list after execution[%s]: %w", f.After, ledger.ErrPruned)
			}
			add("(x.created_ns, x.id) < (?, ?)", *created, []byte(f.After))
		}
	case f.Order == ledger.OrderDue:
		from = "connhost_pending p JOIN connhost_executions x ON x.id = p.id"
		order = "p.due_ns, p.id"
		where = append(where, "p.due_ns IS NOT NULL")
		if f.After != "" {
			add("(p.due_ns, p.id) > (?, ?)", ledger.DueUnixNano(f.AfterDue), []byte(f.After))
		}
	case f.After != "":
		add("x.id > ?", []byte(f.After))
	}
	args = append(args, limit)
	sql := fmt.Sprintf("SELECT x.id, x.record FROM %s WHERE %s ORDER BY %s LIMIT $%d", from, strings.Join(where, " AND "), order, len(args))
	var recs []ledger.Record
	err = d.scan(ctx, func(r ledger.Record) error { recs = append(recs, r); return nil }, sql, args...)
	return recs, err
}
