package host

import (
	"context"
	"errors"
	"time"

	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/ledger"
)

// Decision is a reviewer's answer to an approval request.
type Decision struct {
	// By identifies the reviewer. Required. When Options.ApprovalKeys
	// holds a key for By, the decision is signed with it; on a shared
	// ledger it must.
	By string `json:"by"`
	// ArgsDigest is the argument digest the reviewer was shown. Approve
	// refuses a digest other than the recorded one.
	ArgsDigest string `json:"digest"`
	Reason     string `json:"reason,omitempty"`
	// StateNonce, when set, is the nonce of the single-use request state
	// through which the reviewer answered (an MCP input request; see
	// ledger.Approval.StateNonce). The decision records it, which consumes
	// the state: a second decision naming it is refused with
	// ErrStateUsed, whatever the execution became since.
	StateNonce string `json:"-"`
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

func (e *Executor) decide(ctx context.Context, approvalID string, d Decision, approve bool) (_ Result, err error) {
	if d.By == "" {
		return Result{}, refuse(ErrBadCall, "a decision needs the reviewer's identity")
	}
	id, ok := ledger.ExecutionIDOfApproval(approvalID)
	if !ok {
		return Result{}, refuse(ErrNotFound, "no approval %q", approvalID)
	}
	release, err := e.flights.acquire(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer release()
	rec, err := e.record(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && rec.Approval == nil) {
		return Result{}, refuse(ErrNotFound, "no approval %q", approvalID)
	}
	if err != nil {
		return Result{}, err
	}
	// The decision joins the trace of the call it decides, however much
	// later it comes, linked to the reviewer's request.
	name := telemetry.SpanApprove
	if !approve {
		name = telemetry.SpanReject
	}
	ctx, span := joinRecorded(ctx, name, rec)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(telemetry.ApprovalID.String(approvalID))
			telemetry.Fail(span, errorType(err), err)
		}
		span.End()
	}()
	if d.StateNonce != "" && rec.Approval.StateNonce == d.StateNonce {
		return ResultOf(rec), stateUsed(approvalID, rec)
	}
	if !e.reviews(d.By, rec.Namespace) {
		// The same answer whoever asks: a node's API (whose scope already
		// answers such an id as unknown) or a command on the shared
		// ledger directly, with a reviewer's token and the connection
		// string.
		return Result{}, refuse(ErrNamespaceForbidden, "%s reviews the calls of namespace %s only; approval %s is of a call in namespace %q: nothing was recorded",
			d.By, quoteList(e.opts.ApprovalNamespaces[d.By]), approvalID, rec.Namespace)
	}
	if rec.State != ledger.StateAwaitingApproval {
		return ResultOf(rec), refuse(ErrNotAwaitingApproval, "approval %s is %s, not pending (execution %s is %s)", approvalID, rec.Approval.Decision, id, rec.State)
	}
	if approve && d.ArgsDigest != rec.ArgsDigest {
		return ResultOf(rec), refuse(ErrApprovalDigest, "approval %s: the reviewer saw arguments with digest %s, but the recorded arguments have digest %s; approve what was recorded (its args_digest), or nothing", approvalID, d.ArgsDigest, rec.ArgsDigest)
	}
	if e.now().After(rec.Approval.ExpiresAt) {
		res, err := e.expire(ctx, rec, "approval request expired before a decision")
		if err != nil {
			return Result{}, err
		}
		return res, refuse(ErrApprovalExpired, "approval %s expired at %s; the execution is expired and will not run", approvalID, rec.Approval.ExpiresAt.UTC().Format(time.RFC3339))
	}
	a := *rec.Approval
	a.By, a.Reason, a.DecidedAt, a.StateNonce = d.By, d.Reason, e.now(), d.StateNonce
	t := ledger.Transition{Approval: &a, Event: ledger.Event{Actor: d.By, Reason: d.Reason, Evidence: "digest " + d.ArgsDigest}}
	if approve {
		a.Decision, t.To, t.Event.Decision = ledger.ApprovalApproved, ledger.StateApproved, string(DecisionApproved)
	} else {
		a.Decision, t.To, t.Event.Decision = ledger.ApprovalRejected, ledger.StateRejected, string(DecisionRejected)
	}
	// The reviewer's key signs the decision (see signature.go). On a
	// shared ledger a decision nobody can sign is refused: no node would
	// dispatch its approval, and the trail would name a reviewer who did
	// not make it.
	switch key, ok := e.opts.ApprovalKeys[d.By]; {
	case ok:
		a.Signature = signApproval(key, rec, a)
		t.Event.Evidence += "; signed with " + d.By + "'s key " + keyID(key)
	case e.shared:
		return ResultOf(rec), refuse(ErrBadCall, "decision on the shared ledger: %q is no approver principal of this process's configuration, so the decision cannot be signed, and nodes dispatch only approvals signed with an approver's token; decide through a node's API with your token",
			d.By)
	}
	next, err := e.apply(ctx, rec, t)
	if errors.Is(err, ledger.ErrStateUsed) {
		// The same state's answer was recorded meanwhile (through another
		// node of a fleet, or a concurrent replay).
		if now, gerr := e.led.Get(ctx, id); gerr == nil && now.Approval != nil {
			return ResultOf(now), stateUsed(approvalID, now)
		}
		return Result{}, refuse(ErrStateUsed, "approval %s: the answer of this request state was recorded already; nothing was decided again", approvalID)
	}
	if errors.Is(err, ledger.ErrConflict) {
		// Another node of a fleet wrote the execution since it was read
		// here: a decision through it, most likely.
		if now, gerr := e.led.Get(ctx, id); gerr == nil && now.State != ledger.StateAwaitingApproval && now.Approval != nil {
			return ResultOf(now), refuse(ErrNotAwaitingApproval, "approval %s was decided meanwhile: it is %s by %s, not pending (execution %s is %s)",
				approvalID, now.Approval.Decision, now.Approval.By, id, now.State)
		}
	}
	if err != nil {
		return Result{}, err
	}
	rec = next
	e.decided.signal()
	if approve {
		crash.At(crash.AfterApproval)
	}
	return ResultOf(rec), nil
}

// stateUsed is the refusal of a decision through a request state whose
// answer rec's approval records already.
func stateUsed(approvalID string, rec ledger.Record) error {
	a := rec.Approval
	return refuse(ErrStateUsed, "approval %s: this request state was used already: its answer was recorded (%s by %s at %s), and nothing was decided again (execution %s is %s)",
		approvalID, a.Decision, a.By, a.DecidedAt.UTC().Format(time.RFC3339), rec.ID, rec.State)
}
