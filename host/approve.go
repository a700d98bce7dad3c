package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/ledger"
)

// Decision is a reviewer's answer to an approval request.
type Decision struct {
	// By identifies the reviewer. Required.
	By string `json:"by"`
	// ArgsDigest is the argument digest the reviewer was shown. Approve
	// refuses a digest other than the recorded one.
	ArgsDigest string `json:"digest"`
	Reason     string `json:"reason,omitempty"`
}

// Approve approves an execution's approval request. The approval is bound to
// the recorded argument digest and policy version and is consumed by the
// first dispatch; the runtime re-drives the call (Execute with the same
// ids and arguments) to dispatch it.
func (e *Executor) Approve(ctx context.Context, approvalID string, d Decision) (Result, error) {
	return e.decide(ctx, approvalID, d, true)
}

// Reject rejects an execution's approval request; the execution becomes
// rejected and is never dispatched.
func (e *Executor) Reject(ctx context.Context, approvalID string, d Decision) (Result, error) {
	return e.decide(ctx, approvalID, d, false)
}

func (e *Executor) decide(ctx context.Context, approvalID string, d Decision, approve bool) (Result, error) {
	if d.By == "" {
		return Result{}, fmt.Errorf("%w: a decision needs the reviewer's identity", ErrBadCall)
	}
	id, ok := ledger.ExecutionIDOfApproval(approvalID)
	if !ok {
		return Result{}, fmt.Errorf("%w: approval %q", ErrNotFound, approvalID)
	}
	release, err := e.flights.acquire(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer release()
	rec, err := e.led.Get(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && rec.Approval == nil) {
		return Result{}, fmt.Errorf("%w: approval %q", ErrNotFound, approvalID)
	}
	if err != nil {
		return Result{}, err
	}
	if rec.State != ledger.StateAwaitingApproval {
		return ResultOf(rec), fmt.Errorf("%w: approval %s of execution[%s] is %s (execution %s)", ErrNotAwaitingApproval, approvalID, id, rec.Approval.Decision, rec.State)
	}
	if approve && d.ArgsDigest != rec.ArgsDigest {
		return ResultOf(rec), fmt.Errorf("%w: approval %s: reviewer saw %s, recorded %s", ErrApprovalDigest, approvalID, short(d.ArgsDigest), short(rec.ArgsDigest))
	}
	if e.now().After(rec.Approval.ExpiresAt) {
		res, err := e.expire(ctx, rec, "approval request expired before a decision")
		if err != nil {
			return Result{}, err
		}
		return res, fmt.Errorf("%w: approval %s expired at %s", ErrApprovalExpired, approvalID, rec.Approval.ExpiresAt)
	}
	a := *rec.Approval
	a.By, a.Reason, a.DecidedAt = d.By, d.Reason, e.now()
	t := ledger.Transition{Approval: &a, Event: ledger.Event{Actor: d.By, Reason: d.Reason, Evidence: "digest " + d.ArgsDigest}}
	if approve {
		a.Decision, t.To, t.Event.Decision = ledger.ApprovalApproved, ledger.StateApproved, string(DecisionApproved)
	} else {
		a.Decision, t.To, t.Event.Decision = ledger.ApprovalRejected, ledger.StateRejected, string(DecisionRejected)
	}
	rec, err = e.apply(ctx, rec, t)
	if err != nil {
		return Result{}, err
	}
	if approve {
		crash.At(crash.AfterApproval)
	}
	return ResultOf(rec), nil
}
