package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/connhost/connhost/ledger"
)

var _ ledger.Ledger = (*Ledger)(nil)

// Create is the fleet's CreateOwned under the node's lease, which becomes
// the execution's owner; a dispatch needs a live one. An executor's own
// actor ("executor", "recovery") is named after the lease.
func (n *Ledger) Create(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	return n.create(ctx, n.fleet.CreateOwned, rec, ev)
}

// CreateUnfenced is Create of a new call, refused with ledger.ErrFenced
// in a fenced session: the fleet's CreateOwnedUnfenced, one statement for
// the fence check and the insert.
func (n *Ledger) CreateUnfenced(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	return n.create(ctx, n.fleet.CreateOwnedUnfenced, rec, ev)
}

func (n *Ledger) create(ctx context.Context, createOwned func(context.Context, ledger.Lease, ledger.Record, ledger.Event) (ledger.Record, error),
	rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	h, err := n.lease(rec.State == ledger.StateDispatched)
	if err != nil {
		return ledger.Record{}, err
	}
	ev.Actor = actorOf(ev.Actor, h.l)
	created, err := createOwned(ctx, h.l, rec, ev)
	if err != nil && !definite(err) {
		// The connection may have failed after the commit.
		if got, ok := n.landed(ctx, rec.ID, 0, ev, rec.State); ok {
			created, err = got, nil
		}
	}
	if err != nil {
		return created, n.refused(h, err)
	}
	return created, nil
}

// Apply is ApplyFrom the record as the ledger holds it now: one read more
// than ApplyFrom, for callers that did not read it.
func (n *Ledger) Apply(ctx context.Context, id string, t ledger.Transition) (ledger.Record, error) {
	rec, err := n.fleet.Get(ctx, id)
	if err != nil {
		return ledger.Record{}, err
	}
	return n.ApplyFrom(ctx, rec, t)
}

// ApplyFrom is the fleet's ApplyOwned of t to rec, the version the caller
// read, under the node's lease; a dispatch needs a live one. The first
// decision on an execution this node claimed carries a takeover note
// naming the lease it was taken from. On failure it returns rec.
func (n *Ledger) ApplyFrom(ctx context.Context, rec ledger.Record, t ledger.Transition) (ledger.Record, error) {
	dispatch := t.To == ledger.StateDispatched && t.Attempt > t.FromAttempt
	h, err := n.lease(dispatch)
	if err != nil {
		return rec, err
	}
	own := t.Event.Actor == "executor" || t.Event.Actor == "recovery"
	recovering := t.Event.Actor == "recovery" && rec.State == ledger.StateDispatched
	t.Event.Actor = actorOf(t.Event.Actor, h.l)
	var (
		tk   takeover
		took bool
	)
	if own {
		tk, took = n.takeoverOf(rec)
	}
	if !took && recovering {
		// A claim this node made but whose answer it never saw (the
		// claim is one statement; its result can be lost with the
		// connection) still shows in the trail: the attempt's dispatch
		// names the lease it ran under.
		tk, took = n.dispatchedUnder(ctx, rec, h.l)
	}
	if took {
		note := fmt.Sprintf("taken over from %s (lease gone) by %s", tk.from, h.l)
		if t.Event.Reason == "" {
			t.Event.Reason = note
		} else {
			t.Event.Reason += "; " + note
		}
	}
	out, err := n.fleet.ApplyOwned(ctx, h.l, rec.ID, t)
	if err != nil && !definite(err) {
		// The connection may have failed after the commit: the write may
		// have landed. Decide on what the ledger holds.
		if got, ok := n.landed(ctx, rec.ID, rec.Events, t.Event, t.To); ok {
			out, err = got, nil
		}
	}
	if err != nil {
		return rec, n.refused(h, err)
	}
	if took {
		n.tookOver(rec.ID)
		n.obs.TookOver(t.Event.Decision)
	}
	return out, nil
}

// Get reads the fleet ledger.
func (n *Ledger) Get(ctx context.Context, id string) (ledger.Record, error) {
	return n.fleet.Get(ctx, id)
}

// Events reads the fleet ledger.
func (n *Ledger) Events(ctx context.Context, id string) ([]ledger.Event, error) {
	return n.fleet.Events(ctx, id)
}

// Pending calls fn for every non-terminal execution this node owns, and
// those no lease owns; never another node's. Claim takes those of gone
// leases first.
func (n *Ledger) Pending(ctx context.Context, fn func(ledger.Record) error) error {
	h, err := n.lease(false)
	if err != nil {
		return err
	}
	return n.fleet.PendingOwned(ctx, h.l, fn)
}

// Due is the fleet's Due restricted, as Pending is, to this node's
// executions and nobody's.
func (n *Ledger) Due(ctx context.Context, until time.Time, fn func(id string) error) error {
	h, err := n.lease(false)
	if err != nil {
		return err
	}
	return n.fleet.DueOwned(ctx, h.l, until, fn)
}

// AwaitingApproval reads the fleet ledger.
func (n *Ledger) AwaitingApproval(ctx context.Context, namespace string) (int, error) {
	return n.fleet.AwaitingApproval(ctx, namespace)
}

// Fenced reads the fleet ledger.
func (n *Ledger) Fenced(ctx context.Context, namespace, sessionID string) ([]ledger.Record, error) {
	return n.fleet.Fenced(ctx, namespace, sessionID)
}

// SessionKnown reads the fleet ledger.
func (n *Ledger) SessionKnown(ctx context.Context, namespace, sessionID string) (bool, error) {
	return n.fleet.SessionKnown(ctx, namespace, sessionID)
}

// List reads the fleet ledger.
func (n *Ledger) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	return n.fleet.List(ctx, f)
}

// Prune prunes the fleet ledger.
func (n *Ledger) Prune(ctx context.Context, olderThan time.Time) (int, error) {
	return n.fleet.Prune(ctx, olderThan)
}

// definite reports whether a ledger error says for sure what happened to
// the write (it was refused); any other error (a lost connection, a
// cancelled context) leaves it unknown whether the write landed.
func definite(err error) bool {
	for _, s := range []error{ledger.ErrNotFound, ledger.ErrExists, ledger.ErrFenced, ledger.ErrConflict, ledger.ErrTerminal,
		ledger.ErrIllegalTransition, ledger.ErrAttemptsExhausted, ledger.ErrOutcomeRecorded, ledger.ErrPruned,
		ledger.ErrClosed, ledger.ErrInvalid, ledger.ErrTooLarge, ledger.ErrCorrupt, ledger.ErrLeaseExpired,
		ledger.ErrNotOwner, ledger.ErrDuplicate, ErrLost} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// landed reads an execution again after a write whose fate is unknown and
// returns the record if that write is the one that landed: the event
// after the version written from, by the same actor, with the same
// decision and state.
func (n *Ledger) landed(ctx context.Context, id string, fromEvents uint64, ev ledger.Event, to ledger.State) (ledger.Record, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rec, err := n.fleet.Get(ctx, id)
	if err != nil || rec.Events <= fromEvents {
		return ledger.Record{}, false
	}
	evs, err := n.fleet.Events(ctx, id)
	if err != nil || uint64(len(evs)) <= fromEvents {
		return ledger.Record{}, false
	}
	got := evs[fromEvents]
	if got.Actor != ev.Actor || got.Decision != ev.Decision || got.To != to {
		return ledger.Record{}, false
	}
	if rec.Events != fromEvents+1 {
		// Landed, and others wrote after it: the caller's view is stale.
		return ledger.Record{}, false
	}
	return rec, true
}

// actorOf names the lease behind one of the executor's own actors
// ("executor", "recovery"); other actors (people) are kept as they are.
func actorOf(actor string, l ledger.Lease) string {
	if actor != "executor" && actor != "recovery" {
		return actor
	}
	return actor + "@" + l.Node + "#" + strconv.FormatInt(l.Epoch, 10)
}

// leaseOfActor reads the lease actorOf put in an executor's own actor
// ("recovery@n1#2"); a person's name is no lease.
func leaseOfActor(actor string) (ledger.Lease, bool) {
	var rest string
	switch {
	case strings.HasPrefix(actor, "executor@"):
		rest = actor[len("executor@"):]
	case strings.HasPrefix(actor, "recovery@"):
		rest = actor[len("recovery@"):]
	default:
		return ledger.Lease{}, false
	}
	i := strings.LastIndexByte(rest, '#')
	if i < 0 {
		return ledger.Lease{}, false
	}
	epoch, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil {
		return ledger.Lease{}, false
	}
	return ledger.Lease{Node: rest[:i], Epoch: epoch}, true
}
