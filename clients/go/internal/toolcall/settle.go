package toolcall

import (
	"context"
	"log/slog"
	"time"

	"github.com/connhost/connhost/host"
)

// Settle drives the recorded execution of call's ids as a re-send of the
// same call does, and runs nothing when no execution has them (it records
// them as cancelled, never run): host.Execute with ToolCall.Settle. A
// resumed run settles each call its saved state holds without an answer.
func Settle(ctx context.Context, ex *host.Executor, call host.ToolCall) (host.Result, error) {
	call.Settle = true
	return ex.Execute(ctx, call)
}

// Undecided reports whether res still waits for a reviewer: awaiting
// approval, and its approval has not expired (an expired one is recorded
// as such by the next Execute or Settle of the call).
func Undecided(res host.Result, now time.Time) bool {
	if res.Status != host.StatusAwaitingApproval {
		return false
	}
	return res.Approval == nil || res.Approval.ExpiresAt.IsZero() || now.Before(res.Approval.ExpiresAt)
}

// LogAwaiting logs, at INFO, that a call awaits a reviewer's approval and
// how long the adapter waits for the decision (0: it does not wait), with
// what a reviewer decides on: the approval id and the arguments' digest
// (`connhost approve ID --digest DIGEST`).
func LogAwaiting(logger *slog.Logger, adapter, approvalID, argsDigest, executionID, toolCallID string, wait time.Duration) {
	logger.Info(adapter+": a call awaits a reviewer's approval",
		"approval_id", approvalID, "args_digest", argsDigest, "execution_id", executionID,
		"tool_call_id", toolCallID, "wait", wait.String())
}
