package toolcall

import (
	"context"
	"errors"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// Settle drives the recorded execution of call's ids as a re-send of the
// same call does, and runs nothing when no execution has them: it is
// host.Execute with ToolCall.Settle set (see the settle contract in
// host.ToolCall). A resumed run settles each call its saved state holds
// without an answer.
func Settle(ctx context.Context, ex *host.Executor, call host.ToolCall) (host.Result, error) {
	// TODO(settle): call.Settle = true; return ex.Execute(ctx, call)
	ns := call.Namespace
	if ns == "" {
		ns = ledger.DefaultNamespace
	}
	if _, _, err := ex.Get(ctx, ledger.ExecutionID(ns, call.SessionID, call.ToolCallID)); errors.Is(err, host.ErrNotFound) {
		return host.Result{SessionID: call.SessionID, ToolCallID: call.ToolCallID, Namespace: ns, Tool: call.Tool,
			Status: host.StatusCancelled, State: ledger.StateCancelled,
			Error: "the call never reached connhost before the runtime settled it; it did not run"}, nil
	}
	return ex.Execute(ctx, call)
}

// AwaitDecision waits until the execution has left awaiting_approval or
// ctx ends, and returns it as it is then (host.Executor.AwaitDecision).
func AwaitDecision(ctx context.Context, ex *host.Executor, executionID string) (host.Result, error) {
	// TODO(settle): return ex.AwaitDecision(ctx, executionID)
	for {
		rec, _, err := ex.Get(ctx, executionID)
		if err != nil {
			return host.Result{}, err
		}
		if rec.State != ledger.StateAwaitingApproval {
			return host.ResultOf(rec), nil
		}
		select {
		case <-ctx.Done():
			return host.ResultOf(rec), ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
