package lease

import (
	"context"
	"fmt"
	"slices"

	"github.com/connhost/connhost/ledger"
)

type takeover struct {
	from   ledger.Lease
	events uint64
}

// Claim makes this node, which must hold a live lease, the owner of the
// pending executions of every lease that is gone (each goes to one
// claimer; a recovery_required one, at rest until an operator decides,
// needs no claim) and returns how many it took. The first decision on each
// carries a takeover note.
func (n *Ledger) Claim(ctx context.Context) (int, error) {
	h, err := n.lease(true)
	if err != nil {
		return 0, err
	}
	claims, err := n.claim(ctx, h)
	return len(claims), err
}

// claim claims the executions of gone leases under h and notes them.
func (n *Ledger) claim(ctx context.Context, h *heldLease) ([]ledger.Claim, error) {
	claims, err := n.fleet.ClaimExpired(ctx, h.l)
	if err != nil {
		return nil, n.refused(h, fmt.Errorf("lease: claim the executions of expired nodes: %w", err))
	}
	n.noteClaims(claims)
	return claims, nil
}

// Elsewhere decides whose the attempt in flight of the dispatched record
// rec is, before the caller treats its outcome as unknown: this node's
// (possibly after claiming it from a gone lease; it returns the record as
// claimed: elsewhere nil), or another live node's (elsewhere is that
// node's lease, and the record the freshest read).
func (n *Ledger) Elsewhere(ctx context.Context, rec ledger.Record) (_ ledger.Record, elsewhere *ledger.Lease, _ error) {
	h, err := n.lease(false)
	if err != nil {
		return rec, nil, err
	}
	owner, live, err := n.fleet.Owner(ctx, rec.ID)
	switch {
	case err != nil:
		return rec, nil, err
	case owner.Node == "" || owner.Node == h.l.Node && owner.Epoch == h.l.Epoch:
		return rec, nil, nil
	case live:
		return rec, &owner, nil
	}
	claims, err := n.claim(ctx, h)
	if err != nil {
		return rec, nil, err
	}
	if i := slices.IndexFunc(claims, func(c ledger.Claim) bool { return c.Record.ID == rec.ID }); i >= 0 {
		return claims[i].Record, nil, nil
	}
	// Another node claimed it first.
	owner, _, err = n.fleet.Owner(ctx, rec.ID)
	if err != nil {
		return rec, nil, err
	}
	fresh, err := n.fleet.Get(ctx, rec.ID)
	if err != nil {
		return rec, nil, err
	}
	return fresh, &owner, nil
}

// noteClaims remembers where claimed executions came from.
func (n *Ledger) noteClaims(claims []ledger.Claim) {
	if len(claims) == 0 {
		return
	}
	n.obs.Claimed(len(claims))
	n.takeMu.Lock()
	defer n.takeMu.Unlock()
	if n.takeovers == nil {
		n.takeovers = map[string]takeover{}
	}
	for _, c := range claims {
		n.takeovers[c.Record.ID] = takeover{from: c.From, events: c.Record.Events}
		n.log.Info("claimed an execution of a node whose lease is gone", "execution_id", c.Record.ID,
			"state", c.Record.State, "from_node", c.From.Node, "from_epoch", c.From.Epoch)
	}
}

// takeoverOf returns the takeover note for a write to rec, if rec is the
// version this node claimed. A write from an older version (a request that
// read the execution before the claim, and whose write the ledger will
// refuse) keeps the note for the decision taken on the claimed version;
// only a newer version, written since the claim, retires it.
func (n *Ledger) takeoverOf(rec ledger.Record) (takeover, bool) {
	n.takeMu.Lock()
	defer n.takeMu.Unlock()
	t, ok := n.takeovers[rec.ID]
	switch {
	case !ok || rec.Events < t.events:
		return takeover{}, false
	case rec.Events > t.events:
		delete(n.takeovers, rec.ID) // written since the claim
		return takeover{}, false
	}
	return t, true
}

func (n *Ledger) tookOver(id string) {
	n.takeMu.Lock()
	delete(n.takeovers, id)
	n.takeMu.Unlock()
}

// dispatchedUnder reports, for a recovery decision by l on the dispatched
// record rec, the lease the attempt in flight was dispatched under when
// that is another one: the write is then a takeover, whether or not this
// node saw the claim that made it the owner. It reads the trail, which
// only recovery decisions on a dispatched record pay for.
func (n *Ledger) dispatchedUnder(ctx context.Context, rec ledger.Record, l ledger.Lease) (takeover, bool) {
	evs, err := n.fleet.Events(ctx, rec.ID)
	if err != nil {
		n.log.Warn("could not read the trail to name a takeover", "execution_id", rec.ID, "error", err)
		return takeover{}, false
	}
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		from, ok := leaseOfActor(ev.Actor)
		if !ok || ev.To != ledger.StateDispatched || ev.Attempt != rec.Attempt {
			continue // a person's event (a cancel request), or not this attempt's dispatch
		}
		if from.Node == l.Node && from.Epoch == l.Epoch {
			return takeover{}, false
		}
		return takeover{from: from, events: rec.Events}, true
	}
	return takeover{}, false
}
