package host

import (
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel/attribute"

	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/ledger"
)

// Resolution is an operator's decision on a recovery_required execution.
type Resolution struct {
	// Applied: the operator verified that the effect happened. Result and
	// Receipt describe it and become the execution's recorded outcome.
	Applied bool            `json:"applied"`
	Result  json.RawMessage `json:"result,omitempty"`
	Receipt string          `json:"receipt,omitempty"`
	// Retry (with Applied false): the effect did not happen; dispatch again
	// with the same key. Without Retry the execution is abandoned.
	Retry bool `json:"retry,omitempty"`
	// By and Reason are required: every resolution is audited.
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// Resolve records an operator's decision on a recovery_required execution
// and, with Retry, dispatches it again. Once a session holds no
// recovery_required execution it is no longer fenced.
func (e *Executor) Resolve(ctx context.Context, executionID string, r Resolution) (_ Result, err error) {
	if r.By == "" || r.Reason == "" {
		return Result{}, refuse(ErrBadCall, "a resolution needs the operator's name and a reason")
	}
	if r.Applied && r.Retry {
		return Result{}, refuse(ErrBadCall, "an applied call cannot be retried")
	}
	if len(r.Result) > 0 && !json.Valid(r.Result) {
		return Result{}, refuse(ErrBadCall, "result is not valid JSON")
	}
	release, err := e.flights.acquire(ctx, executionID)
	if err != nil {
		return Result{}, err
	}
	defer release()
	rec, err := e.record(ctx, executionID)
	if err != nil {
		return Result{}, err
	}
	// The resolution joins the trace of the call it resolves.
	ctx, span := joinRecorded(ctx, telemetry.SpanResolve, rec)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.Bool("connhost.resolution.applied", r.Applied), attribute.Bool("connhost.resolution.retry", r.Retry))
			telemetry.Fail(span, errorType(err), err)
		}
		span.End()
	}()
	if rec.State != ledger.StateRecoveryRequired {
		return ResultOf(rec), refuse(ErrNotRecoveryRequired, "execution %s is %s, not recovery_required: only calls whose outcome is unknown are resolved", executionID, rec.State)
	}
	res := &ledger.Resolution{Applied: r.Applied, Retry: r.Retry, By: r.By, Reason: r.Reason, At: e.now()}
	ev := ledger.Event{Actor: r.By, Reason: r.Reason}
	switch {
	case r.Applied:
		ev.Decision, ev.Evidence = string(DecisionOperatorApplied), r.Receipt
		rec, err = e.apply(ctx, rec, ledger.Transition{To: ledger.StateSucceeded, Resolution: res, Event: ev,
			Outcome: &ledger.Outcome{Kind: "operator", Result: r.Result, Receipt: r.Receipt, Source: "operator", Attempt: rec.Attempt}})
		if err == nil {
			op, _ := e.opOf(rec)
			e.noteApplied(rec, op) // the operator's word: no dispatch of it may follow
		}
	case r.Retry:
		op, lerr := e.opOf(rec)
		if lerr != nil {
			return Result{}, lerr
		}
		// An operator's resolution is not a reviewer's approval, and a
		// cancelled call is not to be performed after all.
		if op.op.RequiresApproval && (rec.Approval == nil || rec.Approval.Decision != ledger.ApprovalApproved) {
			return ResultOf(rec), refuse(ErrApprovalRequired, "execution %s was never approved, so it cannot be retried: resolve it as not applied without retry, and issue a new call for approval", executionID)
		}
		if e.gatedOnShared(op) {
			if why := e.unverified(rec); why != "" {
				return ResultOf(rec), refuse(ErrApprovalRequired, "execution %s cannot be retried: %s; resolve it as not applied without retry, and issue a new call for approval", executionID, why)
			}
		}
		if rec.CancelRequested {
			return ResultOf(rec), refuse(ErrBadCall, "execution %s was cancelled: it can be abandoned or resolved as applied, not retried", executionID)
		}
		// The operator's word that nothing happened is the evidence that
		// clears the execution's uncertainty.
		ev.Decision = string(DecisionOperatorRetry)
		rec, err = e.apply(ctx, rec, ledger.Transition{To: ledger.StateDispatched, Attempt: rec.Attempt + 1, Resolution: res, Event: ev,
			Deadline: e.now().Add(op.m.Limits.Timeout), RuledOut: true})
		if err != nil {
			return Result{}, err
		}
		return e.attempt(ctx, nil, op, rec, nil)
	default:
		ev.Decision = string(DecisionOperatorAbandon)
		rec, err = e.apply(ctx, rec, ledger.Transition{To: ledger.StateAbandoned, Resolution: res, Event: ev})
	}
	if err != nil {
		return Result{}, err
	}
	return ResultOf(rec), nil
}

// Cancel asks for an execution to be cancelled. Before dispatch it is
// cancelled at once, and a pending approval request with it (its decision
// becomes cancelled; a request already past its expiry makes the execution
// expired instead); once dispatched, cancellation is cooperative: the flag
// is recorded and, if the outcome turns out unknown, recovery never
// re-dispatches it (it reconciles, or asks an operator). A
// recovery_required execution is refused with ErrRecoveryRequired: its
// effect may have happened, so only an operator's Resolve settles it. A
// terminal execution is returned unchanged. A call that is running in this
// process right now cannot be interrupted: Cancel waits for its attempt to
// end (at most the operation's timeout) and returns what it recorded.
func (e *Executor) Cancel(ctx context.Context, executionID, by string) (Result, error) {
	if by == "" {
		return Result{}, refuse(ErrBadCall, "cancel needs the requester's identity")
	}
	release, err := e.flights.acquire(ctx, executionID)
	if err != nil {
		return Result{}, err
	}
	defer release()
	rec, err := e.record(ctx, executionID)
	if err != nil {
		return Result{}, err
	}
	ev := ledger.Event{Actor: by}
	switch {
	case rec.State == ledger.StateRetryWait && rec.Uncertain:
		// An earlier attempt may have taken effect: "cancelled" would tell
		// the runtime it did not. Only an operator can settle it now.
		ev.Decision = string(DecisionCancelledUncertain)
		ev.Evidence = "cancel requested while an earlier attempt's effect is unknown"
		rec, err = e.apply(ctx, rec, ledger.Transition{To: ledger.StateRecoveryRequired, CancelRequested: true, Event: ev})
	case rec.State == ledger.StateAwaitingApproval && rec.Approval != nil && e.now().After(rec.Approval.ExpiresAt):
		// The request expired before anyone cancelled it: it is recorded
		// as what it is, as a decision on it would be.
		return e.expire(ctx, rec, "approval request expired before the cancellation")
	case rec.State == ledger.StateAwaitingApproval || rec.State == ledger.StateApproved || rec.State == ledger.StateRetryWait:
		ev.Decision = string(DecisionCancelled)
		t := ledger.Transition{To: ledger.StateCancelled, Event: ev}
		if rec.State == ledger.StateAwaitingApproval && rec.Approval != nil {
			// The request is withdrawn: the record must not go on saying
			// it waits for a reviewer.
			a := *rec.Approval
			a.Decision, a.By, a.DecidedAt = ledger.ApprovalCancelled, by, e.now()
			t.Approval = &a
		}
		rec, err = e.apply(ctx, rec, t)
	case rec.State == ledger.StateDispatched:
		ev.Decision = string(DecisionCancelAsked)
		rec, err = e.apply(ctx, rec, ledger.Transition{To: ledger.StateDispatched, CancelRequested: true, Event: ev})
	case rec.State == ledger.StateRecoveryRequired:
		// Returning the record unchanged would read as "nothing to cancel"
		// while the session stays fenced and the effect may have happened.
		return ResultOf(rec), refuse(ErrRecoveryRequired, "execution %s has an unknown outcome, which cancelling cannot settle; an operator must resolve it (connhost resolve %s)",
			executionID, executionID)
	default:
		return ResultOf(rec), nil
	}
	if err != nil {
		return Result{}, err
	}
	return ResultOf(rec), nil
}

// Get returns an execution's record and audit trail.
func (e *Executor) Get(ctx context.Context, executionID string) (ledger.Record, []ledger.Event, error) {
	rec, err := e.record(ctx, executionID)
	if err != nil {
		return ledger.Record{}, nil, err
	}
	evs, err := e.led.Events(ctx, executionID)
	return rec, evs, err
}

// record reads an execution's record for a request that names it:
// ErrNotFound or ErrPruned (refusals a caller can act on), or the record.
//
// Under a Scope, an execution of another namespace is answered exactly as
// an unknown one: its existence is not the caller's to learn.
func (e *Executor) record(ctx context.Context, executionID string) (ledger.Record, error) {
	rec, err := e.led.Get(ctx, executionID)
	switch {
	case errors.Is(err, ledger.ErrNotFound) || (err == nil || errors.Is(err, ledger.ErrPruned)) && !inScope(ctx, rec.Namespace):
		return ledger.Record{}, refuse(ErrNotFound, "no execution %q", executionID)
	case errors.Is(err, ledger.ErrPruned):
		return ledger.Record{}, prunedError(executionID)
	}
	return rec, err
}
