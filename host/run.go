package host

import (
	"context"
	"time"
)

// Run drives the executor's timers until ctx is done: every interval it
// runs a recovery pass over the executions that are due (the ledger's due
// index, see ledger.DueAt), which dispatches retries whose persisted
// next-attempt time has come (calls whose runtime is not waiting for
// them), decides dispatched calls nobody is running and expires approval
// requests past their deadline, and reads nothing else, so executions
// waiting for a reviewer or an operator cost it nothing; on a fleet
// ledger it also takes over the calls of nodes whose lease expired, and it
// skips its passes while the node holds no live lease, and prunes the
// journal of consumed approvals once an hour. A server runs
// it in its own goroutine; an interval <= 0 means one second. Errors of
// one pass are logged and the next pass runs anyway.
func (e *Executor) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.closed:
			return
		case <-t.C:
		}
		if e.Health() != nil {
			continue // the node's lease renewal reports why
		}
		if _, err := e.recoverDue(ctx); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("background recovery pass failed", "error", err)
		}
		e.maybePrune()
	}
}
