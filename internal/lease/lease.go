// Package lease makes a fleet ledger (ledger.Fleet, the PostgreSQL
// ledger) the ledger of one node: Open registers the node, renews its
// lease in the background, and returns a *Ledger whose writes are made
// under that lease. The executor writes through it as through any
// ledger.Ledger; what is left of the fleet for the executor to know is in
// the few questions Ledger answers besides (Health, Bind, Elsewhere,
// Claim), whose answers on a single-node ledger are trivial.
//
//   - Open registers the node and gets a lease with a new epoch; a
//     goroutine renews it every TTL/3.
//   - Create and Apply go through the owned writes (CreateOwned,
//     ApplyOwned), so the shared ledger refuses them once the lease is
//     gone, and an attempt in flight is decided only by the node that
//     owns it. A write whose fate is unknown (the connection failed after
//     the commit, perhaps) is read again: if it landed, it succeeded.
//   - A dispatch, and the connector call after it (Bind), needs a lease
//     this process knows to be live: renewed less than TTL ago, measured
//     from when the renewal was sent (the ledger's expiry is later than
//     that). When that passes without a renewal, the node stops
//     dispatching (Health fails with ErrLost), connector calls in flight
//     are cancelled, and it registers again as soon as it can: a new
//     epoch, with which it claims what its former epoch left.
//   - Claim takes the pending executions of every node whose lease is
//     gone; Pending and Due list those this node owns, and those nobody
//     owns, never another live node's. The first decision written on a
//     claimed execution names the node it was taken from (a takeover
//     note).
//   - Elsewhere says whether the attempt in flight of a dispatched
//     execution is another live node's: its "no outcome" is then a call
//     running there, not an unknown outcome.
//   - The executor's own events name the lease that wrote them
//     ("executor@node#epoch", "recovery@node#epoch").
//
// See RATIONALE.md, "Why is the fleet a ledger, not a mode of the
// executor?" and "Why is the lease's epoch the fencing token, checked by
// the ledger?".
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/connhost/connhost/ledger"
)

// DefaultTTL is the default value of Options.TTL.
const DefaultTTL = 15 * time.Second

// ErrLost: the node holds no live lease on the shared ledger (it could not
// renew it in time, or another process registered the same node id), so
// it dispatches nothing until it has registered again.
var ErrLost = errors.New("lease: node lease lost")

// ErrNodeInUse: another live process runs under this node's id, and this
// process, the newer of the two, gave way for good (it matches ErrLost
// too). Two processes under one id would supersede each other's lease
// forever.
var ErrNodeInUse = errors.New("lease: node id in use by another live process")

// Observer receives the fleet events of a node. Its methods are called
// synchronously and must not block.
type Observer interface {
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

type nopObserver struct{}

func (nopObserver) LeaseRegistered(ledger.Lease) {}
func (nopObserver) LeaseRenewal(bool)            {}
func (nopObserver) LeaseLost(ledger.Lease)       {}
func (nopObserver) Claimed(int)                  {}
func (nopObserver) TookOver(string)              {}

// Options configures Open.
type Options struct {
	// Node is the node's id: unique in the fleet, and the same across
	// restarts of the same node (a restart then takes over its former
	// incarnation's calls at once instead of after TTL). Required.
	Node string
	// TTL is how long the lease lasts without renewal (it is renewed
	// every TTL/3). The default value is DefaultTTL (15s).
	TTL time.Duration
	// Observer receives the fleet events. The default value discards
	// them.
	Observer Observer
	// Logger receives the lease's log records. The default value is
	// slog.Default().
	Logger *slog.Logger
}

// heldLease is a lease this process holds.
type heldLease struct {
	l ledger.Lease
	// validUntil (monotonic) is when the last renewal was sent plus the
	// TTL: the ledger's expiry is no earlier.
	validUntil time.Time
	// ctx is cancelled when the lease is lost; connector calls run under
	// it (Bind).
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
	// tookLive: the registration ended the node's live lease (Superseded),
	// at registered (monotonic).
	tookLive   bool
	registered time.Time
}

// Ledger is a fleet ledger bound to one node's lease (see the package
// comment). It is safe for concurrent use. Close ends the lease; the
// fleet ledger stays open (it is the caller's).
type Ledger struct {
	fleet ledger.Fleet
	id    string
	ttl   time.Duration
	obs   Observer
	log   *slog.Logger

	mu      sync.Mutex
	cur     *heldLease // nil while the node holds no lease
	last    *heldLease // the lease lost last
	lostWhy string     // why the last lease was lost
	// gaveWay is ErrNodeInUse once this process gave way to another
	// live process under its node id; fatal is closed then.
	gaveWay error
	fatal   chan struct{}
	// damage is the *ledger.DamageError a renewal met: the shared ledger
	// is not what this node acknowledged (see pgledger's witness), and
	// every operation says so from then on, not only that the lease is
	// gone.
	damage error

	// takeovers remembers, per claimed execution, the lease it was taken
	// from and its version at the claim, until this node records a
	// decision on it.
	takeMu    sync.Mutex
	takeovers map[string]takeover

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// Open registers node opts.Node on f (a new epoch, which fences out every
// earlier one of the node) and keeps its lease renewed until Close.
func Open(ctx context.Context, f ledger.Fleet, opts Options) (*Ledger, error) {
	if opts.Node == "" {
		return nil, errors.New("lease: a node id is required (each node of the fleet needs its own)")
	}
	if opts.TTL < 0 {
		return nil, errors.New("lease: the TTL is negative")
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Ledger{fleet: f, id: opts.Node, ttl: opts.TTL, obs: opts.Observer, log: opts.Logger,
		stop: make(chan struct{}), done: make(chan struct{}), fatal: make(chan struct{})}
	if err := l.register(ctx); err != nil {
		return nil, err
	}
	go l.renew()
	return l, nil
}

// register starts a new lease (a new epoch).
func (n *Ledger) register(ctx context.Context) error {
	sent := time.Now()
	l, err := n.fleet.RegisterNode(ctx, n.id, n.ttl)
	if err != nil {
		return fmt.Errorf("lease: register node %s: %w", n.id, err)
	}
	h := &heldLease{l: l, validUntil: sent.Add(n.ttl), tookLive: l.Superseded, registered: sent}
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
func (n *Ledger) lose(h *heldLease, why string) {
	n.mu.Lock()
	if h == nil || n.cur != h {
		n.mu.Unlock()
		return
	}
	n.cur, n.last = nil, h
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
func (n *Ledger) lease(live bool) (*heldLease, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.gaveWay != nil:
		return nil, n.gaveWay
	case n.damage != nil:
		return nil, fmt.Errorf("%w: node %s: %w", ErrLost, n.id, n.damage)
	case n.cur == nil:
		why := n.lostWhy
		if why == "" {
			why = "not registered"
		}
		return nil, fmt.Errorf("%w: node %s: %s", ErrLost, n.id, why)
	case live && !time.Now().Before(n.cur.validUntil):
		return nil, fmt.Errorf("%w: %s: not renewed within the lease TTL (%s)", ErrLost, n.cur.l, n.ttl)
	}
	return n.cur, nil
}

// Health is nil while the node holds a live lease, else an error matching
// ErrLost that says why not.
func (n *Ledger) Health() error {
	_, err := n.lease(true)
	return err
}

// Lease returns the node's current lease and whether it is live (renewed
// within the TTL); ok is always true (a single-node ledger answers false).
// While the node holds no lease, l names the node only.
func (n *Ledger) Lease() (l ledger.Lease, live, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cur == nil {
		return ledger.Lease{Node: n.id}, false, true
	}
	return n.cur.l, time.Now().Before(n.cur.validUntil), true
}

// Bind returns ctx, also cancelled when the node loses its lease, for a
// connector call under the lease: once another node may take the call
// over, a request still on its way would race the takeover's. done ends
// the binding and reports whether the lease was lost meanwhile. Bind
// fails (ErrLost) while the node holds no live lease.
func (n *Ledger) Bind(ctx context.Context) (bound context.Context, done func() (lost bool), err error) {
	h, err := n.lease(true)
	if err != nil {
		return ctx, func() bool { return false }, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	return ctx, func() bool {
		cancel()
		stop()
		return h.ctx.Err() != nil
	}, nil
}

// refused handles a write the ledger refused because h is gone.
func (n *Ledger) refused(h *heldLease, err error) error {
	if errors.Is(err, ledger.ErrLeaseExpired) {
		n.lose(h, "the shared ledger refused a write: the lease expired or another process registered this node id")
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	return err
}

// renew keeps the lease live until stop is closed: every TTL/3, sooner
// after a failure; once the lease is lost, it registers again.
func (n *Ledger) renew() {
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
		if err := n.RenewNow(); err != nil {
			var de *ledger.DamageError
			if errors.As(err, &de) {
				n.mu.Lock()
				n.damage = de
				n.mu.Unlock()
			}
			n.log.Warn("node lease renewal failed", "node", n.id, "error", err)
			next = retry
		}
		t.Reset(next)
	}
}

// RenewNow runs one renewal of the lease, or registers the node again if
// it holds none. The background renewal calls it every TTL/3.
func (n *Ledger) RenewNow() error {
	ctx, cancel := context.WithTimeout(context.Background(), max(n.ttl/3, time.Second))
	defer cancel()
	n.mu.Lock()
	h, last, gaveWay := n.cur, n.last, n.gaveWay
	n.mu.Unlock()
	switch {
	case gaveWay != nil:
		return gaveWay
	case h == nil && n.young(last):
		// Lost (a refused write, perhaps) soon after this process took a
		// live lease of its id: find out whether that lease's holder
		// took the id back before taking it again.
		if _, err := n.fleet.RenewLease(ctx, last.l, n.ttl); errors.Is(err, ledger.ErrLeaseSuperseded) {
			return n.giveWay(last)
		}
		return n.register(ctx)
	case h == nil:
		return n.register(ctx)
	}
	sent := time.Now()
	l, err := n.fleet.RenewLease(ctx, h.l, n.ttl)
	n.obs.LeaseRenewal(err == nil)
	switch {
	case errors.Is(err, ledger.ErrLeaseSuperseded) && n.young(h):
		return n.giveWay(h)
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

// young reports whether h is a lease whose registration ended a live
// lease of the node id (Superseded) less than a TTL ago. If such a lease
// is superseded in turn, the holder of the lease it ended took the id
// back: that was no crashed former incarnation, which does not come back,
// but a second live process under the same id, which does at its next
// renewal.
func (n *Ledger) young(h *heldLease) bool {
	return h != nil && h.tookLive && time.Since(h.registered) < n.ttl
}

// giveWay ends h for good, the older process under the node id keeping
// it, and returns why (ErrNodeInUse).
func (n *Ledger) giveWay(h *heldLease) error {
	n.mu.Lock()
	first := n.gaveWay == nil
	if first {
		n.gaveWay = fmt.Errorf("%w: %w: node id %s: this process registered it while another process held it, and that process took it back: "+
			"it is no crashed former incarnation but a second live process under the same id; this one, the newer, stops (give each node its own id)",
			ErrLost, ErrNodeInUse, n.id)
	}
	err := n.gaveWay
	n.mu.Unlock()
	if first {
		n.lose(h, err.Error())
		n.log.Error("another live process runs under this node id: this process gives way and takes no more work", "node", n.id, "error", err)
		close(n.fatal)
	}
	return err
}

// Fatal is closed when the node gave way for good to another live process
// under its id (Health then fails with ErrNodeInUse): a server exits then.
func (n *Ledger) Fatal() <-chan struct{} { return n.fatal }

// Freeze stops the renewals and waits for them, without releasing the
// lease: to the fleet, the node looks like a process that stopped
// running. Close calls it; tests call it to pause a node.
func (n *Ledger) Freeze() {
	n.stopOnce.Do(func() { close(n.stop) })
	<-n.done
}

// Lose makes the node lose its current lease, as when it could not renew
// it within the TTL; the next renewal registers it again.
func (n *Ledger) Lose(why string) {
	n.mu.Lock()
	h := n.cur
	n.mu.Unlock()
	n.lose(h, why)
}

// RegisterAgain registers the node under a new epoch without first ending
// the current lease's work: what a node resumed from a pause does once
// its renewal finds the lease gone.
func (n *Ledger) RegisterAgain(ctx context.Context) error { return n.register(ctx) }

// Close stops the renewals and releases the lease, so that other nodes
// may claim this node's executions at once. It does not close the fleet
// ledger.
func (n *Ledger) Close() error {
	n.Freeze()
	n.mu.Lock()
	h := n.cur
	n.cur, n.lostWhy = nil, "the ledger is closed"
	n.mu.Unlock()
	if h == nil {
		return nil
	}
	h.timer.Stop()
	h.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.fleet.ReleaseLease(ctx, h.l)
}
