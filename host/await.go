package host

import (
	"context"
	"sync"
	"time"

	"github.com/connhost/connhost/ledger"
)

// awaitPoll is how often AwaitDecision reads the execution: a decision
// recorded by another process (the CLI on the same ledger, another node of
// a fleet) is seen within it. A decision through this executor wakes it at
// once.
const awaitPoll = 250 * time.Millisecond

// decisions wakes the waiters of AwaitDecision when this executor records
// a decision: close-and-replace of one channel, so that a wake-up costs
// nothing while nobody waits.
type decisions struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next decision.
func (d *decisions) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	return d.ch
}

// signal wakes every waiter.
func (d *decisions) signal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch != nil {
		close(d.ch)
		d.ch = nil
	}
}

// AwaitDecision waits until the execution has left awaiting_approval — a
// reviewer approved or rejected it (through this executor, another process
// on the same ledger, or another node of a fleet), it was cancelled, or it
// expired — or until its approval's expiry has passed, or ctx ends (then
// it returns ctx's error). It returns the execution as it is then.
//
// It records nothing: to run an approved call the runtime sends the same
// call again (Execute with the same ids and arguments), which dispatches
// it once; past the expiry, that call records the expiry. An execution
// that is not awaiting approval returns at once. Under a Scope (WithScope)
// an execution of another namespace is ErrNotFound, as in Get.
func (e *Executor) AwaitDecision(ctx context.Context, executionID string) (Result, error) {
	tick := time.NewTicker(awaitPoll)
	defer tick.Stop()
	for {
		woken := e.decided.wait()
		rec, err := e.record(ctx, executionID)
		if err != nil {
			return Result{}, err
		}
		if rec.State != ledger.StateAwaitingApproval || rec.Approval == nil || e.now().After(rec.Approval.ExpiresAt) {
			return ResultOf(rec), nil
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-e.closed:
			return Result{}, ErrClosed
		case <-woken:
		case <-tick.C:
		}
	}
}
