package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/connhost/connhost/ledger"
)

// Fleet mode. When Options.Ledger implements ledger.Fleet (the PostgreSQL
// ledger), the executor is one node of a fleet sharing that ledger:
//
//   - Open registers the node (Options.Node) and gets a lease with a new
//     epoch; a goroutine renews it every LeaseTTL/3.
//   - Every write goes through the owned variants (CreateOwned,
//     ApplyOwned), so the ledger refuses it once the lease is gone, and an
//     attempt in flight is decided only by the node that owns it.
//   - A dispatch (and the connector call after it) needs a lease this
//     process knows to be live: renewed less than LeaseTTL ago, measured
//     from when the renewal was sent (the ledger's expiry is later than
//     that). When that passes without a renewal, the node stops
//     dispatching (Execute answers ErrLeaseLost, Health fails), connector
//     calls in flight are cancelled, and it registers again as soon as it
//     can: a new epoch, with which it claims what its former epoch left.
//   - Each recovery pass (Open, Recover, Run) first claims the pending
//     executions of every node whose lease is gone and applies the
//     decision table to them; the first decision recorded on a claimed
//     execution names the node it was taken from (see takeover).
//   - An execution dispatched by another live node is not this node's to
//     recover: a live call waits for it (polling, up to
//     MaxInlineRetryWait) and answers pending.
//   - The executor's own events name the lease that wrote them
//     ("executor@node#epoch", "recovery@node#epoch").

// DefaultLeaseTTL is the default value of Options.LeaseTTL.
const DefaultLeaseTTL = 15 * time.Second

// ErrLeaseLost: the node holds no live lease on the shared ledger (it
// could not renew it in time, or another process registered the same node
// id), so it dispatches nothing until it has registered again.
var ErrLeaseLost = errors.New("host: node lease lost")

// elsewherePoll is how often a live call re-reads an execution whose
// attempt another live node is running.
const elsewherePoll = 200 * time.Millisecond

// FleetObserver receives the fleet events of an executor on a
// ledger.Fleet. An Options.Observer that also implements it gets them;
// the same rules as for Observer apply.
type FleetObserver interface {
	// LeaseRegistered reports a new lease: at Open, and after a lost one.
	LeaseRegistered(l ledger.Lease)
	// LeaseRenewal reports one renewal attempt and whether it succeeded.
	LeaseRenewal(ok bool)
	// LeaseLost reports that the node stopped dispatching under l.
	LeaseLost(l ledger.Lease)
	// Claimed reports executions claimed from nodes whose lease was gone.
	Claimed(n int)
	// TookOver reports the first decision recorded on a claimed execution.
	TookOver(decision string)
}

type nopFleetObserver struct{}

func (nopFleetObserver) LeaseRegistered(ledger.Lease) {}
func (nopFleetObserver) LeaseRenewal(bool)            {}
func (nopFleetObserver) LeaseLost(ledger.Lease)       {}
func (nopFleetObserver) Claimed(int)                  {}
func (nopFleetObserver) TookOver(string)              {}

// heldLease is a lease this process holds.
type heldLease struct {
	l ledger.Lease
	// validUntil (monotonic) is when the last renewal was sent plus the
	// TTL: the ledger's expiry is no earlier.
	validUntil time.Time
	// ctx is cancelled when the lease is lost; connector calls run under
	// it.
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
}

// node is the executor's membership in a fleet.
type node struct {
	fleet ledger.Fleet
	id    string
	ttl   time.Duration
	obs   FleetObserver
	log   interface {
		Warn(msg string, args ...any)
		Error(msg string, args ...any)
		Info(msg string, args ...any)
	}

	mu      sync.Mutex
	cur     *heldLease // nil while the node holds no lease
	lostWhy string     // why the last lease was lost

	// takeovers remembers, per claimed execution, the lease it was taken
	// from and its version at the claim, until this node records a
	// decision on it.
	takeMu    sync.Mutex
	takeovers map[string]takeover

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

type takeover struct {
	from   ledger.Lease
	events uint64
}

// register starts a new lease (a new epoch).
func (n *node) register(ctx context.Context) error {
	sent := time.Now()
	l, err := n.fleet.RegisterNode(ctx, n.id, n.ttl)
	if err != nil {
		return fmt.Errorf("host: register node %s: %w", n.id, err)
	}
	h := &heldLease{l: l, validUntil: sent.Add(n.ttl)}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	n.mu.Lock()
	n.cur = h
	n.lostWhy = ""
	h.timer = time.AfterFunc(time.Until(h.validUntil), func() { n.lose(h, "not renewed within the lease TTL") })
	n.mu.Unlock()
	n.obs.LeaseRegistered(l)
	n.log.Info("node registered on the shared ledger", "node", l.Node, "epoch", l.Epoch, "ttl", n.ttl)
	return nil
}

// lose ends h (if it is still the current lease): the node stops
// dispatching under it and cancels the connector calls it runs.
func (n *node) lose(h *heldLease, why string) {
	n.mu.Lock()
	if h == nil || n.cur != h {
		n.mu.Unlock()
		return
	}
	n.cur = nil
	n.lostWhy = why
	n.mu.Unlock()
	h.timer.Stop()
	h.cancel()
	n.obs.LeaseLost(h.l)
	n.log.Error("node lease lost: dispatching stops until the node has registered again", "node", h.l.Node, "epoch", h.l.Epoch, "reason", why)
}

// lease returns the lease to write under. A dispatch (live) needs one that
// this process knows to be live; other writes take the current one and
// let the ledger judge it.
func (n *node) lease(live bool) (*heldLease, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.cur == nil:
		why := n.lostWhy
		if why == "" {
			why = "not registered"
		}
		return nil, fmt.Errorf("%w: node %s: %s", ErrLeaseLost, n.id, why)
	case live && !time.Now().Before(n.cur.validUntil):
		return nil, fmt.Errorf("%w: %s: not renewed within the lease TTL (%s)", ErrLeaseLost, n.cur.l, n.ttl)
	}
	return n.cur, nil
}

// health is nil while the node holds a live lease.
func (n *node) health() error {
	_, err := n.lease(true)
	return err
}

// refused handles a write the ledger refused because h is gone.
func (n *node) refused(h *heldLease, err error) error {
	if errors.Is(err, ledger.ErrLeaseExpired) {
		n.lose(h, "the shared ledger refused a write: the lease expired or another process registered this node id")
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	return err
}

// renew keeps the lease live until stop is closed: every TTL/3, sooner
// after a failure; once the lease is lost, it registers again.
func (n *node) renew() {
	defer close(n.done)
	interval := max(n.ttl/3, time.Millisecond)
	retry := max(n.ttl/10, time.Millisecond)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		next := interval
		if err := n.renewOnce(); err != nil {
			n.log.Warn("node lease renewal failed", "node", n.id, "error", err)
			next = retry
		}
		t.Reset(next)
	}
}

func (n *node) renewOnce() error {
	ctx, cancel := context.WithTimeout(context.Background(), max(n.ttl/3, time.Second))
	defer cancel()
	n.mu.Lock()
	h := n.cur
	n.mu.Unlock()
	if h == nil {
		return n.register(ctx)
	}
	sent := time.Now()
	l, err := n.fleet.RenewLease(ctx, h.l, n.ttl)
	n.obs.LeaseRenewal(err == nil)
	switch {
	case errors.Is(err, ledger.ErrLeaseExpired):
		why := "the shared ledger says the lease expired"
		if sent.Before(h.validUntil) {
			why = "the shared ledger ended it before it was due: another process registered node id " + n.id +
				" (give each node its own id), or it was ended by hand"
		}
		n.lose(h, why)
		return n.register(ctx)
	case err != nil:
		if !time.Now().Before(h.validUntil) {
			n.lose(h, "not renewed within the lease TTL: "+err.Error())
		}
		return err
	}
	n.mu.Lock()
	if n.cur == h {
		h.l, h.validUntil = l, sent.Add(n.ttl)
		h.timer.Reset(time.Until(h.validUntil))
	}
	n.mu.Unlock()
	return nil
}

// stopRenewals stops the renewal goroutine and waits for it.
func (n *node) stopRenewals() {
	n.stopOnce.Do(func() { close(n.stop) })
	<-n.done
}

// close stops the renewals and releases the lease, so that other nodes
// may claim this node's executions at once.
func (n *node) close(ctx context.Context) error {
	n.stopRenewals()
	n.mu.Lock()
	h := n.cur
	n.cur, n.lostWhy = nil, "the executor is closed"
	n.mu.Unlock()
	if h == nil {
		return nil
	}
	h.timer.Stop()
	h.cancel()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return n.fleet.ReleaseLease(ctx, h.l)
}

// actor names the lease behind one of the executor's own actors
// ("executor", "recovery"); other actors (people) are kept as they are.
func actorOf(actor string, l ledger.Lease) string {
	if actor != "executor" && actor != "recovery" {
		return actor
	}
	return actor + "@" + l.Node + "#" + strconv.FormatInt(l.Epoch, 10)
}

// noteClaims remembers where claimed executions came from.
func (n *node) noteClaims(claims []ledger.Claim) {
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
func (n *node) takeoverOf(rec ledger.Record) (takeover, bool) {
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

func (n *node) tookOver(id string) {
	n.takeMu.Lock()
	delete(n.takeovers, id)
	n.takeMu.Unlock()
}

// dispatchedUnder reports, for a recovery decision by l on the dispatched
// record rec, the lease the attempt in flight was dispatched under when
// that is another one: the write is then a takeover, whether or not this
// node saw the claim that made it the owner. It reads the trail, which
// only recovery decisions on a dispatched record pay for.
func (e *Executor) dispatchedUnder(ctx context.Context, rec ledger.Record, l ledger.Lease) (takeover, bool) {
	evs, err := e.led.Events(ctx, rec.ID)
	if err != nil {
		e.opts.Logger.Warn("could not read the trail to name a takeover", "execution_id", rec.ID, "error", err)
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

// claim claims the executions of gone leases under h and reports them.
func (e *Executor) claim(ctx context.Context, h *heldLease) ([]ledger.Claim, error) {
	claims, err := e.node.fleet.ClaimExpired(ctx, h.l)
	if err != nil {
		return nil, e.node.refused(h, fmt.Errorf("host: claim the executions of expired nodes: %w", err))
	}
	e.node.noteClaims(claims)
	return claims, nil
}

// ownAttempt decides whose the attempt in flight of the dispatched record
// rec is, before this node treats its outcome as unknown: this node's
// (possibly after claiming it from a gone lease; it returns the record as
// claimed), or another live node's (elsewhere, with that node's lease).
func (e *Executor) ownAttempt(ctx context.Context, rec ledger.Record) (ledger.Record, *ledger.Lease, error) {
	h, err := e.node.lease(false)
	if err != nil {
		return rec, nil, err
	}
	owner, live, err := e.node.fleet.Owner(ctx, rec.ID)
	switch {
	case err != nil:
		return rec, nil, err
	case owner.Node == "" || owner.Node == h.l.Node && owner.Epoch == h.l.Epoch:
		return rec, nil, nil
	case live:
		return rec, &owner, nil
	}
	claims, err := e.claim(ctx, h)
	if err != nil {
		return rec, nil, err
	}
	if i := slices.IndexFunc(claims, func(c ledger.Claim) bool { return c.Record.ID == rec.ID }); i >= 0 {
		return claims[i].Record, nil, nil
	}
	// Another node claimed it first.
	owner, _, err = e.node.fleet.Owner(ctx, rec.ID)
	if err != nil {
		return rec, nil, err
	}
	fresh, err := e.led.Get(ctx, rec.ID)
	if err != nil {
		return rec, nil, err
	}
	return fresh, &owner, nil
}

// Health reports whether the executor can take new work: nil on a
// single-node ledger, and on a fleet ledger while the node holds a live
// lease (else an error matching ErrLeaseLost).
func (e *Executor) Health() error {
	if e.node == nil {
		return nil
	}
	return e.node.health()
}

// NodeLease returns the node's current lease on a fleet ledger and whether
// it is live (renewed within the lease TTL); ok is false on a single-node
// ledger.
func (e *Executor) NodeLease() (l ledger.Lease, live bool, ok bool) {
	if e.node == nil {
		return ledger.Lease{}, false, false
	}
	e.node.mu.Lock()
	defer e.node.mu.Unlock()
	if e.node.cur == nil {
		return ledger.Lease{Node: e.node.id}, false, true
	}
	return e.node.cur.l, time.Now().Before(e.node.cur.validUntil), true
}

// definite reports whether a ledger error says for sure what happened to
// the write (it was refused); any other error (a lost connection, a
// cancelled context) leaves it unknown whether the write landed.
func definite(err error) bool {
	for _, s := range []error{ledger.ErrNotFound, ledger.ErrExists, ledger.ErrConflict, ledger.ErrTerminal,
		ledger.ErrIllegalTransition, ledger.ErrAttemptsExhausted, ledger.ErrOutcomeRecorded, ledger.ErrPruned,
		ledger.ErrClosed, ledger.ErrInvalid, ledger.ErrTooLarge, ledger.ErrCorrupt, ledger.ErrLeaseExpired,
		ledger.ErrNotOwner, ledger.ErrDuplicate, ErrLeaseLost} {
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
func (e *Executor) landed(ctx context.Context, id string, fromEvents uint64, ev ledger.Event, to ledger.State) (ledger.Record, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rec, err := e.led.Get(ctx, id)
	if err != nil || rec.Events <= fromEvents {
		return ledger.Record{}, false
	}
	evs, err := e.led.Events(ctx, id)
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

// leaseBound returns ctx, also cancelled when h is lost.
func leaseBound(ctx context.Context, h *heldLease) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	return ctx, func() bool { cancel(); return stop() }
}
