package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of a Fleet ledger. Callers compare with errors.Is.
var (
	// ErrLeaseExpired: the writer's lease has expired or was superseded
	// by a newer epoch of its node. Nothing was written; the node must
	// stop dispatching and register again.
	ErrLeaseExpired = errors.New("ledger: lease expired")
	// ErrNotOwner: the execution has an attempt in flight that another
	// node's lease owns. Nothing was written.
	ErrNotOwner = errors.New("ledger: execution owned by another node")
	// ErrLeaseSuperseded comes with ErrLeaseExpired from RenewLease when
	// the lease ended because a newer epoch of its node was registered
	// (a restart of the node, or another process under its id).
	ErrLeaseSuperseded = errors.New("ledger: lease superseded")
	// ErrUnavailable: the shared ledger's database could not be reached
	// (it is down, restarting or cut off). Whether a write in progress
	// landed is unknown; what the ledger holds decides once it is back.
	ErrUnavailable = errors.New("ledger: unavailable")
)

// Lease is a node's right to run executions on a Fleet ledger: the node's
// id, its epoch (the fencing token: every registration of the node starts
// a new one) and when it expires unless renewed, by the ledger's clock.
type Lease struct {
	Node  string
	Epoch int64
	// Expires is the expiry the ledger recorded, by its own clock.
	Expires time.Time
	// Superseded, on a lease RegisterNode returned, reports that the
	// registration ended a live lease of the same node: that of a former
	// incarnation that did not release it (it crashed), or that of
	// another process running under the same node id.
	Superseded bool
}

func (l Lease) String() string { return fmt.Sprintf("node %s epoch %d", l.Node, l.Epoch) }

// Claim is one execution ClaimExpired took: the record as claimed and the
// gone lease that owned it.
type Claim struct {
	Record Record
	From   Lease
}

// Fleet is a Ledger that several nodes (connhost processes, on one machine
// or many) share. Each node holds a lease it renews; each execution it
// dispatches records it as its owner, with the lease's epoch. When a
// node's lease expires, a live node claims its pending executions and
// applies the recovery decision table to them, and the dead node's late
// writes are refused by the epoch.
//
// The owned writes (CreateOwned, ApplyOwned) succeed only while the
// writer's lease is live (else ErrLeaseExpired). An execution with an
// attempt in flight (dispatched) may be changed only by the lease that
// owns it (else ErrNotOwner), except to record a cancel request, which
// leaves the owner as it is; an execution at rest (awaiting approval,
// approved, waiting for a retry, recovery_required) may be changed by any
// live lease, which becomes its owner. So an approval given through one
// node is consumed by whichever node dispatches, and an attempt is never
// decided twice.
//
// package ledger/pgledger implements it on PostgreSQL. The executor runs
// in fleet mode when its ledger implements Fleet, and refuses one that
// has RegisterNode but not every other method (written against an
// earlier Fleet), rather than run it as a single node's ledger.
type Fleet interface {
	Ledger
	// RegisterNode starts a new lease for node, valid for ttl: a new
	// epoch, which fences out every earlier epoch of the node at once
	// (Lease.Superseded says whether the node's lease was live).
	RegisterNode(ctx context.Context, node string, ttl time.Duration) (Lease, error)
	// RenewLease extends a live lease to ttl from now, or fails with
	// ErrLeaseExpired if it expired or was superseded.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease ends a lease now (a node shutting down), so that live
	// nodes may claim its executions without waiting for its expiry. A
	// lease already gone is not an error.
	ReleaseLease(ctx context.Context, l Lease) error
	// ClaimExpired makes l, which must be live, the owner of the pending
	// executions of every lease that is gone, each execution going to
	// exactly one claimer, and returns them with the lease each was taken
	// from. A recovery_required execution is not claimed: it waits for
	// an operator, whom any node may serve, so claiming it would only move
	// it from node to node at every lease loss.
	ClaimExpired(ctx context.Context, l Lease) ([]Claim, error)
	// CreateOwned is Create by the holder of l, which becomes the owner.
	CreateOwned(ctx context.Context, l Lease, rec Record, ev Event) (Record, error)
	// CreateOwnedUnfenced is CreateOwned of a new call: it also refuses,
	// with ErrFenced and writing nothing, when rec's session has a
	// recovery_required execution (Fenced would list one) and rec.ID is
	// not recorded; a recorded id is ErrExists, fenced or not. The check
	// and the insert are one statement, which sees every fence committed
	// before it: an executor on a shared ledger saves the round trip of a
	// Fenced before each new call, and the gap between the two.
	CreateOwnedUnfenced(ctx context.Context, l Lease, rec Record, ev Event) (Record, error)
	// ApplyOwned is Apply by the holder of l, fenced as the type's comment
	// says.
	ApplyOwned(ctx context.Context, l Lease, id string, t Transition) (Record, error)
	// Owner returns the lease that owns an execution (zero if none) and
	// whether that lease is live now. Unknown ids are ErrNotFound.
	Owner(ctx context.Context, id string) (owner Lease, live bool, err error)
	// PendingOwned is Pending restricted to the executions l owns, those
	// no lease owns and the recovery_required ones of gone leases.
	PendingOwned(ctx context.Context, l Lease, fn func(Record) error) error
	// DueOwned is Due restricted to the executions l owns and those no
	// lease owns.
	DueOwned(ctx context.Context, l Lease, until time.Time, fn func(id string) error) error
}
