package host

import (
	"context"
	"sync"
)

// flights serialises the work on one execution id inside this process, so
// concurrent identical calls dispatch once, and recovery never races a live
// call of the same execution. Different ids never wait for each other: the
// mutex guards only the map. See RATIONALE.md, "Why per-execution flights
// instead of a global lock?".
type flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// acquire waits until no other goroutine holds id, then holds it. The
// returned release must be called exactly once.
func (f *flights) acquire(ctx context.Context, id string) (release func(), err error) {
	for {
		f.mu.Lock()
		if f.m == nil {
			f.m = map[string]chan struct{}{}
		}
		ch, busy := f.m[id]
		if !busy {
			ch = make(chan struct{})
			f.m[id] = ch
			f.mu.Unlock()
			return func() { f.release(id, ch) }, nil
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// tryAcquire holds id if nobody does.
func (f *flights) tryAcquire(id string) (release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]chan struct{}{}
	}
	if _, busy := f.m[id]; busy {
		return nil, false
	}
	ch := make(chan struct{})
	f.m[id] = ch
	return func() { f.release(id, ch) }, true
}

func (f *flights) release(id string, ch chan struct{}) {
	f.mu.Lock()
	delete(f.m, id)
	f.mu.Unlock()
	close(ch)
}
