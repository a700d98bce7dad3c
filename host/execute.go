package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// Execute runs one tool call durably and returns its result.
//
// The arguments are validated against the operation's schema before
// anything is recorded. Then, for the execution id derived from
// (namespace, session, tool-call id):
//   - a recorded execution with the same argument digest is driven from its
//     state: a terminal one returns the recorded outcome without calling the
//     connector;
//   - a recorded execution with another digest (or tool) is an
//     *IntentMismatchError; nothing is dispatched;
//   - a new call in a fenced session is a *FencedError, and so is the
//     re-drive of an approved call or a due retry in one (see heldByFence);
//   - a new call flagged Resumed in a session the ledger does not know
//     becomes recovery_required: "no record" does not prove "never ran";
//   - a new call of an operation that requires approval is recorded as
//     awaiting_approval;
//   - otherwise the intent is recorded as dispatched (one synced write)
//     before the connector is called, and the outcome right after.
//
// Concurrent identical calls dispatch once; the others wait and return the
// same recorded outcome.
func (e *Executor) Execute(ctx context.Context, call Call) (Result, error) {
	select {
	case <-e.closed:
		return Result{}, ErrClosed
	default:
	}
	if call.Namespace == "" {
		call.Namespace = e.opts.Namespace
	}
	// The caller's context travels as a value past the detached dispatch,
	// so an inline retry wait ends when the caller stops waiting.
	ctx = context.WithValue(ctx, callerKey{}, ctx)
	switch {
	case call.SessionID == "":
		return Result{}, fmt.Errorf("%w: session_id is required", ErrBadCall)
	case call.ToolCallID == "":
		return Result{}, fmt.Errorf("%w: tool_call_id is required", ErrBadCall)
	case call.Tool == "":
		return Result{}, fmt.Errorf("%w: tool is required", ErrBadCall)
	}
	op, err := e.lookup(call.Tool)
	if err != nil {
		return Result{}, err
	}
	doc, digest, err := parseArgs(call.Arguments)
	if err != nil {
		return Result{}, &ArgumentsError{Tool: call.Tool, Err: err}
	}
	if err := op.op.ValidateDoc(doc); err != nil {
		return Result{}, &ArgumentsError{Tool: call.Tool, Err: err}
	}
	id := ledger.ExecutionID(call.Namespace, call.SessionID, call.ToolCallID)
	release, err := e.flights.acquire(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer release()

	fenced, err := e.led.Fenced(ctx, call.Namespace, call.SessionID)
	if err != nil {
		return Result{}, err
	}
	if len(fenced) > 0 || call.Resumed {
		// The rare paths decide on "is there a record?" before creating
		// one: a recorded call is driven even in a fenced session, and a
		// resumed call is judged by its session's history.
		rec, err := e.led.Get(ctx, id)
		switch {
		case err == nil:
			return e.driveRecorded(ctx, call, op, digest, rec)
		case errors.Is(err, ledger.ErrPruned):
			return Result{}, fmt.Errorf("%w: execution[%s]", ErrPruned, id)
		case !errors.Is(err, ledger.ErrNotFound):
			return Result{}, err
		}
		if len(fenced) > 0 {
			return Result{}, fencedError(call.Namespace, call.SessionID, fenced)
		}
	}

	now := e.now()
	rec := ledger.Record{
		Version: ledger.RecordVersion, ID: id,
		Namespace: call.Namespace, SessionID: call.SessionID, ToolCallID: call.ToolCallID,
		Connector: op.m.Connector.Name, Operation: op.op.Name,
		ManifestDigest: op.m.Digest, ModuleDigest: op.conn.ModuleDigest(),
		Effect: string(op.op.Effect), Policy: string(op.op.Recovery), PolicyVersion: op.policyV,
		Args: append([]byte(nil), call.Arguments...), ArgsDigest: digest,
		IdempotencyKey: ledger.IdempotencyKey(call.Namespace, op.m.Connector.Name, id),
		Resumed:        call.Resumed, MaxAttempts: op.op.MaxAttempts,
		CreatedAt: now, UpdatedAt: now,
	}
	ev := ledger.Event{Actor: "executor"}

	// before_intent means "a new call, nothing recorded yet": a call sent
	// again must not reach it, so with the point armed the record is looked
	// up first, as Create would find it.
	if crash.Armed(crash.BeforeIntent) && len(fenced) == 0 && !call.Resumed {
		if existing, err := e.led.Get(ctx, id); err == nil {
			return e.driveRecorded(ctx, call, op, digest, existing)
		}
	}
	crash.At(crash.BeforeIntent)
	if call.Resumed {
		known, err := e.led.SessionKnown(ctx, call.Namespace, call.SessionID)
		if err != nil {
			return Result{}, err
		}
		if !known {
			rec.State = ledger.StateRecoveryRequired
			ev.Decision = "resumed_without_record"
			ev.Reason = "call resumed from history that predates this ledger: no record does not prove it never ran"
			created, err := e.create(ctx, rec, ev)
			if err != nil {
				return e.createFailed(ctx, call, op, digest, created, err)
			}
			return ResultOf(created), nil
		}
	}
	if op.op.RequiresApproval {
		rec.State = ledger.StateAwaitingApproval
		rec.Approval = &ledger.Approval{
			ID: ledger.ApprovalID(id), ArgsDigest: digest, PolicyVersion: op.policyV,
			RequestedAt: now, ExpiresAt: now.Add(op.op.ApprovalTTL), Decision: ledger.ApprovalPending,
		}
		ev.Decision = "intent"
		ev.Evidence = "approval " + rec.Approval.ID + " requested"
		created, err := e.create(ctx, rec, ev)
		if err != nil {
			return e.createFailed(ctx, call, op, digest, created, err)
		}
		crash.At(crash.AfterIntent)
		return ResultOf(created), nil
	}
	// The intent of an ungated call is its dispatch record: one synced
	// write before the connector runs (see RATIONALE.md).
	rec.State = ledger.StateDispatched
	rec.Attempt = 1
	rec.Deadline = now.Add(op.m.Limits.Timeout)
	ev.Decision = "dispatch"
	created, err := e.create(ctx, rec, ev)
	if err != nil {
		return e.createFailed(ctx, call, op, digest, created, err)
	}
	crash.At(crash.AfterIntent)
	crash.At(crash.AfterDispatchRecord)
	return e.dispatch(ctx, op, created)
}

// driveRecorded answers a call whose execution is already recorded: the
// same call is driven from its durable state, another one under the same
// ids is an *IntentMismatchError.
func (e *Executor) driveRecorded(ctx context.Context, call Call, op *operation, digest string, rec ledger.Record) (Result, error) {
	if rec.ArgsDigest != digest || rec.Connector != op.m.Connector.Name || rec.Operation != op.op.Name {
		return Result{}, &IntentMismatchError{
			ExecutionID: rec.ID, ToolCallID: call.ToolCallID,
			RecordedTool: rec.Connector + "." + rec.Operation, GivenTool: call.Tool,
			RecordedDigest: rec.ArgsDigest, GivenDigest: digest,
		}
	}
	return e.drive(ctx, rec, true)
}

// create records a new execution and reports it to the observer. On
// failure it returns what Create returned, for createFailed.
func (e *Executor) create(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	created, err := e.led.Create(ctx, rec, ev)
	if err == nil {
		e.opts.Observer.Transition(created.State, ev.Decision)
	}
	return created, err
}

// createFailed handles a Create that found the execution recorded (the
// common case of a call sent again skips a separate lookup: Create's own
// existence check answers it) or pruned.
func (e *Executor) createFailed(ctx context.Context, call Call, op *operation, digest string, existing ledger.Record, err error) (Result, error) {
	switch {
	case errors.Is(err, ledger.ErrExists):
		return e.driveRecorded(ctx, call, op, digest, existing)
	case errors.Is(err, ledger.ErrPruned):
		return Result{}, fmt.Errorf("%w: execution[%s]", ErrPruned, existing.ID)
	default:
		return Result{}, err
	}
}

// callerKey carries an Execute caller's own context (see Execute).
type callerKey struct{}

func fencedError(ns, session string, recs []ledger.Record) *FencedError {
	fe := &FencedError{Namespace: ns, SessionID: session}
	for _, r := range recs {
		fe.Calls = append(fe.Calls, UncertainCall{ExecutionID: r.ID, ToolCallID: r.ToolCallID, Tool: r.Connector + "." + r.Operation, Attempt: r.Attempt})
	}
	return fe
}

// apply performs one ledger transition and reports it to the observer.
func (e *Executor) apply(ctx context.Context, rec ledger.Record, t ledger.Transition) (ledger.Record, error) {
	t.From, t.FromAttempt = rec.State, rec.Attempt
	if t.Attempt == 0 {
		t.Attempt = rec.Attempt
	}
	if t.Event.Actor == "" {
		t.Event.Actor = "executor"
	}
	start := time.Now()
	out, err := e.led.Apply(ctx, rec.ID, t)
	e.opts.Observer.LedgerWrite(time.Since(start))
	if err != nil {
		return rec, fmt.Errorf("host: execution[%s] %s→%s: %w", rec.ID, t.From, t.To, err)
	}
	e.opts.Observer.Transition(out.State, t.Event.Decision)
	return out, nil
}

// drive moves a recorded execution forward from its durable state, following
// the recovery decision table. The caller holds the execution's flight.
func (e *Executor) drive(ctx context.Context, rec ledger.Record, fromCall bool) (Result, error) {
	for {
		switch rec.State {
		case ledger.StateAwaitingApproval:
			if rec.Approval == nil {
				return e.expire(ctx, rec, "awaiting approval without an approval request")
			}
			if e.now().After(rec.Approval.ExpiresAt) {
				return e.expire(ctx, rec, "approval request expired before a decision")
			}
			return ResultOf(rec), nil

		case ledger.StateApproved:
			a := rec.Approval
			if a == nil {
				return e.requireRecovery(ctx, rec, "invalid_record", "approved without an approval")
			}
			op, err := e.opOf(rec)
			if err != nil {
				// Nothing was dispatched: the approval cannot be used.
				return e.expire(ctx, rec, "connector unavailable: "+err.Error())
			}
			switch {
			case e.now().After(a.ExpiresAt):
				return e.expire(ctx, rec, "approval expired before dispatch")
			case a.ArgsDigest != rec.ArgsDigest:
				return e.expire(ctx, rec, "approval was given for other arguments")
			case a.PolicyVersion != op.policyV:
				return e.expire(ctx, rec, "operation policy changed since the approval (was "+a.PolicyVersion+", now "+op.policyV+")")
			case a.ConsumedBy != 0:
				return e.expire(ctx, rec, "approval already consumed")
			}
			if res, held, err := e.heldByFence(ctx, rec); held || err != nil {
				return res, err
			}
			consumed := *a
			consumed.ConsumedBy = rec.Attempt + 1
			rec, err = e.apply(ctx, rec, ledger.Transition{
				To: ledger.StateDispatched, Attempt: rec.Attempt + 1, Approval: &consumed,
				Deadline: e.now().Add(op.m.Limits.Timeout),
				Event:    ledger.Event{Decision: "dispatch", Evidence: "approval " + a.ID + " by " + a.By},
			})
			if err != nil {
				return Result{}, err
			}
			crash.At(crash.AfterDispatchRecord)
			return e.dispatch(ctx, op, rec)

		case ledger.StateDispatched:
			// The caller holds the flight, so no call of this execution is
			// running in this process: the outcome of the recorded attempt
			// is unknown (a crash, or a call that never reported back).
			return e.decideUncertain(ctx, rec, "dispatched attempt "+fmt.Sprint(rec.Attempt)+" has no recorded outcome")

		case ledger.StateRetryWait:
			op, err := e.opOf(rec)
			if err != nil {
				return e.requireRecovery(ctx, rec, "connector_unavailable", err.Error())
			}
			wait := rec.NextAttemptAt.Sub(e.now())
			if wait > 0 {
				// Only a live call waits inline (a recovery pass leaves the
				// retry to its time), and only while its caller does.
				caller, live := ctx.Value(callerKey{}).(context.Context)
				if !fromCall || !live || wait > e.opts.MaxInlineRetryWait {
					return ResultOf(rec), nil
				}
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-caller.Done():
					t.Stop()
					return ResultOf(rec), nil
				}
			}
			if res, held, err := e.heldByFence(ctx, rec); held || err != nil {
				return res, err
			}
			rec, err = e.apply(ctx, rec, ledger.Transition{
				To: ledger.StateDispatched, Attempt: rec.Attempt + 1,
				Deadline: e.now().Add(op.m.Limits.Timeout),
				Event:    ledger.Event{Decision: "retry_dispatch", Evidence: errorOf(rec)},
			})
			if err != nil {
				return Result{}, err
			}
			crash.At(crash.AfterDispatchRecord)
			return e.dispatch(ctx, op, rec)

		case ledger.StateRecoveryRequired:
			res := ResultOf(rec)
			if why, err := e.recoveryReason(ctx, rec); err != nil {
				return Result{}, err
			} else if why != "" {
				res.Error = why
			}
			return res, nil

		default: // terminal states
			res := ResultOf(rec)
			res.Recorded = fromCall
			return res, nil
		}
	}
}

// heldByFence reports whether rec's next dispatch (an approved call's
// first, or a retry) must wait because its session is fenced: an uncertain
// call in the session stops every new attempt in it, not only new calls,
// until an operator resolves it - the approved or retried action may depend
// on what the uncertain one did. A live call (Execute) gets the
// *FencedError; a recovery pass or an operator's Resolve leaves the record
// as it is for a later pass.
func (e *Executor) heldByFence(ctx context.Context, rec ledger.Record) (res Result, held bool, err error) {
	fenced, err := e.led.Fenced(ctx, rec.Namespace, rec.SessionID)
	_, live := ctx.Value(callerKey{}).(context.Context) // set by Execute only
	switch {
	case err != nil:
		return Result{}, true, err
	case len(fenced) == 0:
		return Result{}, false, nil
	case live:
		return Result{}, true, fencedError(rec.Namespace, rec.SessionID, fenced)
	default:
		return ResultOf(rec), true, nil
	}
}

// recoveryReason returns the decision and evidence that made rec
// recovery_required, from its audit trail.
func (e *Executor) recoveryReason(ctx context.Context, rec ledger.Record) (string, error) {
	evs, err := e.led.Events(ctx, rec.ID)
	if err != nil {
		return "", err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if ev := evs[i]; ev.To == ledger.StateRecoveryRequired {
			if ev.Evidence == "" {
				return ev.Decision + ": " + ev.Reason, nil
			}
			return ev.Decision + ": " + ev.Evidence, nil
		}
	}
	return "", nil
}

func errorOf(rec ledger.Record) string {
	if rec.Outcome != nil {
		return rec.Outcome.Error
	}
	return ""
}

func (e *Executor) expire(ctx context.Context, rec ledger.Record, reason string) (Result, error) {
	var ap *ledger.Approval
	if rec.Approval != nil {
		a := *rec.Approval
		a.Decision = ledger.ApprovalExpired
		ap = &a
	}
	rec, err := e.apply(ctx, rec, ledger.Transition{To: ledger.StateExpired, Approval: ap,
		Event: ledger.Event{Decision: "expired", Reason: reason}})
	if err != nil {
		return Result{}, err
	}
	return ResultOf(rec), nil
}

func (e *Executor) requireRecovery(ctx context.Context, rec ledger.Record, decision, evidence string) (Result, error) {
	rec, err := e.apply(ctx, rec, ledger.Transition{To: ledger.StateRecoveryRequired,
		Event: ledger.Event{Decision: decision, Evidence: evidence, Actor: "recovery"}})
	if err != nil {
		return Result{}, err
	}
	res := ResultOf(rec)
	res.Error = decision + ": " + evidence
	return res, nil
}

// exportFor picks the entry point of a dispatch: execute_with_key whenever
// the operation implements it (it needs the key to tag or deduplicate the
// effect), execute otherwise.
func exportFor(op *operation) string {
	if op.info.ExecuteWithKey {
		return abi.ExportExecuteWithKey
	}
	return abi.ExportExecute
}

// dispatch calls the connector for the dispatched record rec and records the
// typed outcome. The connector call and the outcome write run detached from
// the caller's cancellation: once an attempt is dispatched, abandoning it
// half-way would only turn a known outcome into an unknown one. The
// operation's timeout still bounds the call.
func (e *Executor) dispatch(ctx context.Context, op *operation, rec ledger.Record) (Result, error) {
	ctx = context.WithoutCancel(ctx)
	export := exportFor(op)
	req := CallRequest{Export: export, Operation: op.op.Name, ExecutionID: rec.ID, Args: rec.Args}
	if export == abi.ExportExecuteWithKey {
		req.Key = rec.IdempotencyKey
	}
	start := time.Now()
	out, callErr := op.conn.Call(ctx, req)
	e.opts.Observer.ConnectorCall(op.m.Connector.Name, op.op.Name, export, time.Since(start), callErr)
	crash.At(crash.AfterPluginReturn)

	if callErr != nil {
		var ce *CallError
		if errors.As(callErr, &ce) && !ce.MayHaveActed() {
			// The guest never ran: nothing happened, so any policy may try
			// again. Only a call the module cannot take at all is final.
			o := &ledger.Outcome{Kind: abi.OutcomePermanent.String(), Error: callErr.Error(), Source: "host"}
			if ce.Kind == KindUnknownOperation || ce.Kind == KindUnsupportedExport {
				return e.finish(ctx, rec, ledger.StateFailed, o, "outcome")
			}
			o.Kind = abi.OutcomeRetryable.String()
			return e.retryOrFail(ctx, rec, o, callErr.Error())
		}
		// A trap, timeout or garbage answer: the connector may have acted.
		// That is the same uncertainty as a crash, and gets the same
		// decision - except that the attempt's request may still be in
		// flight at the provider right now, so a reconcile waits for it to
		// settle first (see reconcileSettle).
		return e.decideUncertainSettled(ctx, rec, "attempt "+fmt.Sprint(rec.Attempt)+" failed inside the connector: "+callErr.Error(), true)
	}
	outcome := &ledger.Outcome{Kind: out.Kind.String(), Result: out.Result, Receipt: out.Receipt, Error: out.Error, Source: "connector"}
	switch out.Kind {
	case abi.OutcomeOK:
		return e.finish(ctx, rec, ledger.StateSucceeded, outcome, "outcome")
	case abi.OutcomeRetryable:
		return e.retryOrFail(ctx, rec, outcome, out.Error)
	default: // permanent (reconcile kinds are refused by the runtime)
		return e.finish(ctx, rec, ledger.StateFailed, outcome, "outcome")
	}
}

// retryOrFail records a retryable failure of the current attempt: a
// persisted retry_wait with the next attempt's time while attempts remain,
// failed once they are exhausted.
func (e *Executor) retryOrFail(ctx context.Context, rec ledger.Record, outcome *ledger.Outcome, why string) (Result, error) {
	if rec.Attempt >= rec.MaxAttempts {
		outcome.Error = fmt.Sprintf("attempts exhausted (%d of %d): %s", rec.Attempt, rec.MaxAttempts, why)
		return e.finish(ctx, rec, ledger.StateFailed, outcome, "attempts_exhausted")
	}
	outcome.Attempt = rec.Attempt
	next := e.now().Add(e.opts.RetryBackoff(rec.Attempt))
	rec, err := e.apply(ctx, rec, ledger.Transition{To: ledger.StateRetryWait, Outcome: outcome, NextAttemptAt: next,
		Event: ledger.Event{Decision: "retry_scheduled", Evidence: why}})
	if err != nil {
		return Result{}, err
	}
	crash.At(crash.AfterOutcomeRecord)
	return e.drive(ctx, rec, true)
}

// finish records a terminal outcome for the record's current attempt.
func (e *Executor) finish(ctx context.Context, rec ledger.Record, to ledger.State, o *ledger.Outcome, decision string) (Result, error) {
	o.Attempt = rec.Attempt
	evidence := o.Receipt
	if evidence == "" {
		evidence = o.Error
	}
	rec, err := e.apply(ctx, rec, ledger.Transition{To: to, Outcome: o,
		Event: ledger.Event{Decision: decision, Evidence: evidence}})
	if err != nil {
		return Result{}, err
	}
	crash.At(crash.AfterOutcomeRecord)
	return ResultOf(rec), nil
}

// decideUncertain applies the recovery decision table to a dispatched
// execution whose outcome is unknown.
func (e *Executor) decideUncertain(ctx context.Context, rec ledger.Record, why string) (Result, error) {
	return e.decideUncertainSettled(ctx, rec, why, false)
}

// reconcileSettle is how long a reconcile waits after an attempt failed in
// this process (timeout, trap): the host stopped waiting, but the request
// it sent may still be on its way through the provider, and a lookup made
// at once would answer "not applied" for an effect about to land - and the
// re-dispatch would apply it twice. The attempt's own timeout is the
// measure of how long the provider may take; it is capped at a minute.
func reconcileSettle(op *operation) time.Duration {
	return min(op.m.Limits.Timeout, time.Minute)
}

func (e *Executor) decideUncertainSettled(ctx context.Context, rec ledger.Record, why string, inFlight bool) (Result, error) {
	ctx = context.WithoutCancel(ctx)
	op, err := e.opOf(rec)
	if err != nil {
		return e.requireRecovery(ctx, rec, "connector_unavailable", why+"; "+err.Error())
	}
	switch {
	case rec.CancelRequested && rec.Effect == string(manifests.EffectRead):
		// A read has no effect to account for: honour the cancellation.
		rec, err := e.apply(ctx, rec, ledger.Transition{To: ledger.StateCancelled,
			Event: ledger.Event{Decision: "cancelled", Evidence: why, Actor: "recovery"}})
		if err != nil {
			return Result{}, err
		}
		return ResultOf(rec), nil
	case rec.CancelRequested && rec.Policy != string(manifests.PolicyReconcile):
		// Retrying would perform what was cancelled; only an operator can
		// tell whether it happened.
		return e.requireRecovery(ctx, rec, "cancelled_uncertain", why+"; cancellation was requested")
	case rec.Effect == string(manifests.EffectRead):
		// The effect class recorded with the intent decides, not today's
		// manifest: a call recorded as external is never re-run as a read.
		return e.redispatch(ctx, op, rec, "recover_reread", why)
	case rec.Policy == string(manifests.PolicyIdempotentRetry):
		if age := e.now().Sub(rec.CreatedAt); age > e.opts.KeyRetention {
			return e.requireRecovery(ctx, rec, "key_retention_passed",
				fmt.Sprintf("%s; the call is %s old, past the provider's key retention of %s, so a retry could apply it again", why, age.Round(time.Second), e.opts.KeyRetention))
		}
		return e.redispatch(ctx, op, rec, "recover_retry", why)
	case rec.Policy == string(manifests.PolicyReconcile):
		if inFlight {
			t := time.NewTimer(reconcileSettle(op))
			select {
			case <-t.C:
			case <-e.closed:
				t.Stop()
				return ResultOf(rec), ErrClosed // still dispatched: the next Open decides
			}
		}
		return e.reconcile(ctx, op, rec, why)
	default:
		return e.requireRecovery(ctx, rec, "manual_policy", why)
	}
}

// redispatch dispatches attempt+1 of an uncertain execution with the same
// idempotency key, or asks an operator when no attempt is left.
func (e *Executor) redispatch(ctx context.Context, op *operation, rec ledger.Record, decision, why string) (Result, error) {
	if rec.Attempt >= rec.MaxAttempts {
		return e.requireRecovery(ctx, rec, "attempts_exhausted_uncertain", why)
	}
	rec, err := e.apply(ctx, rec, ledger.Transition{To: ledger.StateDispatched, Attempt: rec.Attempt + 1,
		Deadline: e.now().Add(op.m.Limits.Timeout),
		Event:    ledger.Event{Decision: decision, Evidence: why, Actor: "recovery"}})
	if err != nil {
		return Result{}, err
	}
	crash.At(crash.AfterDispatchRecord)
	return e.dispatch(ctx, op, rec)
}

// reconcile asks the connector whether the uncertain attempt took effect.
func (e *Executor) reconcile(ctx context.Context, op *operation, rec ledger.Record, why string) (Result, error) {
	req := CallRequest{Export: abi.ExportReconcile, Operation: op.op.Name, Key: rec.IdempotencyKey, ExecutionID: rec.ID, Args: rec.Args}
	start := time.Now()
	out, err := op.conn.Call(ctx, req)
	e.opts.Observer.ConnectorCall(op.m.Connector.Name, op.op.Name, abi.ExportReconcile, time.Since(start), err)
	crash.At(crash.AfterReconcileReturn)
	if err != nil {
		return e.requireRecovery(ctx, rec, "reconcile_error", why+"; reconcile failed: "+err.Error())
	}
	switch out.Kind {
	case abi.OutcomeApplied:
		o := &ledger.Outcome{Kind: out.Kind.String(), Result: out.Result, Receipt: out.Receipt, Source: "reconciled"}
		o.Attempt = rec.Attempt
		rec, err := e.apply(ctx, rec, ledger.Transition{To: ledger.StateSucceeded, Outcome: o,
			Event: ledger.Event{Decision: "reconciled_applied", Evidence: out.Receipt, Actor: "recovery", Reason: why}})
		if err != nil {
			return Result{}, err
		}
		crash.At(crash.AfterOutcomeRecord)
		return ResultOf(rec), nil
	case abi.OutcomeNotApplied:
		if rec.CancelRequested {
			// Cooperative cancellation after dispatch: reconcile proved the
			// call never took effect, so it ends cancelled, not retried.
			rec, err := e.apply(ctx, rec, ledger.Transition{To: ledger.StateCancelled,
				Event: ledger.Event{Decision: "cancelled_not_applied", Evidence: out.Error, Actor: "recovery", Reason: why}})
			if err != nil {
				return Result{}, err
			}
			return ResultOf(rec), nil
		}
		if rec.Attempt >= rec.MaxAttempts {
			o := &ledger.Outcome{Kind: out.Kind.String(), Error: "not applied and no attempt left: " + out.Error, Source: "reconciled"}
			return e.finish(ctx, rec, ledger.StateFailed, o, "reconciled_not_applied")
		}
		return e.redispatch(ctx, op, rec, "reconciled_not_applied", "reconcile: not applied: "+out.Error)
	default:
		return e.requireRecovery(ctx, rec, "reconcile_unknown", why+"; reconcile: "+out.Error)
	}
}
