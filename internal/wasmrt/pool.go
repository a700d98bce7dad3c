package wasmrt

import (
	"context"
	"sync"
	"sync/atomic"
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

// pool bounds the instances of one connector. A call holds a slot while it
// runs; it takes an idle instance or, when none is idle, creates one. So
// idle + busy never exceeds the cap, and instances are created lazily.
type pool struct {
	slots   chan struct{}
	create  func(context.Context) (*instance, error)
	mu      sync.Mutex
	idle    []*instance
	closed  bool
	busy    atomic.Int64
	created atomic.Uint64
	discard atomic.Uint64
}

func (p *pool) init(size int, create func(context.Context) (*instance, error)) {
	p.slots = make(chan struct{}, size)
	p.create = create
}

// seed adds an instance created outside the pool (the describing one).
func (p *pool) seed(inst *instance) {
	p.created.Add(1)
	p.mu.Lock()
	p.idle = append(p.idle, inst)
	p.mu.Unlock()
}

// get returns an instance for one call, waiting for a free slot until ctx
// is done. The caller must hand it back with put or drop.
func (p *pool) get(ctx context.Context) (*instance, error) {
	select {
	case p.slots <- struct{}{}:
	default:
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
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
		return inst, nil
	}
	p.mu.Unlock()
	inst, err := p.create(ctx)
	if err != nil {
		p.busy.Add(-1)
		<-p.slots
		return nil, err
	}
	p.created.Add(1)
	return inst, nil
}

// warm creates idle instances until n of them are idle or busy (at most
// the pool's cap), so that the first calls of a burst find an instance
// ready instead of creating one. It stops at the first error (or when ctx
// is done, or the pool closes) and returns it.
func (p *pool) warm(ctx context.Context, n int) error {
	n = min(n, cap(p.slots))
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
		if p.closed || len(p.idle)+int(p.busy.Load()) >= cap(p.slots) {
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

// put returns a healthy instance to the pool.
func (p *pool) put(inst *instance) {
	p.mu.Lock()
	p.busy.Add(-1)
	if p.closed {
		p.mu.Unlock()
		inst.close()
	} else {
		p.idle = append(p.idle, inst)
		p.mu.Unlock()
	}
	<-p.slots
}

// drop closes an instance whose state is suspect; it is never reused.
func (p *pool) drop(inst *instance) {
	p.busy.Add(-1)
	p.discard.Add(1)
	inst.close()
	<-p.slots
}

// close closes the idle instances; busy ones are closed by put.
func (p *pool) close() {
	p.mu.Lock()
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
		Size:      cap(p.slots),
		Idle:      idle,
		Busy:      busy,
		Created:   p.created.Load(),
		Discarded: p.discard.Load(),
	}
}
