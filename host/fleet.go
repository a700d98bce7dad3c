package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connhost/connhost/internal/lease"
	"github.com/connhost/connhost/ledger"
)

// Fleet mode. When Options.Ledger implements ledger.Fleet (the PostgreSQL
// ledger), the executor is one node of a fleet sharing that ledger. Open
// registers the node (Options.Node) and writes through the ledger that
// package internal/lease binds to the node's renewed lease: every write is
// fenced by it, a dispatch needs a lease this process knows to be live,
// and the executor's own events name the lease that wrote them
// ("executor@node#epoch", "recovery@node#epoch"). What else the executor
// must know of the fleet is what its store answers (see store): whether
// the node may take work (Health), the context a connector call runs
// under (Bind: cancelled once the lease is lost), whether a dispatched
// attempt without an outcome is another live node's call in flight
// (Elsewhere: a live call then waits for it, polling up to
// MaxInlineRetryWait, and answers pending), and the claim of the
// executions of gone leases that begins every recovery pass (Claim). On a
// single-node ledger every answer is trivial (solo).
//
// On a shared ledger approvals are also signed and verified (see
// signature.go): that is about who else can write the ledger, not about
// leases.

// DefaultLeaseTTL is the default value of Options.LeaseTTL.
const DefaultLeaseTTL = lease.DefaultTTL

// ErrLeaseLost: the node holds no live lease on the shared ledger (it
// could not renew it in time, or another process registered the same node
// id), so it dispatches nothing until it has registered again.
var ErrLeaseLost = lease.ErrLost

// ErrNodeInUse: another live process runs under this node's id on the
// shared ledger, and this one, the newer of the two, gave way for good
// (see Executor.Fatal). It matches ErrLeaseLost too.
var ErrNodeInUse = lease.ErrNodeInUse

// elsewherePoll is how often a live call re-reads an execution whose
// attempt another live node is running.
const elsewherePoll = 200 * time.Millisecond

// FleetObserver receives the fleet events of an executor on a
// ledger.Fleet. An Options.Observer that also implements it gets them;
// the same rules as for Observer apply.
type FleetObserver = lease.Observer

// store is the ledger as the executor uses it: a ledger.Ledger, plus what
// the executor asks of the node it runs as. *lease.Ledger is the store of
// a fleet node; solo is a single-node ledger's.
type store interface {
	ledger.Ledger
	// ApplyFrom is Apply of t to rec, the version the executor read (a
	// fleet ledger reads a write whose fate is unknown again from it).
	ApplyFrom(ctx context.Context, rec ledger.Record, t ledger.Transition) (ledger.Record, error)
	// CreateUnfenced is Create of a new call, refused with
	// ledger.ErrFenced (nothing written) while its session has a
	// recovery_required execution and the id is not recorded; a recorded
	// id is ErrExists, fenced or not. On a shared ledger the check is in
	// the insert's statement, which saves the new call a round trip.
	CreateUnfenced(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error)
	// Health is nil while the executor may take new work.
	Health() error
	// Lease returns the node's lease (ok false without one).
	Lease() (l ledger.Lease, live, ok bool)
	// Bind returns the context a connector call runs under, cancelled
	// once the node may no longer run it; done reports whether that
	// happened. It fails when the node may not call connectors now.
	Bind(ctx context.Context) (bound context.Context, done func() (lost bool), err error)
	// Elsewhere says whether the attempt in flight of the dispatched
	// record rec is another live node's (its lease), and returns the
	// record to decide on.
	Elsewhere(ctx context.Context, rec ledger.Record) (ledger.Record, *ledger.Lease, error)
	// Claim takes over the pending executions of the nodes that are gone
	// and returns how many.
	Claim(ctx context.Context) (int, error)
	// Fatal is closed once the node can never take work again.
	Fatal() <-chan struct{}
}

// solo is the store of a ledger only this process writes: it is always
// healthy, runs connector calls as they come, owns every attempt and has
// nothing to claim. Its Close does nothing; the executor closes the
// ledger it owns.
type solo struct{ ledger.Ledger }

func (s solo) ApplyFrom(ctx context.Context, rec ledger.Record, t ledger.Transition) (ledger.Record, error) {
	return s.Apply(ctx, rec.ID, t)
}

// CreateUnfenced checks the fence, then creates: the Pebble ledger, the
// single-node one, counts each session's fences in memory, so the check
// reads nothing while the session has none.
func (s solo) CreateUnfenced(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	fenced, err := s.Fenced(ctx, rec.Namespace, rec.SessionID)
	if err != nil {
		return ledger.Record{}, err
	}
	if len(fenced) == 0 {
		return s.Create(ctx, rec, ev)
	}
	switch _, err := s.Get(ctx, rec.ID); {
	case err == nil || errors.Is(err, ledger.ErrPruned):
		// Recorded: Create answers it (ErrExists, ErrPruned, with the
		// record) and writes nothing.
		return s.Create(ctx, rec, ev)
	case errors.Is(err, ledger.ErrNotFound):
		return ledger.Record{}, fmt.Errorf("execution[%s] not created: session %s/%s has a recovery_required execution: %w",
			rec.ID, rec.Namespace, rec.SessionID, ledger.ErrFenced)
	default:
		return ledger.Record{}, err
	}
}

func (solo) Health() error                      { return nil }
func (solo) Lease() (ledger.Lease, bool, bool)  { return ledger.Lease{}, false, false }
func (solo) Claim(context.Context) (int, error) { return 0, nil }
func (solo) Close() error                       { return nil }
func (solo) Fatal() <-chan struct{}             { return nil }
func (solo) Bind(ctx context.Context) (context.Context, func() bool, error) {
	return ctx, func() bool { return false }, nil
}
func (solo) Elsewhere(_ context.Context, rec ledger.Record) (ledger.Record, *ledger.Lease, error) {
	return rec, nil, nil
}

var (
	_ store = solo{}
	_ store = (*lease.Ledger)(nil)
)

// Health reports whether the executor can take new work: nil on a
// single-node ledger, and on a fleet ledger while the node holds a live
// lease (else an error matching ErrLeaseLost).
func (e *Executor) Health() error { return e.led.Health() }

// NodeLease returns the node's current lease on a fleet ledger and whether
// it is live (renewed within the lease TTL); ok is false on a single-node
// ledger.
func (e *Executor) NodeLease() (l ledger.Lease, live bool, ok bool) { return e.led.Lease() }

// Fatal is closed when the executor can never take work again: on a fleet
// ledger, when another live process runs under its node id and this one,
// the newer, gave way to it (Health then fails with ErrNodeInUse). A
// server exits then. On a single-node ledger it is never closed.
func (e *Executor) Fatal() <-chan struct{} { return e.led.Fatal() }
