package wasmrt

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// PoolStats is a snapshot of a connector's instance pool, for metrics.
type PoolStats struct {
	// Size is the pool's cap (Limits.Instances).
	Size int
	// Idle instances wait warm for a call; Busy instances serve one (or
	// are being created for one).
	Idle, Busy int
	// Created counts instances ever instantiated (including the describing
	// one); Discarded counts those closed after a trap, timeout or bad
	// output. Created - Discarded - Idle - Busy are instances closed with
	// the connector.
	Created, Discarded uint64
}

// pool bounds the instances of one connector. A call holds a slot from
// before it runs (Reserve) until it has run; it takes an idle instance or,
// when none is idle, creates one. So idle + busy never exceeds the cap,
// and instances are created lazily.
//
// Slots are shared fairly between namespaces: a call finds a free slot
// at once only when no call waits, and a slot that frees goes to the
// waiting call whose namespace holds the fewest slots (the one that
// waited longest among those). One namespace's flood of calls waiting for
// the connector therefore does not queue another namespace's call behind
// it: that call takes the next slot that frees.
type pool struct {
	size   int
	create func(context.Context) (*instance, error)
	// done is closed with the pool: waiting calls give up.
	done chan struct{}

	mu      sync.Mutex
	idle    []*instance
	closed  bool
	taken   int            // slots held by calls (reserved or running)
	held    map[string]int // taken, per namespace
	waiters []*waiter      // in the order they came

	busy    atomic.Int64
	created atomic.Uint64
	discard atomic.Uint64
}

// waiter is a call waiting for a slot.
type waiter struct {
	ns      string
	ready   chan struct{} // closed once granted
	granted bool          // under the pool's mu
}

func (p *pool) init(size int, create func(context.Context) (*instance, error)) {
	p.size = size
	p.create = create
	p.done = make(chan struct{})
	p.held = map[string]int{}
}

// seed adds an instance created outside the pool (the describing one).
func (p *pool) seed(inst *instance) {
	p.created.Add(1)
	p.mu.Lock()
	p.idle = append(p.idle, inst)
	p.mu.Unlock()
}

// acquire takes a slot for a call of namespace ns, waiting for one until
// ctx is done, the pool closes, or (when wait > 0) wait has passed: then
// it returns ctx's cause, ErrConnectorClosed or ErrBusy. With wait < 0 it
// does not wait: no free slot is ErrBusy. The caller gives the slot back
// with release, or through an instance (fill, put, drop).
func (p *pool) acquire(ctx context.Context, ns string, wait time.Duration) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrConnectorClosed
	}
	if p.taken < p.size && len(p.waiters) == 0 {
		p.taken++
		p.held[ns]++
		p.mu.Unlock()
		return nil
	}
	if wait < 0 {
		p.mu.Unlock()
		return fmt.Errorf("%w: all %d of its instances are taken", ErrBusy, p.size)
	}
	w := &waiter{ns: ns, ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()

	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = context.Cause(ctx)
	case <-p.done:
		err = ErrConnectorClosed
	case <-timeout:
		err = fmt.Errorf("%w: all %d of its instances stayed taken for %v", ErrBusy, p.size, wait)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted {
		// Granted as the wait ended: the slot is this call's.
		return nil
	}
	for i, o := range p.waiters {
		if o == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			break
		}
	}
	return err
}

// release gives back a slot of namespace ns.
func (p *pool) release(ns string) {
	p.mu.Lock()
	p.releaseLocked(ns)
	p.mu.Unlock()
}

// releaseLocked gives back a slot of ns and hands the free slots to the
// waiting calls: each to the one whose namespace holds the fewest slots,
// the earliest among equals.
func (p *pool) releaseLocked(ns string) {
	p.taken--
	if p.held[ns]--; p.held[ns] <= 0 {
		delete(p.held, ns)
	}
	for p.taken < p.size && len(p.waiters) > 0 && !p.closed {
		best := 0
		for i, w := range p.waiters {
			if p.held[w.ns] < p.held[p.waiters[best].ns] {
				best = i
			}
		}
		w := p.waiters[best]
		p.waiters = append(p.waiters[:best], p.waiters[best+1:]...)
		w.granted = true
		p.taken++
		p.held[w.ns]++
		close(w.ready)
	}
}

// get returns an instance for one call of namespace ns, waiting for a
// slot until ctx is done. The caller must hand it back with put or drop.
func (p *pool) get(ctx context.Context) (*instance, error) { return p.getFor(ctx, "") }

func (p *pool) getFor(ctx context.Context, ns string) (*instance, error) {
	if err := p.acquire(ctx, ns, 0); err != nil {
		return nil, err
	}
	return p.fill(ctx, ns)
}

// fill returns an instance for a slot of ns the caller holds: an idle one,
// or a new one. On failure the slot is given back.
func (p *pool) fill(ctx context.Context, ns string) (*instance, error) {
	p.mu.Lock()
	if p.closed {
		p.releaseLocked(ns)
		p.mu.Unlock()
		return nil, ErrConnectorClosed
	}
	// busy changes under mu together with idle, so warm never sees a slot
	// whose instance is still being created as free.
	p.busy.Add(1)
	if n := len(p.idle); n > 0 {
		inst := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		inst.ns = ns
		return inst, nil
	}
	p.mu.Unlock()
	inst, err := p.create(ctx)
	if err != nil {
		p.busy.Add(-1)
		p.release(ns)
		return nil, err
	}
	p.created.Add(1)
	inst.ns = ns
	return inst, nil
}

// warm creates idle instances until n of them are idle or busy (at most
// the pool's cap), so that the first calls of a burst find an instance
// ready instead of creating one. It stops at the first error (or when ctx
// is done, or the pool closes) and returns it.
func (p *pool) warm(ctx context.Context, n int) error {
	n = min(n, p.size)
	for {
		p.mu.Lock()
		have := len(p.idle) + int(p.busy.Load())
		closed := p.closed
		p.mu.Unlock()
		if closed || have >= n {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		inst, err := p.create(ctx)
		if err != nil {
			return err
		}
		p.mu.Lock()
		if p.closed || len(p.idle)+int(p.busy.Load()) >= p.size {
			// A call created one meanwhile, or the pool closed: idle + busy
			// never exceeds the cap.
			p.mu.Unlock()
			inst.close()
			return nil
		}
		p.created.Add(1)
		p.idle = append(p.idle, inst)
		p.mu.Unlock()
	}
}

// put returns a healthy instance to the pool, and its slot.
func (p *pool) put(inst *instance) {
	p.mu.Lock()
	p.busy.Add(-1)
	if p.closed {
		p.releaseLocked(inst.ns)
		p.mu.Unlock()
		inst.close()
		return
	}
	p.idle = append(p.idle, inst)
	p.releaseLocked(inst.ns)
	p.mu.Unlock()
}

// drop closes an instance whose state is suspect; it is never reused. Its
// slot is given back.
func (p *pool) drop(inst *instance) {
	p.busy.Add(-1)
	p.discard.Add(1)
	inst.close()
	p.release(inst.ns)
}

// close closes the idle instances and sends the waiting calls away; busy
// ones are closed by put.
func (p *pool) close() {
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
}

func (p *pool) stats() PoolStats {
	// Idle and busy are read together under mu, where get and put move an
	// instance from one to the other, so that they add up to at most the
	// pool's size.
	p.mu.Lock()
	idle, busy := len(p.idle), int(p.busy.Load())
	p.mu.Unlock()
	return PoolStats{
		Size:      p.size,
		Idle:      idle,
		Busy:      busy,
		Created:   p.created.Load(),
		Discarded: p.discard.Load(),
	}
}

// Slot is one of a connector's instance slots, reserved for one call
// (Reserve). A call given it (CallRequest.Slot) runs at once, without
// waiting for an instance, and gives it back; a slot no call took must be
// given back with Release. A Slot is for one call, from one goroutine.
type Slot struct {
	c    *Connector
	ns   string
	used atomic.Bool
}

// Reserve takes one of the connector's instance slots for a call of
// namespace ns, waiting for one until ctx is done or, when wait > 0, for
// at most wait: then it fails with ErrBusy and nothing was called. With
// wait < 0 it takes a slot only if one is free now. Slots
// are shared fairly between namespaces: a slot that frees goes to the
// waiting call whose namespace holds the fewest. Reserve is safe for
// concurrent use.
func (c *Connector) Reserve(ctx context.Context, ns string, wait time.Duration) (*Slot, error) {
	if err := c.pool.acquire(ctx, ns, wait); err != nil {
		return nil, fmt.Errorf("connector[%s]: no instance for a call of namespace %q: %w", c.name, ns, err)
	}
	return &Slot{c: c, ns: ns}, nil
}

// Release gives back a slot that no call took. It does nothing for a slot
// a call took, or one released already.
func (s *Slot) Release() {
	if s != nil && s.used.CompareAndSwap(false, true) {
		s.c.pool.release(s.ns)
	}
}

// take marks the slot taken by a call of c; false if it is not c's, or
// already taken or released.
func (s *Slot) take(c *Connector) bool {
	return s.c == c && s.used.CompareAndSwap(false, true)
}
