package toolcall

import (
	"context"
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
