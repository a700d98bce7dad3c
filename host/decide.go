package host

import (
	"time"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// The recovery decision table, as one pure function: decide looks at what
// is known about one execution (its durable state, its declared policy, and
// what the last attempt or reconcile said) and returns the next step. The
// executor's loop (advance, in execute.go) performs the step, records it,
// and asks again, until a step answers the caller. Nothing here reads the
// ledger, calls a connector or looks at a clock: testdata/decide holds the
// table's cases, one row each.
//
// The rules that bind every row:
//   - An attempt that may have reached the provider makes the execution
//     uncertain; it then ends succeeded, recovery_required, or failed /
//     cancelled only on evidence that nothing was applied (the ledger
//     refuses the rest, see ledger/grammar.go rule 8).
//   - "in progress" at the provider is a reason to wait, never a failure.
//   - reconcile's not_applied is evidence only once no earlier attempt can
//     still land (the operation's reconcile_settle after the attempt's
//     dispatch); before that the executor waits and asks again.
//   - Reads have no effect: an uncertain read is read again or fails; it
//     never fences its session.

// step is what the executor does next with an execution.
type step uint8

const (
	// stepAnswer: answer with the record as it stands (terminal, waiting
	// for a reviewer, an operator, or for the runtime to re-drive it).
	stepAnswer step = iota + 1
	// stepHold: the session is fenced. A live call gets a *FencedError; a
	// recovery pass leaves the record for a later pass.
	stepHold
	// stepWait: nothing to do before Until. A live call waits inline when
	// that is soon enough; otherwise the answer is "pending".
	stepWait
	// stepDispatch: record attempt+1 as dispatched and call the connector.
	stepDispatch
	// stepReconcile: ask the connector whether the attempt took effect.
	stepReconcile
	// stepRecord: record the transition to action.To.
	stepRecord
)

var stepNames = [...]string{stepAnswer: "answer", stepHold: "hold", stepWait: "wait",
	stepDispatch: "dispatch", stepReconcile: "reconcile", stepRecord: "record"}

func (s step) String() string {
	if int(s) < len(stepNames) && stepNames[s] != "" {
		return stepNames[s]
	}
	return "step(?)"
}

// DecisionCode names a decision in the audit trail (ledger.Event.Decision).
// The names are stable: operators, dashboards and tests read them.
type DecisionCode string

// Decisions.
const (
	// DecisionNone: nothing was decided (the step only answers or waits).
	DecisionNone DecisionCode = ""

	// Normal course.
	DecisionIntent        DecisionCode = "intent"          // a gated call's intent, awaiting approval
	DecisionDispatch      DecisionCode = "dispatch"        // first dispatch (ungated intent, or an approved call)
	DecisionOutcome       DecisionCode = "outcome"         // the connector's answer, recorded as is
	DecisionRetry         DecisionCode = "retry_scheduled" // the attempt did nothing; the next one is scheduled
	DecisionRetryDispatch DecisionCode = "retry_dispatch"  // a scheduled retry is due
	DecisionExhausted     DecisionCode = "attempts_exhausted"
	DecisionApproved      DecisionCode = "approved"
	DecisionRejected      DecisionCode = "rejected"
	DecisionExpired       DecisionCode = "expired"
	DecisionCancelled     DecisionCode = "cancelled"
	DecisionCancelAsked   DecisionCode = "cancel_requested"
	// The duplicate-intent guard (the manifest's duplicate_window): a new
	// call repeating a recent one of the same session, held for a
	// reviewer, or answered with the earlier call's outcome.
	DecisionDuplicateHeld     DecisionCode = "duplicate_held"
	DecisionDuplicateAnswered DecisionCode = "duplicate_answered"

	// The provider is still working on an earlier request with the key.
	DecisionInFlight          DecisionCode = "in_flight_wait"
	DecisionInFlightExhausted DecisionCode = "in_flight_at_provider"

	// Recovery of an attempt whose outcome is unknown.
	DecisionRecoverRetry  DecisionCode = "recover_retry"  // idempotent-retry: same key, attempt+1
	DecisionRecoverReread DecisionCode = "recover_reread" // a read: read again
	DecisionReconcile     DecisionCode = "reconcile"
	// DecisionKeyRetentionReconcile: an idempotent-retry call older than
	// the provider's key retention is not re-sent with its key (the
	// provider may have forgotten it); the module exports reconcile for
	// the operation, which is asked instead.
	DecisionKeyRetentionReconcile DecisionCode = "key_retention_reconcile"
	DecisionReconciledApplied     DecisionCode = "reconciled_applied"
	DecisionReconciledNotApplied  DecisionCode = "reconciled_not_applied"
	DecisionCancelledNotApplied   DecisionCode = "cancelled_not_applied"
	DecisionSettleWait            DecisionCode = "settle_wait" // not_applied, but an attempt may still land

	// recovery_required, and why.
	DecisionManualPolicy          DecisionCode = "manual_policy"
	DecisionKeyRetentionPassed    DecisionCode = "key_retention_passed"
	DecisionExhaustedUncertain    DecisionCode = "attempts_exhausted_uncertain"
	DecisionReconcileUnknown      DecisionCode = "reconcile_unknown"
	DecisionReconcileError        DecisionCode = "reconcile_error"
	DecisionCancelledUncertain    DecisionCode = "cancelled_uncertain"
	DecisionPermanentAfterUnknown DecisionCode = "permanent_after_uncertain"
	DecisionConnectorUnavailable  DecisionCode = "connector_unavailable"
	DecisionResumedWithoutRecord  DecisionCode = "resumed_without_record"
	DecisionInvalidRecord         DecisionCode = "invalid_record"
	// DecisionSettledWithoutRecord: a call a runtime settled on resume
	// had no record; it is recorded cancelled, never run.
	DecisionSettledWithoutRecord DecisionCode = "settled_without_record"
	// DecisionApprovalUnverified: a gated call's approval does not verify
	// on a shared ledger (no signature of the reviewer it names, or one
	// over other values); it is not dispatched. Also an expiry's and a
	// failed read's decision.
	DecisionApprovalUnverified DecisionCode = "approval_unverified"
	// DecisionLedgerDamaged: the record of a gated call on a shared
	// ledger is behind what the journal of consumed approvals holds (the
	// attempt it would dispatch was dispatched, or the call was applied):
	// its row was restored or edited in the database after the call ran.
	// It is not dispatched; it becomes recovery_required, marked
	// uncertain.
	DecisionLedgerDamaged DecisionCode = "ledger_damaged"

	// Operators.
	DecisionOperatorApplied DecisionCode = "operator_applied"
	DecisionOperatorRetry   DecisionCode = "operator_retry"
	DecisionOperatorAbandon DecisionCode = "operator_abandon"
)

// evidence is what this process learnt about the current attempt.
type evidence uint8

const (
	// evNone: nothing learnt here; the record is as found. For a
	// dispatched record that means a crash, or an attempt whose answer
	// this process no longer waits for: its outcome is unknown.
	evNone evidence = iota
	// evOK: the connector answered ok.
	evOK
	// evRetryable: the attempt did nothing and may run again (the
	// connector said so, or the call failed before the guest ran).
	evRetryable
	// evPermanent: the attempt did nothing and repeating it cannot
	// help.
	evPermanent
	// evUnsupported: the module cannot take the call at all (the
	// operation or entry point is gone). Nothing ran.
	evUnsupported
	// evUncertain: the attempt may have taken effect (the connector
	// said so, or it trapped, timed out or answered garbage).
	evUncertain
	// evInProgress: the provider is still processing an earlier
	// request with this key.
	evInProgress
	// evApplied, evNotApplied, evUnknown: reconcile's
	// answers; evReconcileError: reconcile itself failed.
	evApplied
	evNotApplied
	evUnknown
	evReconcileError
	// evRepeat: the attempt just recorded as dispatched was not called:
	// the journal of consumed approvals holds its dispatch already.
	evRepeat
)

var evidenceNames = [...]string{evNone: "none", evOK: "ok", evRetryable: "retryable",
	evPermanent: "permanent", evUnsupported: "unsupported", evUncertain: "uncertain",
	evInProgress: "in_progress", evApplied: "applied", evNotApplied: "not_applied",
	evUnknown: "unknown", evReconcileError: "reconcile_error", evRepeat: "repeat"}

func (e evidence) String() string {
	if int(e) < len(evidenceNames) {
		return evidenceNames[e]
	}
	return "evidence(?)"
}

// facts is everything decide needs to know about one execution.
type facts struct {
	State  ledger.State
	Read   bool             // the operation has no side effect
	Policy manifests.Policy // the policy recorded with the intent
	// Attempt and MaxAttempts: the current attempt and the cap.
	Attempt, MaxAttempts int
	// Uncertain: an earlier attempt may have taken effect (Record.Uncertain).
	Uncertain       bool
	CancelRequested bool
	// Loaded: the record's connector and operation are loaded.
	Loaded bool
	// Live: a runtime is waiting for the answer (Execute). A recovery pass
	// or an operator's resolution is not live.
	Live bool
	// Fenced: the session holds recovery_required executions.
	Fenced bool
	// Elsewhere: on a fleet ledger, another live node owns the attempt in
	// flight: it is running it, and its outcome is not unknown, only not
	// known here yet.
	Elsewhere bool
	Now       time.Time
	// Age is the time since the intent was recorded; KeyRetention how long
	// the provider remembers an idempotency key.
	Age, KeyRetention time.Duration
	// Reconcilable: the module exports reconcile for the operation, which
	// an idempotent-retry operation may do too; past KeyRetention it is
	// asked instead of re-sending a key the provider may have forgotten.
	Reconcilable bool
	// NextAttemptAt: when a retry_wait record is due.
	NextAttemptAt time.Time
	// SettleAt: from when a reconcile answer of not_applied is evidence
	// (the attempt's dispatch plus the operation's reconcile_settle). See
	// RATIONALE.md, "Why is not_applied evidence only once the attempt has
	// settled?".
	SettleAt time.Time
	// FinalSettleAt: the same for an attempt that no keyed re-dispatch
	// will follow (no attempts left, or a cancel): SettleAt, except where
	// the operation declares reconcile_settle 0 because that re-dispatch
	// would meet a request still in flight; then the attempt's dispatch
	// plus twice its timeout, the default settle time.
	FinalSettleAt time.Time
	// HasApproval, ApprovalExpiresAt and ApprovalProblem describe the
	// approval of a gated call; ApprovalProblem says why an approval cannot
	// authorise the dispatch (other arguments, another policy, consumed).
	HasApproval       bool
	ApprovalExpiresAt time.Time
	ApprovalProblem   string
	// Unverified says why the approval of a gated call on a shared ledger
	// does not verify (see signature.go): no dispatch of the call may
	// follow, neither the first nor a retry or a recovery's.
	Unverified string
	// Replayed says why the next dispatch of a gated call on a shared
	// ledger would repeat one the journal of consumed approvals holds (see
	// journal.go), or why the attempt just recorded was not called
	// (evidence repeat): the record went backwards in the database.
	Replayed string
	// Evidence: what the last attempt or reconcile said in this process.
	Evidence evidence
	// Backoff and InFlightBackoff: the waits before the next attempt after
	// a retryable failure and after an "in progress" answer.
	Backoff, InFlightBackoff time.Duration
}

// action is decide's answer.
type action struct {
	Step     step
	Decision DecisionCode
	// To is the state stepRecord enters.
	To ledger.State
	// Until: the end of a stepWait; the next attempt's time of a stepRecord
	// into retry_wait.
	Until time.Time
	// Uncertain marks the record uncertain (the attempt it leaves may have
	// taken effect); RuledOut clears the mark on evidence. See
	// ledger.Transition.
	Uncertain, RuledOut bool
	// Reason explains the decision where its name does not.
	Reason string
}

func answer() action { return action{Step: stepAnswer} }

func record(to ledger.State, d DecisionCode) action {
	return action{Step: stepRecord, To: to, Decision: d}
}

func wait(until time.Time, d DecisionCode) action {
	return action{Step: stepWait, Until: until, Decision: d}
}

func dispatch(d DecisionCode) action { return action{Step: stepDispatch, Decision: d} }

func (a action) because(reason string) action { a.Reason = reason; return a }

// decide returns the next step for an execution. It is the recovery
// decision table (its rows: testdata/decide); it has no side effects. See
// RATIONALE.md, "Why is the decision table one pure function?".
//
// A dispatch that repeats one the journal of consumed approvals holds
// (Replayed), and an attempt the journal kept from being called (evidence
// repeat), make the execution recovery_required, marked uncertain: the
// record went backwards, the call ran before, and only an operator who
// checks the provider knows how often. A dispatch of a gated call whose
// approval does not verify (Unverified) is never the answer either: an
// approved call that nothing dispatched expires, a retry or a recovery of
// one becomes recovery_required (an earlier attempt may have run, and
// nobody authorised the next), and a read fails.
func decide(f facts) action {
	if f.Evidence == evRepeat {
		return fenceRepeat(f)
	}
	a := decideState(f)
	if a.Step == stepDispatch && f.Replayed != "" {
		return fenceRepeat(f)
	}
	if a.Step != stepDispatch || f.Unverified == "" {
		return a
	}
	switch {
	case f.State == ledger.StateApproved:
		return record(ledger.StateExpired, DecisionApprovalUnverified).because(f.Unverified)
	case f.Read:
		return record(ledger.StateFailed, DecisionApprovalUnverified).because(f.Unverified)
	}
	return record(ledger.StateRecoveryRequired, DecisionApprovalUnverified).because(f.Unverified)
}

// fenceRepeat is the decision on a record that went backwards.
func fenceRepeat(f facts) action {
	a := record(ledger.StateRecoveryRequired, DecisionLedgerDamaged).because(f.Replayed)
	a.Uncertain = true
	return a
}

// decideState is decide before the approval check.
func decideState(f facts) action {
	switch f.State {
	case ledger.StateAwaitingApproval:
		switch {
		case !f.HasApproval:
			return record(ledger.StateExpired, DecisionExpired).because("awaiting approval without an approval request")
		case f.Now.After(f.ApprovalExpiresAt):
			return record(ledger.StateExpired, DecisionExpired).because("approval request expired before a decision")
		}
		return answer()

	case ledger.StateApproved:
		switch {
		case !f.HasApproval:
			// Nothing was dispatched: expiring is the truth.
			return record(ledger.StateExpired, DecisionInvalidRecord).because("approved without an approval")
		case f.Now.After(f.ApprovalExpiresAt):
			return record(ledger.StateExpired, DecisionExpired).because("approval expired before dispatch")
		case !f.Live:
			// An approved call is dispatched when its runtime re-drives it.
			return answer()
		case !f.Loaded:
			return record(ledger.StateExpired, DecisionExpired).because("connector unavailable")
		case f.ApprovalProblem != "":
			return record(ledger.StateExpired, DecisionExpired).because(f.ApprovalProblem)
		case f.Fenced:
			return action{Step: stepHold}
		}
		return dispatch(DecisionDispatch)

	case ledger.StateRetryWait:
		switch {
		case !f.Loaded && f.Read:
			return record(ledger.StateFailed, DecisionConnectorUnavailable)
		case !f.Loaded:
			return record(ledger.StateRecoveryRequired, DecisionConnectorUnavailable)
		case f.Now.Before(f.NextAttemptAt):
			return wait(f.NextAttemptAt, DecisionNone)
		case f.Fenced:
			return action{Step: stepHold}
		case f.Uncertain && f.Policy == manifests.PolicyIdempotentRetry && f.Age > f.KeyRetention:
			return record(ledger.StateRecoveryRequired, DecisionKeyRetentionPassed)
		}
		return dispatch(DecisionRetryDispatch)

	case ledger.StateDispatched:
		if f.Elsewhere && f.Evidence == evNone {
			// Not this node's attempt to recover: look again soon (a
			// recovery pass leaves it to its owner, or to whoever claims
			// it once the owner's lease is gone).
			return wait(f.Now.Add(elsewherePoll), DecisionNone)
		}
		return decideAttempt(f)
	}
	// recovery_required waits for an operator; terminal states never move.
	return answer()
}

// decideAttempt decides for a dispatched record from what its attempt (or
// reconcile) said.
func decideAttempt(f facts) action {
	left := f.Attempt < f.MaxAttempts
	switch f.Evidence {
	case evOK:
		return record(ledger.StateSucceeded, DecisionOutcome)
	case evApplied:
		return record(ledger.StateSucceeded, DecisionReconciledApplied)

	case evPermanent, evUnsupported:
		if f.Uncertain && f.Policy != manifests.PolicyIdempotentRetry {
			// This attempt did nothing, but an earlier one may have, and
			// only a key the provider honours ties the two answers together.
			return record(ledger.StateRecoveryRequired, DecisionPermanentAfterUnknown)
		}
		// Under idempotent-retry the provider answered for the key, so for
		// every attempt: the answer is evidence.
		a := record(ledger.StateFailed, DecisionOutcome)
		a.RuledOut = f.Uncertain
		return a

	case evRetryable:
		switch {
		case left:
			a := record(ledger.StateRetryWait, DecisionRetry)
			a.Until = f.Now.Add(f.Backoff)
			return a
		case f.Uncertain:
			return record(ledger.StateRecoveryRequired, DecisionExhaustedUncertain)
		}
		return record(ledger.StateFailed, DecisionExhausted)

	case evInProgress:
		switch {
		case f.Read:
			return decideAttempt(withEvidence(f, evRetryable))
		case f.Policy == manifests.PolicyManual || f.Policy == "":
			return record(ledger.StateRecoveryRequired, DecisionManualPolicy)
		case left:
			a := record(ledger.StateRetryWait, DecisionInFlight)
			a.Until, a.Uncertain = f.Now.Add(f.InFlightBackoff), true
			return a
		}
		return record(ledger.StateRecoveryRequired, DecisionInFlightExhausted)

	case evNotApplied:
		var a action
		switch {
		case f.Now.Before(f.SettleAt):
			// An earlier attempt may still land: not yet evidence.
			return wait(f.SettleAt, DecisionSettleWait)
		case left && !f.CancelRequested:
			a = dispatch(DecisionReconciledNotApplied)
		case f.Now.Before(f.FinalSettleAt):
			// No re-dispatch under the key follows to meet a request
			// still in flight, so "failed" or "cancelled" must wait until
			// none can be.
			return wait(f.FinalSettleAt, DecisionSettleWait)
		case f.CancelRequested:
			a = record(ledger.StateCancelled, DecisionCancelledNotApplied)
		default:
			a = record(ledger.StateFailed, DecisionReconciledNotApplied)
		}
		a.RuledOut = true
		return a
	case evUnknown:
		return record(ledger.StateRecoveryRequired, DecisionReconcileUnknown)
	case evReconcileError:
		return record(ledger.StateRecoveryRequired, DecisionReconcileError)
	}
	// evNone, evUncertain: the attempt's outcome is unknown.
	return decideUnknown(f)
}

// decideUnknown is the heart of the table: a dispatched attempt whose
// outcome is unknown, decided by the policy recorded with the intent.
func decideUnknown(f facts) action {
	left := f.Attempt < f.MaxAttempts
	switch {
	case f.Read && !f.Loaded:
		return record(ledger.StateFailed, DecisionConnectorUnavailable)
	case f.Read && f.CancelRequested:
		return record(ledger.StateCancelled, DecisionCancelled)
	case f.Read && left:
		return dispatch(DecisionRecoverReread)
	case f.Read:
		return record(ledger.StateFailed, DecisionExhausted)
	case !f.Loaded:
		return record(ledger.StateRecoveryRequired, DecisionConnectorUnavailable)
	case f.CancelRequested && f.Policy != manifests.PolicyReconcile:
		// Retrying would perform what was cancelled; only an operator can
		// tell whether it happened.
		return record(ledger.StateRecoveryRequired, DecisionCancelledUncertain)
	}
	switch f.Policy {
	case manifests.PolicyIdempotentRetry:
		switch {
		case f.Age > f.KeyRetention && f.Reconcilable:
			// The key may be forgotten, so it proves nothing: reconcile
			// looks at what the provider holds. Its answer is judged as
			// for the reconcile policy (decideAttempt).
			return action{Step: stepReconcile, Decision: DecisionKeyRetentionReconcile}
		case f.Age > f.KeyRetention:
			return record(ledger.StateRecoveryRequired, DecisionKeyRetentionPassed)
		case left:
			a := dispatch(DecisionRecoverRetry)
			a.Uncertain = true
			return a
		}
		return record(ledger.StateRecoveryRequired, DecisionExhaustedUncertain)
	case manifests.PolicyReconcile:
		// applied is evidence at once; not_applied waits for the attempt
		// to settle (see evNotApplied).
		return action{Step: stepReconcile, Decision: DecisionReconcile}
	}
	return record(ledger.StateRecoveryRequired, DecisionManualPolicy)
}

func withEvidence(f facts, e evidence) facts { f.Evidence = e; return f }
