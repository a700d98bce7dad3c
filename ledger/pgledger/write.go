package pgledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connhost/connhost/ledger"
)

// Each write is one statement, so one round trip and one commit: its
// data-modifying CTEs insert or update the execution's row (its event
// appended to the row's trail), keep its connhost_pending row, and
// classify its session, all or nothing. The statements are prepared once
// per connection (pgx's statement cache) and then sent as one message
// each. An outcome's UPDATE changes no indexed column of the execution's
// row, so PostgreSQL makes it a HOT update (no index entry written), and
// deletes the pending row (none written either).

// createSQL inserts a new execution with its first event, its pending row
// (unless it is created terminal) and (if the session has none) its
// session's classification. $11 and $12 name the owner's lease, or are
// NULL; with a lease, the row is inserted only while the lease is live.
// $14 is its due time (NULL: never due), $15 the intent key of a guarded
// record (else NULL), $16 the time a record created terminal (a duplicate
// answered with an earlier outcome) became so. It returns 1 if it
// inserted the execution, else 0, and false (see createUnfencedSQL).
const createSQL = `WITH ins AS (
    INSERT INTO connhost_executions
        (id, namespace, session_id, tool_call_id, args_digest, state, attempt, events, record, trail, owner_node, owner_epoch,
         created_ns, intent_key, terminal_ns)
    SELECT $1, $2, $3, $4, $5, $6, $7, 1, $8, ARRAY[$9::BYTEA], $11, $12, $13, $15, $16
    WHERE $11::TEXT IS NULL OR EXISTS (
        SELECT 1 FROM connhost_nodes WHERE node_id = $11 AND epoch = $12 AND expires_at > clock_timestamp())
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), pend AS (
    INSERT INTO connhost_pending (id, namespace, session_id, state, due_ns)
    SELECT id, $2, $3, $6, $14 FROM ins WHERE $16::BIGINT IS NULL
), sess AS (
    INSERT INTO connhost_sessions (namespace, session_id, legacy) SELECT $2, $3, $10 FROM ins
    ON CONFLICT (namespace, session_id) DO NOTHING
)
SELECT count(*), FALSE FROM ins`

// createUnfencedSQL is createSQL that inserts nothing while the session
// is fenced (has a recovery_required execution), the check and the insert
// in one statement (CreateOwnedUnfenced). It returns the count and whether
// the fence refused the execution.
const createUnfencedSQL = `WITH fence AS (
    SELECT EXISTS (
        SELECT 1 FROM connhost_pending WHERE namespace = $2 AND session_id = $3 AND state = 'recovery_required') AS fenced
), ins AS (
    INSERT INTO connhost_executions
        (id, namespace, session_id, tool_call_id, args_digest, state, attempt, events, record, trail, owner_node, owner_epoch,
         created_ns, intent_key, terminal_ns)
    SELECT $1, $2, $3, $4, $5, $6, $7, 1, $8, ARRAY[$9::BYTEA], $11, $12, $13, $15, $16
    WHERE NOT (SELECT fenced FROM fence) AND ($11::TEXT IS NULL OR EXISTS (
        SELECT 1 FROM connhost_nodes WHERE node_id = $11 AND epoch = $12 AND expires_at > clock_timestamp()))
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), pend AS (
    INSERT INTO connhost_pending (id, namespace, session_id, state, due_ns)
    SELECT id, $2, $3, $6, $14 FROM ins WHERE $16::BIGINT IS NULL
), sess AS (
    INSERT INTO connhost_sessions (namespace, session_id, legacy) SELECT $2, $3, $10 FROM ins
    ON CONFLICT (namespace, session_id) DO NOTHING
)
SELECT count(*), (SELECT fenced FROM fence) FROM ins`

// applySQL moves an execution from the version it was checked against
// ($7 events, $8 state, $9 attempt) to the new one, appends its event to
// the trail and keeps its pending row: changed if its state or due time
// ($15, NULL: never due) changed, deleted when it becomes terminal ($5,
// its terminal time, is not NULL). Without a lease ($11, $12 NULL) the
// owner is left as it is. With one, the lease must be live, and the
// execution unowned, owned by that lease, or open to it ($13: at rest, or
// the change is a cancel request); the lease becomes its owner unless $14
// (a cancel request, which leaves the owner as it is). It returns 1 if it
// changed the row, else 0 (someone else changed it first, or the lease
// check failed).
const applySQL = `WITH upd AS (
    UPDATE connhost_executions
    SET state = $2, attempt = $3, events = $4, terminal_ns = $5, record = $6, trail = array_append(trail, $10::BYTEA),
        owner_node = CASE WHEN $14::BOOL THEN owner_node ELSE COALESCE($11, owner_node) END,
        owner_epoch = CASE WHEN $14::BOOL THEN owner_epoch ELSE COALESCE($12, owner_epoch) END
    WHERE id = $1 AND events = $7 AND state = $8 AND attempt = $9
      AND ($11::TEXT IS NULL OR (
          (owner_node IS NULL OR (owner_node = $11 AND owner_epoch = $12) OR $13::BOOL)
          AND EXISTS (SELECT 1 FROM connhost_nodes WHERE node_id = $11 AND epoch = $12 AND expires_at > clock_timestamp())))
    RETURNING id
), pend AS (
    UPDATE connhost_pending p SET state = $2, due_ns = $15::BIGINT FROM upd
    WHERE p.id = upd.id AND $5::BIGINT IS NULL AND (p.state <> $2 OR p.due_ns IS DISTINCT FROM $15::BIGINT)
), done AS (
    DELETE FROM connhost_pending p USING upd WHERE p.id = upd.id AND $5::BIGINT IS NOT NULL
)
SELECT count(*) FROM upd`

// Create implements ledger.Ledger. What it stores is what ledger.Start
// returns; the grammar, ErrInvalid and ErrIllegalTransition are Start's.
// If the id exists nothing is written and Create returns the existing
// record with ErrExists; an id that was pruned is refused with ErrPruned
// and its tombstone. The execution has no owner (see CreateOwned).
func (d *DB) Create(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	return d.create(ctx, nil, false, rec, ev)
}

// create is Create, with a lease CreateOwned; unfenced refuses a fenced
// session (CreateOwnedUnfenced).
func (d *DB) create(ctx context.Context, lease *Lease, unfenced bool, rec ledger.Record, ev ledger.Event) (_ ledger.Record, err error) {
	if err := d.enter(ctx); err != nil {
		return ledger.Record{}, err
	}
	defer d.leave(&err)
	rec, ev, err = ledger.Start(rec, ev, d.opts.Now())
	if err != nil {
		return ledger.Record{}, err
	}
	v, e, err := d.encode(rec, ev)
	if err != nil {
		return ledger.Record{}, err
	}
	node, epoch := leaseArgs(lease)
	var intent []byte
	if rec.DuplicateWindow > 0 {
		k := ledger.IntentKey(rec)
		intent = k[:]
	}
	var terminal *int64
	if rec.State.Terminal() {
		ns := rec.UpdatedAt.UnixNano()
		terminal = &ns
	}
	args := []any{[]byte(rec.ID), []byte(rec.Namespace), []byte(rec.SessionID),
		[]byte(rec.ToolCallID), []byte(rec.ArgsDigest), string(rec.State), rec.Attempt, v, e,
		ledger.StartsLegacySession(rec), node, epoch, rec.CreatedAt.UnixNano(), dueNs(rec), intent, terminal}
	stmt := createSQL
	if unfenced {
		stmt = createUnfencedSQL
	}
	var (
		n       int
		fenced  bool
		earlier []byte // the record of a recent execution of the intent
	)
	if rec.DuplicateWindow > 0 && rec.DuplicateOf == "" {
		err = d.retry(ctx, func() error {
			var err error
			n, fenced, earlier, err = d.createGuarded(ctx, stmt, intent, rec.CreatedAt.Add(-rec.DuplicateWindow).UnixNano(), args)
			return err
		})
	} else {
		err = d.retry(ctx, func() error {
			return d.pool.QueryRow(ctx, stmt, args...).Scan(&n, &fenced)
		})
	}
	if err != nil {
		return ledger.Record{}, fmt.Errorf("pgledger: create execution[%s]: %w", rec.ID, err)
	}
	if earlier != nil {
		var r ledger.Record
		if err := r.UnmarshalBinary(earlier); err != nil {
			return ledger.Record{}, fmt.Errorf("pgledger: create execution[%s]: the earlier execution of its intent: %w", rec.ID, err)
		}
		return r, fmt.Errorf("execution[%s] repeats execution[%s] (%s, created %s): %w",
			rec.ID, r.ID, r.State, r.CreatedAt.Format(time.RFC3339Nano), ledger.ErrDuplicate)
	}
	if n == 1 {
		d.remember(rec)
		d.noteWrite(rec)
		return rec, nil
	}
	existing, err := d.get(ctx, rec.ID)
	switch {
	case err == nil:
		return existing, fmt.Errorf("execution[%s]: %w", rec.ID, ledger.ErrExists)
	case errors.Is(err, ledger.ErrPruned):
		return existing, fmt.Errorf("execution[%s] cannot be created again: %w", rec.ID, ledger.ErrPruned)
	case errors.Is(err, ledger.ErrNotFound) && fenced:
		return ledger.Record{}, fmt.Errorf("execution[%s] not created: session %s/%s has a recovery_required execution: %w",
			rec.ID, rec.Namespace, rec.SessionID, ledger.ErrFenced)
	case errors.Is(err, ledger.ErrNotFound) && lease != nil:
		return ledger.Record{}, fmt.Errorf("execution[%s] not created: node %s epoch %d: %w", rec.ID, lease.Node, lease.Epoch, ErrLeaseExpired)
	case errors.Is(err, ledger.ErrNotFound):
		return ledger.Record{}, fmt.Errorf("pgledger: create execution[%s]: inserted nothing, and there is no record", rec.ID)
	default:
		return ledger.Record{}, err
	}
}

// Statements of a guarded Create (see createGuarded).
const (
	lockIntentSQL = `INSERT INTO connhost_intent_locks (intent_key) VALUES ($1)
    ON CONFLICT (intent_key) DO UPDATE SET intent_key = EXCLUDED.intent_key`
	// existsSQL: whether the id exists.
	existsSQL = `SELECT EXISTS (SELECT 1 FROM connhost_executions WHERE id = $1)`
	// repeatedSQL: the records of the earliest executions of the intent
	// created at or after $2 that succeeded or are not terminal
	// (ledger.CountsAsRepeated), not pruned.
	repeatedSQL = `SELECT record FROM connhost_executions
    WHERE intent_key = $1 AND created_ns >= $2 AND pruned_ns IS NULL AND (state = 'succeeded' OR terminal_ns IS NULL)
    ORDER BY created_ns, id LIMIT $3`
	unlockIntentSQL = `DELETE FROM connhost_intent_locks WHERE intent_key = $1`
)

// createGuarded is the Create of a guarded record (ledger.Record.
// DuplicateWindow): in one transaction it takes the intent's lock row
// (a concurrent guarded Create of the intent waits there until this one
// has committed), looks for a recent execution of the intent, and inserts
// the record (stmt, createSQL or createUnfencedSQL, with args) only if
// there is none or the id exists already (stmt then inserts nothing, and
// Create answers ErrExists). It returns stmt's count and fence, or the
// earlier execution's record. At READ COMMITTED each statement reads what
// was committed before it started, so the look-up after the wait sees the
// other Create's row.
//
// The transaction's seven statements are sent in two pipelined batches,
// two round trips: BEGIN, the lock, the existence check and the look-up;
// then, as they decide, the insert, the unlock and COMMIT, or ROLLBACK.
func (d *DB) createGuarded(ctx context.Context, stmt string, intent []byte, since int64, args []any) (n int, fenced bool, earlier []byte, err error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return 0, false, nil, err
	}
	// A connection left inside the transaction (an error between the
	// batches) is not reused: the pool closes it on Release.
	defer conn.Release()
	var look pgx.Batch
	look.Queue("BEGIN")
	look.Queue(lockIntentSQL, intent)
	var exists bool
	look.Queue(existsSQL, args[0]).QueryRow(func(row pgx.Row) error { return row.Scan(&exists) })
	var candidates [][]byte
	look.Queue(repeatedSQL, intent, since, ledger.MaxRepeatCandidates).Query(func(rows pgx.Rows) error {
		var err error
		candidates, err = pgx.CollectRows(rows, pgx.RowTo[[]byte])
		return err
	})
	if err := conn.SendBatch(ctx, &look).Close(); err != nil {
		return 0, false, nil, err
	}
	if !exists {
		if earlier, err = repeatedOf(candidates); err != nil || earlier != nil {
			_, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			return 0, false, earlier, errors.Join(err, rerr)
		}
	}
	var write pgx.Batch
	write.Queue(stmt, args...).QueryRow(func(row pgx.Row) error { return row.Scan(&n, &fenced) })
	write.Queue(unlockIntentSQL, intent)
	write.Queue("COMMIT")
	if err := conn.SendBatch(ctx, &write).Close(); err != nil {
		return 0, false, nil, err
	}
	return n, fenced, nil, nil
}

// repeatedOf returns the record a guarded Create repeats (see
// ledger.Ledger.Create) among the candidates repeatedSQL found, in its
// order: the earliest counting one that is not itself a duplicate, else
// the earliest; nil when none counts.
func repeatedOf(candidates [][]byte) ([]byte, error) {
	var first []byte
	for _, v := range candidates {
		var r ledger.Record
		if err := r.UnmarshalBinary(v); err != nil {
			return nil, err
		}
		if r.DuplicateOf == "" {
			return v, nil
		}
		if first == nil {
			first = v
		}
	}
	return first, nil
}

// encode returns the record and event values, refusing a record larger
// than Options.MaxRecordBytes.
func (d *DB) encode(rec ledger.Record, ev ledger.Event) ([]byte, []byte, error) {
	v, err := rec.MarshalBinary()
	if err != nil {
		return nil, nil, err
	}
	if len(v) > d.opts.MaxRecordBytes {
		return nil, nil, fmt.Errorf("execution[%s] is %d bytes, limit %d: %w", rec.ID, len(v), d.opts.MaxRecordBytes, ledger.ErrTooLarge)
	}
	e, err := ev.MarshalBinary()
	if err != nil {
		return nil, nil, err
	}
	return v, e, nil
}

// dueNs is the due_ns column of rec: its due time (ledger.DueAt), or
// NULL.
func dueNs(rec ledger.Record) *int64 {
	t, ok := ledger.DueAt(rec)
	if !ok {
		return nil
	}
	ns := ledger.DueUnixNano(t)
	return &ns
}

func leaseArgs(l *Lease) (node *string, epoch *int64) {
	if l == nil {
		return nil, nil
	}
	return &l.Node, &l.Epoch
}

// Apply implements ledger.Ledger; the grammar it enforces is ledger.Step's
// (grammar.go), and what it stores is what Step returns. The change is a
// compare-and-set on the version the grammar was checked against: if
// another writer (on this node or another) changed the record since, the
// stored record is read again and checked again, so a stale writer gets
// the grammar's answer for the record as it now is (ErrConflict,
// ErrTerminal, …) and never overwrites a newer state. The owner is left as
// it is (see ApplyOwned). A lazy transition (Transition.Lazy, which the
// grammar admits only where recovery re-derives a loss) is committed like
// any other, durable before Apply returns: stronger than lazy asks, and
// PostgreSQL's commits are group-flushed under concurrency anyway.
func (d *DB) Apply(ctx context.Context, id string, t ledger.Transition) (ledger.Record, error) {
	return d.apply(ctx, nil, id, t)
}

// maxCASRounds bounds how often Apply reads a record again because another
// writer changed it between its read and its compare-and-set.
const maxCASRounds = 100

func (d *DB) apply(ctx context.Context, lease *Lease, id string, t ledger.Transition) (_ ledger.Record, err error) {
	if err := d.enter(ctx); err != nil {
		return ledger.Record{}, err
	}
	defer d.leave(&err)
	old, cached := d.cached(id)
	if !cached {
		var err error
		if old, err = d.get(ctx, id); err != nil {
			return ledger.Record{}, err
		}
	}
	node, epoch := leaseArgs(lease)
	for range maxCASRounds {
		rec, ev, err := ledger.Step(old, t, d.opts.Now())
		if err != nil && cached {
			// The cached version may be stale: refuse only what the
			// stored record refuses.
			d.forget(id)
			if old, err = d.get(ctx, id); err != nil {
				return ledger.Record{}, err
			}
			cached = false
			continue
		}
		if err != nil {
			return ledger.Record{}, err
		}
		v, e, err := d.encode(rec, ev)
		if err != nil {
			return ledger.Record{}, err
		}
		var terminal *int64
		if rec.State.Terminal() {
			ns := rec.UpdatedAt.UnixNano()
			terminal = &ns
		}
		// An execution at rest has no attempt in flight: any live lease
		// may take it. A cancel request leaves the attempt to its owner.
		keep := cancelRequest(t)
		open := old.State != ledger.StateDispatched || keep
		var n int
		err = d.retry(ctx, func() error {
			return d.pool.QueryRow(ctx, applySQL, []byte(id), string(rec.State), rec.Attempt, int64(rec.Events), terminal, v,
				int64(old.Events), string(old.State), old.Attempt, e, node, epoch, open, keep, dueNs(rec)).Scan(&n)
		})
		if err != nil {
			d.forget(id)
			return ledger.Record{}, fmt.Errorf("pgledger: apply to execution[%s]: %w", id, err)
		}
		if n == 1 {
			d.remember(rec)
			d.noteWrite(rec)
			return rec, nil
		}
		// Refused: the record changed since old was read, or (with a
		// lease) the lease or the owner does not allow the write.
		d.forget(id)
		if lease != nil {
			if old, err = d.checkOwner(ctx, *lease, id, t); err != nil {
				return ledger.Record{}, err
			}
		} else if old, err = d.get(ctx, id); err != nil {
			return ledger.Record{}, err
		}
		cached = false
	}
	return ledger.Record{}, fmt.Errorf("execution[%s] changed under %d consecutive attempts to apply %s → %s: %w",
		id, maxCASRounds, t.From, t.To, ledger.ErrConflict)
}

// pruneSQL turns up to 512 executions created and terminal before $1
// into tombstones (the row keeps its id and key columns, loses its record
// and events), oldest first, from the creation index: an execution
// becomes terminal after its creation (by its writers' clocks: one whose
// node's clock ran ahead is pruned once the creation time it recorded is
// older than $1 too). The rows are locked first, so that two nodes
// pruning at once wait for each other instead of interleaving.
const pruneSQL = `WITH victims AS (
    SELECT id FROM connhost_executions
    WHERE created_ns < $1 AND pruned_ns IS NULL AND terminal_ns < $1
    ORDER BY created_ns, id
    LIMIT 512
    FOR UPDATE
)
UPDATE connhost_executions x SET pruned_ns = $2, record = NULL, trail = NULL
FROM victims v WHERE x.id = v.id`

// Prune implements ledger.Ledger. It walks the creation index up to
// olderThan and, 512 executions per transaction, replaces each record and
// its events with its tombstone; a crash between transactions
// leaves a prefix of the work done and the rest for the next Prune. Get,
// Apply and Events then answer ErrPruned, and Create on the id is refused.
// It first deletes the console sessions that expired before olderThan.
func (d *DB) Prune(ctx context.Context, olderThan time.Time) (_ int, err error) {
	if err := d.enter(ctx); err != nil {
		return 0, err
	}
	defer d.leave(&err)
	if err := d.pruneConsole(ctx, olderThan); err != nil {
		return 0, err
	}
	pruned := 0
	now := d.opts.Now().UnixNano()
	for {
		if err := ctx.Err(); err != nil {
			return pruned, err
		}
		var n int64
		err := d.retry(ctx, func() error {
			tag, err := d.pool.Exec(ctx, pruneSQL, olderThan.UnixNano(), now)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return pruned, fmt.Errorf("pgledger: prune: %w", err)
		}
		if n == 0 {
			return pruned, nil
		}
		pruned += int(n)
	}
}
