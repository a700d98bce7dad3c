package pgledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connhost/connhost/ledger"
)

// Fleet mode. Each node holds a lease: a row of connhost_nodes with an
// epoch and an expiry by the database's clock (every node reads the same
// clock, so no node's clock skew can make a lease look live to one node
// and expired to another). The node renews it in the background; when it
// cannot, it must stop dispatching, because after expiry any live node
// may claim its pending executions. Each execution a node creates or
// changes with CreateOwned or ApplyOwned records the node and its epoch as
// its owner, and those writes succeed only while that lease is live; an
// execution with an attempt in flight (dispatched) is changed only by its
// owner (a cancel request aside), so the epoch is the fencing token that
// refuses a stale node's late writes. An execution at rest (awaiting
// approval, approved, retry_wait, recovery_required) has nothing in
// flight, and any live lease may take it with its write. A node that
// restarts registers again and gets a new epoch, so its former
// incarnation's executions are claimable like a dead node's (by itself
// too).

// Lease is a node's claim to run executions (ledger.Lease): its id, its
// epoch (the fencing token) and when it expires unless renewed.
type Lease = ledger.Lease

// RegisterNode starts a new lease for node, valid for ttl: epoch 1 for a
// new node, else one more than its last epoch, whatever state that lease
// is in (Superseded says whether it was live). Every write fenced by an
// earlier epoch of the node is refused from then on.
func (d *DB) RegisterNode(ctx context.Context, node string, ttl time.Duration) (_ Lease, err error) {
	if err := d.enter(ctx); err != nil {
		return Lease{}, err
	}
	defer d.leave(&err)
	if node == "" || ttl <= 0 {
		return Lease{}, fmt.Errorf("%w: RegisterNode needs a node id and a ttl > 0 (got %q, %s)", ledger.ErrInvalid, node, ttl)
	}
	l := Lease{Node: node}
	err = d.retry(ctx, func() error {
		return d.pool.QueryRow(ctx, `WITH prev AS (
    SELECT expires_at > clock_timestamp() AS live FROM connhost_nodes WHERE node_id = $1
)
INSERT INTO connhost_nodes (node_id, epoch, expires_at)
VALUES ($1, 1, clock_timestamp() + $2 * INTERVAL '1 microsecond')
ON CONFLICT (node_id) DO UPDATE SET epoch = connhost_nodes.epoch + 1, expires_at = excluded.expires_at
RETURNING epoch, expires_at, COALESCE((SELECT live FROM prev), false)`, node, ttl.Microseconds()).Scan(&l.Epoch, &l.Expires, &l.Superseded)
	})
	if err != nil {
		return Lease{}, fmt.Errorf("pgledger: register node %s: %w", node, err)
	}
	return l, nil
}

// RenewLease extends a live lease to ttl from now. A lease that expired
// or was superseded by a newer epoch cannot be renewed (another node may
// have claimed its executions already): ErrLeaseExpired (with
// ledger.ErrLeaseSuperseded when a newer epoch exists), and the node must
// stop dispatching and register again.
func (d *DB) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (_ Lease, err error) {
	if err := d.enter(ctx); err != nil {
		return Lease{}, err
	}
	defer d.leave(&err)
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("%w: RenewLease ttl %s, must be > 0", ledger.ErrInvalid, ttl)
	}
	err = d.retry(ctx, func() error {
		return d.pool.QueryRow(ctx, `UPDATE connhost_nodes SET expires_at = clock_timestamp() + $3 * INTERVAL '1 microsecond'
WHERE node_id = $1 AND epoch = $2 AND expires_at > clock_timestamp()
RETURNING expires_at`, l.Node, l.Epoch, ttl.Microseconds()).Scan(&l.Expires)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		var cur int64
		if err := d.pool.QueryRow(ctx, `SELECT epoch FROM connhost_nodes WHERE node_id = $1`, l.Node).Scan(&cur); err == nil && cur > l.Epoch {
			return Lease{}, fmt.Errorf("renew %s: %w (%w by epoch %d)", l, ErrLeaseExpired, ledger.ErrLeaseSuperseded, cur)
		}
		return Lease{}, fmt.Errorf("renew %s: %w", l, ErrLeaseExpired)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("pgledger: renew %s: %w", l, err)
	}
	return l, nil
}

// ReleaseLease ends l now, so that live nodes may claim its executions
// at once (a node shutting down). A lease already gone is left as it is.
func (d *DB) ReleaseLease(ctx context.Context, l Lease) (err error) {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.leave(&err)
	err = d.retry(ctx, func() error {
		_, err := d.pool.Exec(ctx, `UPDATE connhost_nodes SET expires_at = clock_timestamp()
WHERE node_id = $1 AND epoch = $2 AND expires_at > clock_timestamp()`, l.Node, l.Epoch)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgledger: release %s: %w", l, err)
	}
	return nil
}

// claimSQL makes $1 at epoch $2 (a live lease) the owner of every pending
// execution whose owner's lease is gone: expired, superseded by a newer
// epoch of its node, or never registered. Each row changes only if it
// still has the owner the candidate scan saw (a compare-and-set on the
// owner), so of two nodes claiming at once, each execution goes to one.
const claimSQL = `WITH me AS (
    SELECT 1 FROM connhost_nodes WHERE node_id = $1 AND epoch = $2 AND expires_at > clock_timestamp()
), cand AS (
    SELECT x.id, x.owner_node, x.owner_epoch
    FROM connhost_pending p CROSS JOIN LATERAL (` + executionOf + `) x
    LEFT JOIN connhost_nodes n ON n.node_id = x.owner_node
    WHERE x.terminal_ns IS NULL AND x.owner_node IS NOT NULL AND x.state <> 'recovery_required'
      AND (n.node_id IS NULL OR n.epoch <> x.owner_epoch OR n.expires_at <= clock_timestamp())
)
UPDATE connhost_executions x SET owner_node = $1, owner_epoch = $2
FROM cand c
WHERE x.id = c.id AND x.owner_node = c.owner_node AND x.owner_epoch = c.owner_epoch
  AND x.terminal_ns IS NULL AND EXISTS (SELECT 1 FROM me)
RETURNING x.id, x.record, c.owner_node, c.owner_epoch`

// ClaimExpired makes l, which must be live, the owner of the pending
// executions of every node whose lease is gone (expired or superseded),
// but those recovery_required (they wait for an operator, whom any node
// serves; PendingOwned lists them to every node),
// atomically per execution: of two nodes claiming at once, each execution
// goes to exactly one. It returns the claimed records with the lease each
// was taken from; the caller applies the recovery decision table to them
// (with ApplyOwned). A lease that is not live claims nothing and gets
// ErrLeaseExpired.
func (d *DB) ClaimExpired(ctx context.Context, l Lease) (_ []ledger.Claim, err error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.leave(&err)
	var claims []ledger.Claim
	err = d.retry(ctx, func() error {
		claims = claims[:0]
		rows, err := d.pool.Query(ctx, claimSQL, l.Node, l.Epoch)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id, v []byte
				c     ledger.Claim
			)
			if err := rows.Scan(&id, &v, &c.From.Node, &c.From.Epoch); err != nil {
				return err
			}
			if c.Record, err = decode(string(id), v); err != nil {
				// Claimed, but unreadable: PendingOwned reports it to
				// this node's recovery, which leaves it as it is.
				d.opts.Logger.Error("pgledger: a claimed execution's record does not decode; it is left as it is", "execution", string(id), "error", err)
				continue
			}
			claims = append(claims, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("pgledger: claim for %s: %w", l, err)
	}
	if len(claims) == 0 {
		live, err := d.live(ctx, l)
		if err != nil {
			return nil, err
		}
		if !live {
			return nil, fmt.Errorf("claim for %s: %w", l, ErrLeaseExpired)
		}
	}
	for _, c := range claims {
		d.forget(c.Record.ID) // the owner changed; the record did not, but be exact
	}
	return claims, nil
}

func (d *DB) live(ctx context.Context, l Lease) (bool, error) {
	var live bool
	err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM connhost_nodes
WHERE node_id = $1 AND epoch = $2 AND expires_at > clock_timestamp())`, l.Node, l.Epoch).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("pgledger: read lease of %s: %w", l, err)
	}
	return live, nil
}

// CreateOwned is Create by the node holding l: the execution's owner is l.
// It fails with ErrLeaseExpired (writing nothing) unless l is live; an
// existing id is ErrExists as for Create.
func (d *DB) CreateOwned(ctx context.Context, l Lease, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	return d.create(ctx, &l, false, rec, ev)
}

// CreateOwnedUnfenced implements ledger.Fleet: CreateOwned, refused with
// ErrFenced in a fenced session, in the same statement.
func (d *DB) CreateOwnedUnfenced(ctx context.Context, l Lease, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	return d.create(ctx, &l, true, rec, ev)
}

// ApplyOwned is Apply by the node holding l, fenced by l: it changes the
// execution only while l is live (else ErrLeaseExpired) and, if the
// execution has an attempt in flight (dispatched), only if it is unowned
// or owned by l (else ErrNotOwner, e.g. after another node claimed it),
// unless t is a cancel request. l becomes the owner, except of a cancel
// request. The grammar's errors are Apply's.
func (d *DB) ApplyOwned(ctx context.Context, l Lease, id string, t ledger.Transition) (ledger.Record, error) {
	return d.apply(ctx, &l, id, t)
}

// Owner implements ledger.Fleet: the lease that owns an execution (its
// node, epoch and, if that epoch is its node's current one, its expiry)
// and whether it is live now, by the database's clock; a zero Lease if no
// node owns it. Unknown ids are ErrNotFound.
func (d *DB) Owner(ctx context.Context, id string) (owner Lease, live bool, err error) {
	if err := d.enter(ctx); err != nil {
		return Lease{}, false, err
	}
	defer d.leave(&err)
	return d.owner(ctx, id)
}

func (d *DB) owner(ctx context.Context, id string) (Lease, bool, error) {
	var (
		n       *string
		e       *int64
		expires *time.Time
		live    *bool
	)
	err := d.pool.QueryRow(ctx, `SELECT x.owner_node, x.owner_epoch, n.expires_at, n.expires_at > clock_timestamp()
FROM connhost_executions x LEFT JOIN connhost_nodes n ON n.node_id = x.owner_node AND n.epoch = x.owner_epoch
WHERE x.id = $1`, []byte(id)).Scan(&n, &e, &expires, &live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Lease{}, false, fmt.Errorf("execution[%s]: %w", id, ledger.ErrNotFound)
	case err != nil:
		return Lease{}, false, fmt.Errorf("pgledger: read owner of execution[%s]: %w", id, err)
	case n == nil:
		return Lease{}, false, nil
	}
	l := Lease{Node: *n, Epoch: *e}
	if expires != nil {
		l.Expires = *expires
	}
	return l, live != nil && *live, nil
}

// PendingOwned implements ledger.Fleet: Pending restricted to the
// executions l owns, those no node owns and the recovery_required ones of
// gone leases (ClaimExpired leaves them), in id order, in one statement.
// Records that do not decode are skipped and reported as Pending does.
func (d *DB) PendingOwned(ctx context.Context, l Lease, fn func(ledger.Record) error) (err error) {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.leave(&err)
	return d.scanPending(ctx, fn, `SELECT x.id, x.record FROM connhost_pending p CROSS JOIN LATERAL (`+executionOf+`) x
LEFT JOIN connhost_nodes n ON n.node_id = x.owner_node
WHERE (x.owner_node IS NULL OR (x.owner_node = $1 AND x.owner_epoch = $2)
  OR (x.state = 'recovery_required' AND (n.node_id IS NULL OR n.epoch <> x.owner_epoch OR n.expires_at <= clock_timestamp())))
ORDER BY p.id`, l.Node, l.Epoch)
}

// DueOwned implements ledger.Fleet: Due restricted to the executions l
// owns and those no node owns, in due order, in one statement.
func (d *DB) DueOwned(ctx context.Context, l Lease, until time.Time, fn func(id string) error) (err error) {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.leave(&err)
	return d.scanIDs(ctx, fn, `SELECT p.id FROM connhost_pending p CROSS JOIN LATERAL (`+executionOf+`) x
WHERE p.due_ns <= $1 AND (x.owner_node IS NULL OR (x.owner_node = $2 AND x.owner_epoch = $3)) ORDER BY p.due_ns, p.id`, ledger.DueUnixNano(until), l.Node, l.Epoch)
}

// checkOwner explains why an owned write of t by l to id was refused:
// the lease is not live (ErrLeaseExpired), or the execution has an attempt
// in flight that another lease owns and t is not a cancel request
// (ErrNotOwner); otherwise the record changed, and checkOwner returns it
// as stored now for the caller to check again.
func (d *DB) checkOwner(ctx context.Context, l Lease, id string, t ledger.Transition) (ledger.Record, error) {
	live, err := d.live(ctx, l)
	if err != nil {
		return ledger.Record{}, err
	}
	if !live {
		return ledger.Record{}, fmt.Errorf("execution[%s] not changed: %s: %w", id, l, ErrLeaseExpired)
	}
	rec, err := d.get(ctx, id)
	if err != nil {
		return ledger.Record{}, err
	}
	owner, _, err := d.owner(ctx, id)
	if err != nil {
		return ledger.Record{}, err
	}
	if owner.Node != "" && (owner.Node != l.Node || owner.Epoch != l.Epoch) && rec.State == ledger.StateDispatched && !cancelRequest(t) {
		return ledger.Record{}, fmt.Errorf("execution[%s] has attempt %d in flight, owned by %s, not %s: %w", id, rec.Attempt, owner, l, ErrNotOwner)
	}
	return rec, nil
}

// cancelRequest reports whether t records a cancel request on the attempt
// in flight (the one change of a dispatched execution its owner need not
// make, see ledger.Fleet).
func cancelRequest(t ledger.Transition) bool {
	return t.From == ledger.StateDispatched && t.To == ledger.StateDispatched && t.Attempt == t.FromAttempt
}
