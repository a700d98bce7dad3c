package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/internal/wasmrt"
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
//     becomes recovery_required: "no record" does not prove "never ran"
//     (a read simply runs: it has nothing to duplicate);
//   - a call flagged Settle (a runtime settling, on resume, a call its
//     saved state holds without a result) is never run as a new call:
//     with no record it is recorded cancelled at attempt 0 (it never
//     reached the host, so nothing ran), and the original request, should
//     it arrive later, finds that record and does not run either;
//   - a new call of an operation with a duplicate window
//     (manifests.Operation.DuplicateWindow) whose intent (the arguments
//     of manifests.Operation.Intent, normalised as it says) repeats a call
//     of the same session created within the window that succeeded or is
//     still in flight is not dispatched: it is recorded as
//     awaiting_approval with Result.DuplicateOf naming the earlier
//     execution (a human decides; approving it runs it as any approved
//     call), or, where the operation declares on_duplicate = "answer" and
//     the earlier call succeeded, as succeeded with the earlier outcome;
//   - a new call of an operation that requires approval is recorded as
//     awaiting_approval (unless the caller's scope holds its limit of
//     them, see Scope);
//   - otherwise the intent is recorded as dispatched (one synced write)
//     before the connector is called, and the outcome right after.
//
// Concurrent identical calls dispatch once; the others wait and return the
// same recorded outcome. Under a Scope (WithScope) the call runs in the
// scope's namespaces only and within its limits.
func (e *Executor) Execute(ctx context.Context, call ToolCall) (Result, error) {
	if !telemetry.Enabled() {
		return e.execute(ctx, call)
	}
	ctx, span := telemetry.Start(ctx, telemetry.SpanExecutePrefix+call.Tool, trace.SpanKindInternal)
	res, err := e.execute(ctx, call)
	endExecute(span, call, res, err)
	return res, err
}

// execute is Execute within its span.
func (e *Executor) execute(ctx context.Context, call ToolCall) (Result, error) {
	select {
	case <-e.closed:
		return Result{}, ErrClosed
	default:
	}
	if err := e.Health(); err != nil {
		return Result{}, err
	}
	ns, err := e.namespaceOf(ctx, call.Namespace)
	if err != nil {
		return Result{}, err
	}
	call.Namespace = ns
	switch {
	case call.SessionID == "":
		return Result{}, refuse(ErrBadCall, "session_id is required")
	case call.ToolCallID == "":
		return Result{}, refuse(ErrBadCall, "tool_call_id is required")
	case call.Tool == "":
		return Result{}, refuse(ErrBadCall, "tool is required")
	}
	if err := validateIdentity(call); err != nil {
		return Result{}, err
	}
	if err := e.admitCall(ctx, call); err != nil {
		return Result{}, err
	}
	op, doc, digest, err := e.checkArgs(ctx, call)
	if err != nil {
		return Result{}, err
	}
	id := ledger.ExecutionID(call.Namespace, call.SessionID, call.ToolCallID)
	release, err := e.flights.acquire(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer release()

	// A fenced session takes no new call: the create of a new call
	// refuses it (createUnfenced), and a recorded call is still driven.
	// A resumed or settled call, the rare path, is judged by its session's
	// history before anything is created, so it looks at the record and
	// the fence first.
	if call.Resumed || call.Settle {
		fenced, err := e.led.Fenced(ctx, call.Namespace, call.SessionID)
		if err != nil {
			return Result{}, err
		}
		rec, err := e.led.Get(ctx, id)
		switch {
		case err == nil:
			return e.driveRecorded(ctx, call, op, digest, rec)
		case errors.Is(err, ledger.ErrPruned):
			return Result{}, prunedError(id)
		case !errors.Is(err, ledger.ErrNotFound):
			return Result{}, err
		}
		if len(fenced) > 0 && call.Resumed {
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
	if op.op.Effect == manifests.EffectExternal && op.op.DuplicateWindow > 0 {
		rec.DuplicateWindow = op.op.DuplicateWindow
		// The guard compares intents: the arguments the manifest says
		// make one effect, normalised as it says, so that another
		// spelling of a recent call ("USD" for "usd") is held too.
		rec.IntentDigest = op.op.IntentDigest(doc)
	}
	if s, ok := ScopeFrom(ctx); ok {
		rec.RequestedBy = s.Principal
	}
	if telemetry.Enabled() {
		rec.Traceparent, rec.Tracestate = telemetry.Traceparent(ctx)
	}
	ev := ledger.Event{Actor: "executor", Reason: call.Note}

	// before_intent means "a new call, nothing recorded yet, that will be
	// recorded": a call sent again, or one its fenced session refuses,
	// must not reach it. Only while the point is armed are the record and
	// the fence looked up (the resumed path above found neither); the path
	// below is the same either way, and the create finds both.
	crash.AtIf(crash.BeforeIntent, func() bool {
		if call.Resumed {
			return true
		}
		if fenced, err := e.led.Fenced(ctx, call.Namespace, call.SessionID); err != nil || len(fenced) > 0 {
			return false
		}
		_, err := e.led.Get(ctx, id)
		return err != nil
	})
	if call.Resumed && op.op.Effect != manifests.EffectRead {
		// A read has nothing to duplicate: a resumed read simply runs.
		known, err := e.led.SessionKnown(ctx, call.Namespace, call.SessionID)
		if err != nil {
			return Result{}, err
		}
		if !known {
			rec.State = ledger.StateRecoveryRequired
			rec.DuplicateWindow, rec.IntentDigest = 0, "" // nothing is dispatched: nothing to guard
			ev.Decision = string(DecisionResumedWithoutRecord)
			ev.Reason = "call resumed from history that predates this ledger: no record does not prove it never ran"
			created, err := e.create(ctx, rec, ev)
			if err != nil {
				return e.createFailed(ctx, call, op, digest, created, err)
			}
			return ResultOf(created), nil
		}
	}
	if call.Settle {
		return e.settleUnrecorded(ctx, call, op, digest, rec, ev)
	}
	if op.op.RequiresApproval {
		if err := e.admitApproval(ctx); err != nil {
			// At the limit, a call already recorded is still answered:
			// only a new approval request is refused.
			existing, gerr := e.led.Get(ctx, id)
			switch {
			case gerr == nil:
				return e.driveRecorded(ctx, call, op, digest, existing)
			case errors.Is(gerr, ledger.ErrPruned):
				return Result{}, prunedError(id)
			case !errors.Is(gerr, ledger.ErrNotFound):
				return Result{}, gerr
			}
			// A fenced session says so first, as below the limit: the
			// runtime must wait for an operator, not for room.
			if fenced, ferr := e.led.Fenced(ctx, call.Namespace, call.SessionID); ferr != nil {
				return Result{}, ferr
			} else if len(fenced) > 0 {
				return Result{}, fencedError(call.Namespace, call.SessionID, fenced)
			}
			return Result{}, err
		}
		rec.State = ledger.StateAwaitingApproval
		rec.Approval = &ledger.Approval{
			ID: ledger.ApprovalID(id), ArgsDigest: digest, PolicyVersion: op.policyV,
			RequestedAt: now, ExpiresAt: now.Add(op.op.ApprovalTTL), Decision: ledger.ApprovalPending,
		}
		ev.Decision = string(DecisionIntent)
		ev.Evidence = "approval " + rec.Approval.ID + " requested"
		created, err := e.createUnfenced(ctx, rec, ev)
		if errors.Is(err, ledger.ErrDuplicate) {
			return e.duplicate(ctx, call, op, digest, rec, ev, created)
		}
		if err != nil {
			return e.createFailed(ctx, call, op, digest, created, err)
		}
		crash.At(crash.AfterIntent)
		return ResultOf(created), nil
	}
	// The call needs one of its connector's instances before its dispatch
	// is recorded: a call that cannot have one in time is refused with
	// nothing recorded, and sent again later. With none free now, a call
	// sent again is answered from its record first, without one.
	slot, err := op.conn.Reserve(ctx, call.Namespace, -1)
	if err != nil {
		existing, gerr := e.led.Get(ctx, id)
		switch {
		case gerr == nil:
			return e.driveRecorded(ctx, call, op, digest, existing)
		case errors.Is(gerr, ledger.ErrPruned):
			return Result{}, prunedError(id)
		case !errors.Is(gerr, ledger.ErrNotFound):
			return Result{}, gerr
		}
		if slot, err = e.reserve(ctx, op, call.Namespace, id, false); err != nil {
			return Result{}, err
		}
	}
	defer slot.Release() // unless the connector call took it
	// The intent of an ungated call is its dispatch record: one synced
	// write before the connector runs. See RATIONALE.md, "Why is an ungated
	// call's intent its dispatch record?".
	rec.State = ledger.StateDispatched
	rec.Attempt = 1
	rec.Deadline = now.Add(op.m.Limits.Timeout)
	ev.Decision = string(DecisionDispatch)
	created, err := e.createUnfenced(ctx, rec, ev)
	if errors.Is(err, ledger.ErrDuplicate) {
		return e.duplicate(ctx, call, op, digest, rec, ev, created)
	}
	if err != nil {
		return e.createFailed(ctx, call, op, digest, created, err)
	}
	crash.At(crash.AfterIntent)
	crash.At(crash.AfterDispatchRecord)
	return e.attempt(ctx, ctx, op, created, slot)
}

// checkArgs finds the operation of call and checks its arguments against
// the operation's schema, returning them parsed and their digest.
func (e *Executor) checkArgs(ctx context.Context, call ToolCall) (*operation, map[string]any, string, error) {
	_, span := telemetry.Start(ctx, telemetry.SpanCheckArgs, trace.SpanKindInternal)
	defer span.End()
	op, err := e.lookup(call.Tool)
	if err != nil {
		telemetry.Fail(span, errorType(err), err)
		return nil, nil, "", err
	}
	doc, digest, err := parseArgs(call.Arguments)
	if err == nil {
		err = op.op.ValidateDoc(doc)
	}
	if err != nil {
		// The span says that the arguments were refused, not why: the
		// reason quotes them.
		span.SetAttributes(telemetry.ErrorType.String(errorType(ErrInvalidArguments)))
		span.SetStatus(codes.Error, "invalid arguments")
		return nil, nil, "", &ArgumentsError{Tool: call.Tool, Err: err}
	}
	if span.IsRecording() {
		span.SetAttributes(telemetry.Connector.String(op.m.Connector.Name), telemetry.Operation.String(op.op.Name),
			telemetry.Policy.String(string(op.op.Recovery)))
	}
	return op, doc, digest, nil
}

// reserve waits, Options.InstanceWait at most, for an instance of op's
// connector for the call id of namespace ns (see wasmrt.Connector.Reserve:
// fairly between namespaces). Beyond it, it returns a *BusyError;
// recorded says whether the call is recorded (it stays as it is). See
// RATIONALE.md, "Why does a call wait for an instance before its dispatch
// is recorded?".
func (e *Executor) reserve(ctx context.Context, op *operation, ns, id string, recorded bool) (*wasmrt.Slot, error) {
	slot, err := op.conn.Reserve(ctx, ns, e.opts.InstanceWait)
	if errors.Is(err, wasmrt.ErrBusy) {
		e.opts.Logger.WarnContext(ctx, "call not dispatched: every instance of its connector stayed busy; the runtime is told to send it again",
			"connector", op.m.Connector.Name, "namespace", ns, "execution_id", id, "waited", e.opts.InstanceWait)
		return nil, &BusyError{Connector: op.m.Connector.Name, Namespace: ns, ExecutionID: id, Waited: e.opts.InstanceWait,
			RetryAfter: max(time.Second, e.opts.InstanceWait), Recorded: recorded}
	}
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("host: execution[%s]: %w", id, err)
	}
	// Any other failure (the connector closed under the executor) is the
	// connector call's to meet and report, as a call that never entered
	// the guest.
	return slot, nil
}

// settleUnrecorded records a settled call that has no record as
// cancelled at attempt 0: the runtime that saved it is settling it on
// resume, and the host never received it (an intent is recorded before
// any dispatch), so it never ran. The record answers the original
// request too, should it still arrive (a request still in the
// runtime's connection, a process not yet stopped): it finds the
// execution cancelled and does not run. The runtime tells its model the
// call did not run; asking again is the model's to decide, under a new
// tool-call id.
func (e *Executor) settleUnrecorded(ctx context.Context, call ToolCall, op *operation, digest string, rec ledger.Record, ev ledger.Event) (Result, error) {
	rec.State, rec.Attempt, rec.Deadline = ledger.StateCancelled, 0, time.Time{}
	rec.DuplicateWindow = 0 // nothing is dispatched: nothing to guard
	ev.Decision = string(DecisionSettledWithoutRecord)
	ev.Reason = "settled by the runtime on resume with no record: the call never reached the host, so it did not run; a request with these ids will not run either"
	created, err := e.create(ctx, rec, ev)
	if err != nil {
		return e.createFailed(ctx, call, op, digest, created, err)
	}
	return ResultOf(created), nil
}

// duplicate records the new call rec, which the ledger found repeats the
// recent execution earlier (ledger.ErrDuplicate), without dispatching it:
// answered with earlier's outcome where the operation declares that safe
// and earlier succeeded, else held for a reviewer as awaiting_approval.
// Nothing of it ran: a crash before this write leaves no record, and the
// call sent again meets the guard again.
func (e *Executor) duplicate(ctx context.Context, call ToolCall, op *operation, digest string, rec ledger.Record, ev ledger.Event, earlier ledger.Record) (Result, error) {
	now := e.now()
	rec.DuplicateOf = earlier.ID
	rec.Attempt, rec.Deadline, rec.Approval = 0, time.Time{}, nil
	what := fmt.Sprintf("%s (%s, tool call %s, created %s)", earlier.ID, earlier.State, earlier.ToolCallID, earlier.CreatedAt.UTC().Format(time.RFC3339))
	if op.op.OnDuplicate == manifests.DuplicateAnswer && earlier.State == ledger.StateSucceeded && earlier.Outcome != nil {
		rec.State = ledger.StateSucceeded
		rec.Outcome = &ledger.Outcome{Kind: abi.OutcomeOK.String(), Result: earlier.Outcome.Result, Receipt: earlier.Outcome.Receipt,
			Source: ledger.OutcomeSourceDuplicate}
		ev.Decision = string(DecisionDuplicateAnswered)
		ev.Evidence = sameWhat(op, digest, earlier) + " as " + what + " within the duplicate window of " + manifests.FormatDuration(op.op.DuplicateWindow) +
			": answered with its outcome (on_duplicate = \"answer\"), nothing dispatched"
	} else {
		rec.State = ledger.StateAwaitingApproval
		rec.Approval = &ledger.Approval{
			ID: ledger.ApprovalID(rec.ID), ArgsDigest: digest, PolicyVersion: op.policyV,
			RequestedAt: now, ExpiresAt: now.Add(op.op.ApprovalTTL), Decision: ledger.ApprovalPending,
		}
		ev.Decision = string(DecisionDuplicateHeld)
		ev.Evidence = "possible duplicate of " + what + ": " + sameWhat(op, digest, earlier) + " within the duplicate window of " +
			manifests.FormatDuration(op.op.DuplicateWindow) + "; approval " + rec.Approval.ID + " requested, a human decides"
	}
	created, err := e.createUnfenced(ctx, rec, ev)
	if err != nil {
		return e.createFailed(ctx, call, op, digest, created, err)
	}
	e.opts.Logger.InfoContext(ctx, "duplicate-intent guard: a call repeats a recent one and was not dispatched",
		"execution_id", created.ID, "duplicate_of", earlier.ID, "decision", ev.Decision, "tool", call.Tool)
	crash.At(crash.AfterIntent)
	return ResultOf(created), nil
}

// sameWhat says what a repeat shares with the earlier call: its very
// arguments, or (spelled otherwise) its intent, which the reviewer is
// told names which arguments.
func sameWhat(op *operation, digest string, earlier ledger.Record) string {
	if earlier.ArgsDigest == digest {
		return "same arguments"
	}
	fields := make([]string, len(op.op.Intent))
	for i, f := range op.op.Intent {
		fields[i] = f.String()
	}
	if len(fields) == 0 {
		return "same arguments once text is compared in Unicode NFC, numbers by value and empty values as absent"
	}
	return "same " + strings.Join(fields, ", ") + " (other arguments aside; text compared in Unicode NFC, empty values as absent)"
}

// driveRecorded answers a call whose execution is already recorded: the
// same call is driven from its durable state, another one under the same
// ids is an *IntentMismatchError.
func (e *Executor) driveRecorded(ctx context.Context, call ToolCall, op *operation, digest string, rec ledger.Record) (Result, error) {
	if rec.ArgsDigest != digest || rec.Connector != op.m.Connector.Name || rec.Operation != op.op.Name {
		return Result{}, &IntentMismatchError{
			ExecutionID: rec.ID, ToolCallID: call.ToolCallID,
			RecordedTool: rec.Connector + "." + rec.Operation, GivenTool: call.Tool,
			RecordedDigest: rec.ArgsDigest, GivenDigest: digest,
		}
	}
	linkRecorded(ctx, rec)
	return e.advance(ctx, ctx, rec, observed{})
}

// create records a new execution and reports it to the observer. On
// failure it returns what Create returned, for createFailed.
func (e *Executor) create(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	wctx, span, wt := intentSpan(ctx, rec, ev)
	created, err := e.led.Create(wctx, rec, ev)
	endWrite(wctx, span, wt, err)
	if err == nil {
		e.opts.Observer.Transition(created.State, ev.Decision)
	}
	return created, err
}

// createUnfenced is create of a new call, refused with a *FencedError
// naming the uncertain calls in a fenced session (store.CreateUnfenced).
//
// The refusal and the read of the calls that fence the session are two
// reads: an operator may lift the fence between them. Then the read finds
// none, and a refusal that names no call would send the runtime to wait
// for an operator with nothing to resolve. Nothing was written, so the
// call is created again as if it had come now, a few times at most.
//
// See RATIONALE.md, "Why does a fence hold every new attempt in the
// session?" and "Why is a new call's fence check part of its create?".
func (e *Executor) createUnfenced(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	for try := 1; ; try++ {
		wctx, span, wt := intentSpan(ctx, rec, ev)
		created, err := e.led.CreateUnfenced(wctx, rec, ev)
		endWrite(wctx, span, wt, err)
		if err == nil {
			e.opts.Observer.Transition(created.State, ev.Decision)
		}
		if !errors.Is(err, ledger.ErrFenced) {
			return created, err
		}
		fenced, ferr := e.led.Fenced(ctx, rec.Namespace, rec.SessionID)
		if ferr != nil {
			return ledger.Record{}, ferr
		}
		if len(fenced) > 0 || try == maxFenceRaces {
			return ledger.Record{}, fencedError(rec.Namespace, rec.SessionID, fenced)
		}
	}
}

// maxFenceRaces bounds how often createUnfenced tries again when the
// fence that refused a call was lifted before its calls were read.
const maxFenceRaces = 3

// createFailed handles a Create that found the execution recorded (the
// common case of a call sent again skips a separate lookup: Create's own
// existence check answers it) or pruned; a fenced session's refusal is
// already the *FencedError createUnfenced returns.
func (e *Executor) createFailed(ctx context.Context, call ToolCall, op *operation, digest string, existing ledger.Record, err error) (Result, error) {
	switch {
	case errors.Is(err, ledger.ErrExists):
		return e.driveRecorded(ctx, call, op, digest, existing)
	case errors.Is(err, ledger.ErrPruned):
		return Result{}, prunedError(existing.ID)
	default:
		return Result{}, err
	}
}

func fencedError(ns, session string, recs []ledger.Record) *FencedError {
	fe := &FencedError{Namespace: ns, SessionID: session}
	for _, r := range recs {
		fe.Calls = append(fe.Calls, UncertainCall{ExecutionID: r.ID, ToolCallID: r.ToolCallID, Tool: r.Connector + "." + r.Operation, Attempt: r.Attempt})
	}
	return fe
}

// apply performs one ledger transition from rec and reports it to the
// observer.
func (e *Executor) apply(ctx context.Context, rec ledger.Record, t ledger.Transition) (ledger.Record, error) {
	t.From, t.FromAttempt = rec.State, rec.Attempt
	if t.Attempt == 0 {
		t.Attempt = rec.Attempt
	}
	if t.Event.Actor == "" {
		t.Event.Actor = "executor"
	}
	wctx, span, wt := writeSpan(ctx, rec, t)
	start := time.Now()
	out, err := e.led.ApplyFrom(wctx, rec, t)
	e.opts.Observer.LedgerWrite(wctx, time.Since(start))
	endWrite(wctx, span, wt, err)
	if err != nil {
		return rec, fmt.Errorf("host: execution[%s] %s→%s: %w", rec.ID, t.From, t.To, err)
	}
	e.opts.Observer.Transition(out.State, t.Event.Decision)
	return out, nil
}

// observed is what one connector call (an attempt or a reconcile) told
// this process.
type observed struct {
	ev evidence
	// out is the connector's answer; for a call that failed in the host,
	// an outcome the host wrote (Source "host").
	out ledger.Outcome
	// detail says what happened, for the audit trail.
	detail string
}

// attempt calls the connector for the freshly dispatched record rec, on
// slot if it is not nil, and advances the execution from its answer.
func (e *Executor) attempt(ctx, caller context.Context, op *operation, rec ledger.Record, slot *wasmrt.Slot) (Result, error) {
	// See RATIONALE.md, "Why is dispatch detached from the caller's
	// cancellation?".
	ctx = context.WithoutCancel(ctx)
	return e.advance(ctx, caller, rec, e.claimAndCall(ctx, op, rec, slot))
}

// claimAndCall calls the connector for the freshly dispatched record rec,
// on slot if it is not nil (given back either way), once the journal of
// consumed approvals has recorded the dispatch (a gated call on a shared
// ledger, see journal.go); a dispatch the journal holds already is not
// called (evidence repeat).
func (e *Executor) claimAndCall(ctx context.Context, op *operation, rec ledger.Record, slot *wasmrt.Slot) observed {
	if obs, ok := e.claim(rec, op); !ok {
		slot.Release()
		return obs
	}
	return e.call(ctx, op, rec, slot)
}

// advance moves rec forward, one step of the decision table (decide.go) at
// a time, until a step answers. obs is what this process has just learnt
// about the current attempt (nothing, for a record as found).
//
// caller is the context of the runtime waiting for the answer (Execute),
// or nil when nobody waits (a recovery pass, an operator's resolution): a
// live call waits inline for a retry that is due soon and gets a
// *FencedError in a fenced session; otherwise the record is left for a
// later pass. Connector calls and ledger writes are detached from every
// caller's cancellation: once an attempt is dispatched, abandoning it half
// way would only turn a known outcome into an unknown one. The operation's
// timeout still bounds each call. The caller holds the execution's flight.
func (e *Executor) advance(ctx, caller context.Context, rec ledger.Record, obs observed) (Result, error) {
	ctx = context.WithoutCancel(ctx)
	worked := false // whether this request moved the execution
	why := ""       // the last uncertainty, carried into the decision it leads to
	// waited is the end of the last inline wait: its timer fired, so the
	// time is at least that, whatever the clock (Options.Now) says.
	var waited time.Time
	// The inline wait for another node's attempt so far, and the writes
	// another node's change refused (on a fleet ledger).
	var elsewhereWaited time.Duration
	raced := 0
	for {
		op, _ := e.opOf(rec)
		var fenced []ledger.Record
		if rec.State == ledger.StateApproved || rec.State == ledger.StateRetryWait {
			var err error
			if fenced, err = e.led.Fenced(ctx, rec.Namespace, rec.SessionID); err != nil {
				return Result{}, err
			}
		}
		var elsewhere *ledger.Lease
		if rec.State == ledger.StateDispatched && obs.ev == evNone {
			// "No outcome" means "unknown" only for this node's own
			// attempt: another live node may be running it right now.
			var err error
			if rec, elsewhere, err = e.led.Elsewhere(ctx, rec); err != nil {
				return Result{}, err
			}
		}
		replayed, err := e.repeated(rec, op)
		if err != nil {
			return Result{}, err
		}
		f := e.facts(rec, op, obs, caller != nil, len(fenced) > 0, waited)
		f.Elsewhere = elsewhere != nil
		f.Replayed = replayed
		if obs.ev == evRepeat {
			f.Replayed = obs.detail
		}
		act := decide(f)
		noteDecision(ctx, rec, act)
		if act.Decision == DecisionApprovalUnverified {
			// A node whose configuration lacks the reviewer (or the
			// reviewer's namespace) cannot judge the approval: ending the
			// call here would make a node with a stale or partial config
			// destroy the approvals the others accept. It is left as it
			// is, neither dispatched nor ended.
			if why, unconfigured := e.verify(rec); unconfigured {
				e.opts.Logger.Error("a gated call's approval names a reviewer this node's configuration does not authorise; the call is left as it is",
					"execution_id", rec.ID, "reviewer", rec.Approval.By, "namespace", rec.Namespace, "why", why)
				return ResultOf(rec), refuse(ErrApproverNotConfigured, "execution %s is %s on an approval by %s, whom this node's configuration does not authorise for namespace %q ([[principals]] with role approver, its token and namespaces): this node cannot verify the approval, so it neither runs nor ends the call; send it to a node that reads the deployment's approvers, or give this node %s's entry (%s)",
					rec.ID, rec.State, rec.Approval.By, rec.Namespace, rec.Approval.By, why)
			}
		}
		if obs.ev == evNone && rec.State == ledger.StateDispatched {
			why = fmt.Sprintf("dispatched attempt %d has no recorded outcome", rec.Attempt)
		} else if obs.ev == evUncertain {
			why = obs.detail
		}
		switch act.Step {
		case stepAnswer:
			res := ResultOf(rec)
			res.Recorded = caller != nil && !worked && rec.State.Terminal()
			if rec.State == ledger.StateRecoveryRequired {
				if reason, err := e.recoveryReason(ctx, rec); err != nil {
					return Result{}, err
				} else if reason != "" {
					res.Error = reason
				}
			}
			return res, nil

		case stepHold:
			if caller != nil {
				return Result{}, fencedError(rec.Namespace, rec.SessionID, fenced)
			}
			return ResultOf(rec), nil

		case stepWait:
			res := ResultOf(rec)
			res.NextAttemptAt = act.Until
			d := act.Until.Sub(e.now())
			if elsewhere != nil {
				// Another node's attempt: look again every poll, within
				// one budget.
				d = elsewherePoll
				if elsewhereWaited+d > e.opts.MaxInlineRetryWait {
					d = e.opts.MaxInlineRetryWait + 1
				}
				elsewhereWaited += d
			}
			if caller == nil || d > e.opts.MaxInlineRetryWait {
				return res, nil
			}
			if f := waitNotifyOf(caller); f != nil {
				f(res)
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-caller.Done():
				t.Stop()
				return res, nil
			case <-e.closed:
				t.Stop()
				return res, nil
			}
			obs, waited = observed{}, act.Until
			// Other nodes of a fleet may have moved it meanwhile.
			if rec, err = e.led.Get(ctx, rec.ID); err != nil {
				return Result{}, err
			}

		case stepDispatch:
			if op == nil {
				return Result{}, fmt.Errorf("host: execution[%s]: dispatch without a loaded operation", rec.ID)
			}
			// An instance first, then the dispatch record: a call that
			// cannot have one in time stays as it is. A live call waits
			// for one (InstanceWait at most); a pass does not wait, and
			// looks again at its next round.
			var slot *wasmrt.Slot
			if caller != nil {
				if slot, err = e.reserve(caller, op, rec.Namespace, rec.ID, true); err != nil {
					return Result{}, err
				}
			} else if slot, err = op.conn.Reserve(ctx, rec.Namespace, -1); errors.Is(err, wasmrt.ErrBusy) {
				return ResultOf(rec), nil
			}
			next, err := e.apply(ctx, rec, e.dispatchTransition(rec, op, act, obs, why))
			if err != nil {
				slot.Release()
				if rec, obs, err = e.raced(ctx, rec, obs, err, &raced); err != nil {
					return Result{}, err
				}
				continue
			}
			rec, worked = next, true
			crash.At(crash.AfterDispatchRecord)
			obs = e.claimAndCall(ctx, op, rec, slot)

		case stepReconcile:
			if op == nil {
				return Result{}, fmt.Errorf("host: execution[%s]: reconcile without a loaded operation", rec.ID)
			}
			if act.Decision == DecisionKeyRetentionReconcile {
				why = fmt.Sprintf("%s; the call is %s old, past the provider's key retention of %s, so its key is not sent again: reconcile asked instead",
					why, e.now().Sub(rec.CreatedAt).Round(time.Second), e.keyRetention(rec))
			}
			if obs, err = e.reconcileCall(ctx, op, rec, why); err != nil {
				return Result{}, err
			}

		case stepRecord:
			next, err := e.apply(ctx, rec, e.recordTransition(rec, op, act, obs, why))
			if err != nil {
				if rec, obs, err = e.raced(ctx, rec, obs, err, &raced); err != nil {
					return Result{}, err
				}
				continue
			}
			rec, worked = next, true
			if act.To == ledger.StateSucceeded {
				// After the outcome's write, not before: a crash between
				// the two leaves an attempt whose outcome recovery
				// re-derives (its policy's row), not a refused repeat.
				e.noteApplied(rec, op)
			}
			switch act.To {
			case ledger.StateSucceeded, ledger.StateFailed, ledger.StateRetryWait:
				crash.At(crash.AfterOutcomeRecord)
			}
			obs = observed{}
		}
	}
}

// maxRaces bounds how often one advance re-decides after another node's
// change refused its write.
const maxRaces = 8

// raced handles a write of advance that failed with err. Another node of
// a fleet may have changed the execution first (a conflict, or it
// dispatched it): advance then decides again on the record as it is now,
// keeping what this process observed only if the record is still at the
// same step. Any other error, or too many races, ends advance. (On a
// single-node ledger nothing else writes an execution whose flight the
// executor holds, so these errors do not occur there.)
func (e *Executor) raced(ctx context.Context, rec ledger.Record, obs observed, err error, n *int) (ledger.Record, observed, error) {
	// ErrTerminal: another node ended the execution first (this node's
	// write came late, e.g. after a pause); the loop then answers what
	// the ledger holds.
	if !errors.Is(err, ledger.ErrConflict) && !errors.Is(err, ledger.ErrNotOwner) && !errors.Is(err, ledger.ErrTerminal) {
		return rec, obs, err
	}
	if *n++; *n > maxRaces {
		return rec, obs, fmt.Errorf("host: execution[%s] changed by other nodes under %d consecutive decisions: %w", rec.ID, maxRaces, err)
	}
	now, gerr := e.led.Get(ctx, rec.ID)
	if gerr != nil {
		return rec, obs, errors.Join(err, gerr)
	}
	if now.State != rec.State || now.Attempt != rec.Attempt {
		return now, observed{}, nil
	}
	if errors.Is(err, ledger.ErrNotOwner) {
		// The attempt this process observed is owned by a lease other
		// than the one it wrote under (a former epoch of this node, or a
		// node that claimed it): what was observed may be written only
		// once this node owns it.
		var elsewhere *ledger.Lease
		if now, elsewhere, gerr = e.led.Elsewhere(ctx, now); gerr != nil {
			return rec, obs, errors.Join(err, gerr)
		}
		if elsewhere != nil || now.State != rec.State || now.Attempt != rec.Attempt {
			return now, observed{}, nil
		}
	}
	return now, obs, nil
}

// keyRetention is how long the provider of rec's connector is trusted to
// remember an idempotency key: Options.KeyRetention, or the retention the
// connector's manifest declares in [provider] when that is shorter.
func (e *Executor) keyRetention(rec ledger.Record) time.Duration {
	r := e.opts.KeyRetention
	if op, err := e.opOf(rec); err == nil {
		if d := op.m.Provider.IdempotencyRetention; d > 0 && d < r {
			r = d
		}
	}
	return r
}

// facts gathers what decide needs about rec.
func (e *Executor) facts(rec ledger.Record, op *operation, obs observed, live, fenced bool, notBefore time.Time) facts {
	now := e.now()
	if now.Before(notBefore) {
		now = notBefore
	}
	f := facts{
		State: rec.State, Read: rec.Effect == string(manifests.EffectRead), Policy: manifests.Policy(rec.Policy),
		Attempt: rec.Attempt, MaxAttempts: rec.MaxAttempts, Uncertain: rec.Uncertain, CancelRequested: rec.CancelRequested,
		Loaded: op != nil, Live: live, Fenced: fenced, Now: now, Age: now.Sub(rec.CreatedAt), KeyRetention: e.keyRetention(rec),
		NextAttemptAt: rec.NextAttemptAt, Evidence: obs.ev,
		Backoff: e.opts.RetryBackoff(rec.Attempt), InFlightBackoff: e.opts.InFlightBackoff(rec.Attempt),
	}
	if op != nil {
		f.Reconcilable = op.info.Reconcile
		// The attempt was dispatched its timeout before its deadline.
		dispatched := rec.Deadline.Add(-op.m.Limits.Timeout)
		f.SettleAt = dispatched.Add(op.op.ReconcileSettle)
		f.FinalSettleAt = f.SettleAt
		if op.op.ReconcileSettle == 0 {
			f.FinalSettleAt = dispatched.Add(2 * op.m.Limits.Timeout)
		}
	}
	if e.gatedOnShared(op) {
		switch rec.State {
		case ledger.StateApproved, ledger.StateRetryWait, ledger.StateDispatched:
			// The states a dispatch may follow.
			f.Unverified = e.unverified(rec)
		}
	}
	if a := rec.Approval; a != nil {
		f.HasApproval, f.ApprovalExpiresAt = true, a.ExpiresAt
		switch {
		case a.ArgsDigest != rec.ArgsDigest:
			f.ApprovalProblem = "approval was given for other arguments"
		case op != nil && a.PolicyVersion != op.policyV:
			f.ApprovalProblem = "operation policy changed since the approval (was " + a.PolicyVersion + ", now " + op.policyV + ")"
		case a.ConsumedBy != 0:
			f.ApprovalProblem = "approval already consumed"
		}
	}
	return f
}

// recoveryActor names the actor of decisions taken on rec's unknown
// outcome: the crash matrix and the audit trail tell recovery's decisions
// apart from the normal course by it.
func recoveryActor(rec ledger.Record, d DecisionCode, obs observed) string {
	switch d {
	case DecisionRecoverRetry, DecisionRecoverReread, DecisionReconciledApplied, DecisionReconciledNotApplied,
		DecisionCancelledNotApplied, DecisionManualPolicy, DecisionKeyRetentionPassed, DecisionExhaustedUncertain,
		DecisionReconcileUnknown, DecisionReconcileError, DecisionCancelledUncertain, DecisionPermanentAfterUnknown,
		DecisionConnectorUnavailable, DecisionInFlightExhausted:
		return "recovery"
	}
	if rec.State == ledger.StateDispatched && (obs.ev == evNone || obs.ev == evUncertain) {
		return "recovery"
	}
	return "executor"
}

// dispatchTransition is the transition into dispatched at attempt+1.
func (e *Executor) dispatchTransition(rec ledger.Record, op *operation, act action, obs observed, why string) ledger.Transition {
	t := ledger.Transition{To: ledger.StateDispatched, Attempt: rec.Attempt + 1,
		Deadline: e.now().Add(op.m.Limits.Timeout), Uncertain: act.Uncertain, RuledOut: act.RuledOut,
		Event: ledger.Event{Decision: string(act.Decision), Actor: recoveryActor(rec, act.Decision, obs)}}
	switch rec.State {
	case ledger.StateApproved:
		consumed := *rec.Approval
		consumed.ConsumedBy = rec.Attempt + 1
		t.Approval = &consumed
		t.Event.Evidence = "approval " + consumed.ID + " by " + consumed.By
		if e.gatedOnShared(op) {
			t.Event.Evidence += ", signature verified" // decide dispatches nothing else there
		}
	case ledger.StateRetryWait:
		t.Event.Evidence = errorOf(rec)
	default: // a re-dispatch of an attempt whose outcome is unknown or not applied
		t.Event.Evidence = why
		if act.Decision == DecisionReconciledNotApplied {
			t.Event.Evidence = "reconcile: not applied: " + obs.detail
			t.Event.Reason = why
		}
	}
	return t
}

// recordTransition is the transition of a stepRecord action.
func (e *Executor) recordTransition(rec ledger.Record, op *operation, act action, obs observed, why string) ledger.Transition {
	t := ledger.Transition{To: act.To, NextAttemptAt: act.Until, Uncertain: act.Uncertain, RuledOut: act.RuledOut,
		Event: ledger.Event{Decision: string(act.Decision), Actor: recoveryActor(rec, act.Decision, obs), Reason: act.Reason}}
	// The attempt's outcome, when the transition carries one: what the
	// connector answered, or what the host saw.
	outcome := func(errText string) *ledger.Outcome {
		if rec.Outcome != nil && rec.Outcome.Attempt == rec.Attempt {
			return nil // already recorded (a retry_wait's error becomes final)
		}
		o := obs.out
		if o.Kind == "" {
			o = ledger.Outcome{Kind: abi.OutcomeUncertain.String(), Source: "host"}
		}
		if errText != "" {
			o.Error = errText
		}
		o.Attempt = rec.Attempt
		return &o
	}
	evidence := obs.detail
	if evidence == "" {
		evidence = why
	}
	switch act.To {
	case ledger.StateSucceeded:
		t.Outcome = outcome("")
		t.Event.Evidence = t.Outcome.Receipt
		// One fsync per execution where recovery re-derives a lost outcome
		// (the ledger's rule 10 checks the recorded policy once more).
		t.Lazy = op != nil && op.op.OutcomeDurability == manifests.DurabilityLazy && rec.State == ledger.StateDispatched &&
			(rec.Policy == string(manifests.PolicyIdempotentRetry) || rec.Policy == string(manifests.PolicyReconcile))
		if act.Decision == DecisionReconciledApplied {
			t.Event.Reason = why
		}
	case ledger.StateFailed:
		errText := ""
		switch act.Decision {
		case DecisionExhausted:
			errText = fmt.Sprintf("attempts exhausted (%d of %d): %s", rec.Attempt, rec.MaxAttempts, evidence)
		case DecisionReconciledNotApplied:
			errText = "not applied and no attempt left: " + obs.detail
		case DecisionConnectorUnavailable:
			errText = "connector unavailable: " + evidence
		case DecisionApprovalUnverified:
			errText = "not dispatched: " + act.Reason
		}
		t.Outcome = outcome(errText)
		t.Event.Evidence = evidence
	case ledger.StateRetryWait:
		t.Outcome = outcome("")
		t.Event.Evidence = evidence
	case ledger.StateRecoveryRequired:
		t.Event.Evidence = evidence
		if act.Decision == DecisionLedgerDamaged {
			t.Event.Evidence = act.Reason
		}
		if act.Decision == DecisionKeyRetentionPassed {
			t.Event.Evidence = fmt.Sprintf("%s; the call is %s old, past the provider's key retention of %s, so a retry could apply it again",
				evidence, e.now().Sub(rec.CreatedAt).Round(time.Second), e.keyRetention(rec))
		}
	case ledger.StateExpired:
		if rec.Approval != nil {
			a := *rec.Approval
			a.Decision = ledger.ApprovalExpired
			t.Approval = &a
		}
	case ledger.StateCancelled:
		t.Event.Evidence = evidence
	}
	return t
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

// expire ends an approval request that can no longer be used.
func (e *Executor) expire(ctx context.Context, rec ledger.Record, reason string) (Result, error) {
	return e.advanceRecord(ctx, rec, record(ledger.StateExpired, DecisionExpired).because(reason))
}

// advanceRecord performs one recorded action outside the loop (for the
// operator and reviewer APIs) and answers with the new record.
func (e *Executor) advanceRecord(ctx context.Context, rec ledger.Record, act action) (Result, error) {
	rec, err := e.apply(ctx, rec, e.recordTransition(rec, nil, act, observed{}, ""))
	if err != nil {
		return Result{}, err
	}
	return ResultOf(rec), nil
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

// call runs the dispatched attempt of rec, on slot if it is not nil (the
// slot is given back either way), and says what it told.
func (e *Executor) call(ctx context.Context, op *operation, rec ledger.Record, slot *wasmrt.Slot) observed {
	defer slot.Release() // unless the connector call took it
	export := exportFor(op)
	req := wasmrt.CallRequest{Export: export, Operation: op.op.Name, ExecutionID: rec.ID, Namespace: rec.Namespace, Args: rec.Args, Slot: slot}
	if export == abi.ExportExecuteWithKey {
		req.Key = rec.IdempotencyKey
	}
	// On a fleet ledger, only under a lease this process knows to be live,
	// and no longer than it holds it: once another node may take the call
	// over, a request still on its way here would race the takeover's.
	ctx, done, err := e.led.Bind(ctx)
	if err != nil {
		host := ledger.Outcome{Kind: abi.OutcomeRetryable.String(), Error: "not called: " + err.Error(), Source: "host"}
		return observed{ev: evRetryable, out: host, detail: host.Error}
	}
	defer done()
	ctx, span := callSpan(ctx, op, rec, export)
	start := time.Now()
	out, err := op.conn.Call(ctx, req)
	e.opts.Observer.ConnectorCall(ctx, op.m.Connector.Name, op.op.Name, export, time.Since(start), err)
	endCall(span, out, err)
	crash.At(crash.AfterPluginReturn)

	if err != nil {
		var ce *wasmrt.CallError
		if errors.As(err, &ce) && !ce.MayHaveActed() {
			// The guest never ran: nothing happened, so any policy may try
			// again. Only a call the module cannot take at all is final.
			host := ledger.Outcome{Kind: abi.OutcomeRetryable.String(), Error: err.Error(), Source: "host"}
			if ce.Kind == wasmrt.KindUnknownOperation || ce.Kind == wasmrt.KindUnsupportedExport {
				host.Kind = abi.OutcomePermanent.String()
				return observed{ev: evUnsupported, out: host, detail: err.Error()}
			}
			return observed{ev: evRetryable, out: host, detail: err.Error()}
		}
		// A trap, timeout or garbage answer: the connector may have acted.
		return observed{ev: evUncertain, detail: fmt.Sprintf("attempt %d failed inside the connector: %v", rec.Attempt, err)}
	}
	o := ledger.Outcome{Kind: out.Kind.String(), Result: out.Result, Receipt: out.Receipt, Error: out.Error, Source: "connector"}
	obs := observed{out: o, detail: out.Error}
	switch out.Kind {
	case abi.OutcomeOK:
		obs.ev, obs.detail = evOK, out.Receipt
	case abi.OutcomeRetryable:
		obs.ev = evRetryable
	case abi.OutcomeUncertain:
		obs.ev = evUncertain
		obs.detail = fmt.Sprintf("attempt %d may have taken effect: %s", rec.Attempt, out.Error)
	case abi.OutcomeInProgress:
		obs.ev = evInProgress
	default: // permanent (reconcile kinds are refused by the runtime)
		obs.ev = evPermanent
	}
	return obs
}

// reconcileCall asks the connector whether the uncertain attempt took
// effect. why is the uncertainty that led here. It fails, asking nothing,
// when the node may not call connectors now (Bind).
func (e *Executor) reconcileCall(ctx context.Context, op *operation, rec ledger.Record, why string) (observed, error) {
	req := wasmrt.CallRequest{Export: abi.ExportReconcile, Operation: op.op.Name, Key: rec.IdempotencyKey, ExecutionID: rec.ID, Namespace: rec.Namespace, Args: rec.Args}
	ctx, done, err := e.led.Bind(ctx)
	if err != nil {
		return observed{}, err
	}
	ctx, span := callSpan(ctx, op, rec, abi.ExportReconcile)
	start := time.Now()
	out, err := op.conn.Call(ctx, req)
	e.opts.Observer.ConnectorCall(ctx, op.m.Connector.Name, op.op.Name, abi.ExportReconcile, time.Since(start), err)
	endCall(span, out, err)
	crash.At(crash.AfterReconcileReturn)
	if lost := done(); err != nil && lost {
		// Cut short by the lease's loss: reconcile said nothing.
		return observed{}, nil
	}
	if err != nil {
		return observed{ev: evReconcileError, detail: why + "; reconcile failed: " + err.Error()}, nil
	}
	o := ledger.Outcome{Kind: out.Kind.String(), Result: out.Result, Receipt: out.Receipt, Error: out.Error, Source: "reconciled"}
	switch out.Kind {
	case abi.OutcomeApplied:
		return observed{ev: evApplied, out: o, detail: out.Receipt}, nil
	case abi.OutcomeNotApplied:
		return observed{ev: evNotApplied, out: o, detail: out.Error}, nil
	default:
		return observed{ev: evUnknown, out: o, detail: why + "; reconcile: " + out.Error}, nil
	}
}
