package ledger

import "fmt"

// The transition grammar, in one place. Every backend's Apply and Create
// consult only this file to decide whether a change is allowed (through
// Start and Step, which also say what the change writes); the executor,
// recovery and the operator API all go through them.
//
//	from               → to
//	awaiting_approval  → approved, rejected, expired, cancelled, recovery_required (rule 11)
//	approved           → dispatched, expired, cancelled, recovery_required (rule 11)
//	dispatched         → succeeded, failed, retry_wait, recovery_required,
//	                     dispatched (re-dispatch, attempt+1; or cancel request, same attempt)
//	retry_wait         → dispatched, failed, cancelled, recovery_required
//	recovery_required  → succeeded, failed, dispatched (attempt+1), abandoned
//	succeeded, failed, rejected, expired, abandoned, cancelled: terminal, → nothing
//
// Create may start a record only in:
//
//	awaiting_approval  attempt 0 (a gated call's intent)
//	dispatched         attempt 1 (an ungated call: intent and dispatch are one record)
//	recovery_required  attempt 0 or 1 (a resumed call found with no record)
//	succeeded          attempt 0, only as a duplicate answered with an earlier
//	                   execution's outcome (DuplicateOf set, Outcome source
//	                   "duplicate" for attempt 0): nothing is dispatched
//	cancelled          attempt 0 (a call a runtime settled on resume that had
//	                   no record: it never ran, and the original request,
//	                   should it still arrive, is answered cancelled)
//
// A record created with DuplicateOf set (the duplicate-intent guard found
// it repeats that execution) starts only in awaiting_approval or, so
// answered, in succeeded.
//
// The rules CheckTransition applies, in order (the first that fails wins):
//
//  1. A terminal record never changes: ErrTerminal. If the transition also
//     carries an outcome for the attempt whose outcome the record holds, the
//     error matches ErrOutcomeRecorded as well.
//  2. The record must be in t.From at t.FromAttempt: else ErrConflict.
//  3. t.From → t.To must be in the table: else ErrIllegalTransition.
//  4. Attempts. Entering dispatched from another state requires
//     t.Attempt == t.FromAttempt+1 (else ErrIllegalTransition) and
//     t.Attempt <= MaxAttempts (else ErrAttemptsExhausted).
//     dispatched → dispatched is either a re-dispatch after crash recovery
//     (t.Attempt == t.FromAttempt+1, same cap) or — because the Ledger
//     interface has no separate method for it — the recording of a
//     cooperative cancel request: t.Attempt == t.FromAttempt, t.CancelRequested
//     set and no Outcome. Every other transition requires
//     t.Attempt == t.FromAttempt.
//  5. Outcomes. An outcome belongs to one attempt: a non-nil t.Outcome must
//     have Outcome.Attempt == t.Attempt (else ErrIllegalTransition), and if
//     the record already holds an outcome for that attempt the transition is
//     ErrOutcomeRecorded — one attempt, one outcome. Entering succeeded
//     requires t.Outcome. Entering failed requires the record to end up with
//     an outcome for its attempt: t.Outcome, or (from retry_wait or
//     recovery_required) the retryable error already recorded for that
//     attempt, which then becomes final. t.Outcome is optional entering
//     retry_wait (the retryable error) and refused entering any other state
//     (ErrIllegalTransition). One exception: an operator resolving
//     recovery_required (t.Resolution set) may replace a retryable error
//     recorded for the attempt, which was never final.
//  6. t.Resolution is accepted only leaving recovery_required
//     (else ErrIllegalTransition).
//  7. dispatched → cancelled only for a record whose cancellation was
//     requested (Record.CancelRequested): a cooperative cancel that
//     reconcile proved never took effect. Else ErrIllegalTransition.
//  8. Uncertainty. t.Uncertain marks the record Uncertain (an attempt may
//     have taken effect), t.RuledOut clears the mark (evidence that none
//     did); both at once is ErrIllegalTransition, and so is t.Uncertain on
//     a read, which has no effect to be uncertain about. A record that is
//     Uncertain after the transition may not enter failed or cancelled:
//     those answers tell a runtime that nothing happened, and it would
//     issue the call again. It ends succeeded, recovery_required (an
//     operator decides) or abandoned, or failed/cancelled with RuledOut.
//  9. A read (Effect "read") never enters recovery_required, so it never
//     fences its session: an uncertain read is read again or fails.
//  10. A lazy transition (t.Lazy, not synced before Apply returns) is
//     allowed only from dispatched into succeeded, for a record whose
//     policy recovers a lost outcome without a human: idempotent-retry
//     (the provider replays the keyed answer) and reconcile (reconcile
//     finds the effect). Else ErrIllegalTransition. Every other transition
//     (failed outcomes, approvals, operator decisions, recovery_required)
//     is synced before it is acknowledged.
//  11. awaiting_approval and approved enter recovery_required only marked
//     Uncertain: an operator accepted a restore of the ledger from a
//     backup (AcceptRestore), or a fleet node's journal of consumed
//     approvals holds the dispatch of an approved record (its row was put
//     back in the database after the call ran), so what happened to the
//     call since — an approval, a dispatch — is unknown, and a dispatch
//     now could be its second. Else ErrIllegalTransition.
//  12. Single-use request states. A decision made through a request
//     state (an MCP client's answer to an input request) carries the
//     state's nonce in t.Approval.StateNonce, and recording it consumes
//     the state. A transition from awaiting_approval naming the nonce the
//     record's approval already holds is ErrStateUsed, checked before
//     every other rule: a replayed answer is told as such, whatever the
//     record became since. A nonce is set only by the decision
//     (awaiting_approval → approved or rejected), and a later transition
//     that carries the approval keeps the recorded nonce: else
//     ErrIllegalTransition.
var transitions = map[State][]State{
	StateAwaitingApproval: {StateApproved, StateRejected, StateExpired, StateCancelled, StateRecoveryRequired},
	StateApproved:         {StateDispatched, StateExpired, StateCancelled, StateRecoveryRequired},
	StateDispatched:       {StateSucceeded, StateFailed, StateRetryWait, StateRecoveryRequired, StateDispatched, StateCancelled},
	StateRetryWait:        {StateDispatched, StateFailed, StateCancelled, StateRecoveryRequired},
	StateRecoveryRequired: {StateSucceeded, StateDispatched, StateAbandoned, StateFailed},
}

// allStates lists every state, for validation and tests.
var allStates = []State{
	StateAwaitingApproval, StateApproved, StateDispatched, StateRetryWait, StateRecoveryRequired,
	StateSucceeded, StateFailed, StateRejected, StateExpired, StateAbandoned, StateCancelled,
}

func (s State) valid() bool {
	for _, v := range allStates {
		if s == v {
			return true
		}
	}
	return false
}

// allowed reports whether the table holds from → to.
func allowed(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CheckTransition applies the grammar's rules to t against the stored
// record rec (see the comment on transitions) and returns nil if the
// ledger may apply it. Backends call it through Step.
func CheckTransition(rec Record, t Transition) error {
	id := rec.ID
	// 12. (checked first) A consumed request state decides nothing again.
	if err := checkStateNonce(rec, t); err != nil {
		return err
	}
	// 1. Terminal records never change.
	if rec.State.Terminal() {
		if t.Outcome != nil && rec.Outcome != nil && rec.Outcome.Attempt == t.Outcome.Attempt {
			return fmt.Errorf("execution[%s] %s@%d: %w: %w", id, rec.State, rec.Attempt, ErrOutcomeRecorded, ErrTerminal)
		}
		return fmt.Errorf("execution[%s] %s@%d → %s: %w", id, rec.State, rec.Attempt, t.To, ErrTerminal)
	}
	// 2. Compare-and-set on (state, attempt).
	if rec.State != t.From || rec.Attempt != t.FromAttempt {
		return fmt.Errorf("execution[%s] is %s@%d, transition expects %s@%d: %w",
			id, rec.State, rec.Attempt, t.From, t.FromAttempt, ErrConflict)
	}
	// 3. The table.
	if !allowed(t.From, t.To) {
		return fmt.Errorf("execution[%s] %s → %s: %w", id, t.From, t.To, ErrIllegalTransition)
	}
	// 7. (checked early: it depends only on the record) A dispatched call
	// is cancelled only after a cancel request.
	if t.From == StateDispatched && t.To == StateCancelled && !rec.CancelRequested {
		return fmt.Errorf("execution[%s] dispatched → cancelled without a cancel request: %w", id, ErrIllegalTransition)
	}
	// 4. Attempts.
	switch {
	case t.To == StateDispatched && t.From == StateDispatched && t.Attempt == t.FromAttempt:
		if !t.CancelRequested || t.Outcome != nil {
			return fmt.Errorf("execution[%s] dispatched@%d → dispatched@%d is only a cancel request (CancelRequested set, no outcome): %w",
				id, t.FromAttempt, t.Attempt, ErrIllegalTransition)
		}
	case t.To == StateDispatched:
		if t.Attempt != t.FromAttempt+1 {
			return fmt.Errorf("execution[%s] %s@%d → dispatched@%d: a dispatch must be attempt %d: %w",
				id, t.From, t.FromAttempt, t.Attempt, t.FromAttempt+1, ErrIllegalTransition)
		}
		if t.Attempt > rec.MaxAttempts {
			return fmt.Errorf("execution[%s] attempt %d > max %d: %w", id, t.Attempt, rec.MaxAttempts, ErrAttemptsExhausted)
		}
	default:
		if t.Attempt != t.FromAttempt {
			return fmt.Errorf("execution[%s] %s@%d → %s@%d: attempt must stay %d: %w",
				id, t.From, t.FromAttempt, t.To, t.Attempt, t.FromAttempt, ErrIllegalTransition)
		}
	}
	// 5. Outcomes.
	if t.Outcome != nil {
		if t.Outcome.Attempt != t.Attempt {
			return fmt.Errorf("execution[%s] outcome for attempt %d, record at attempt %d: %w",
				id, t.Outcome.Attempt, t.Attempt, ErrIllegalTransition)
		}
		switch t.To {
		case StateSucceeded, StateFailed, StateRetryWait:
		default:
			return fmt.Errorf("execution[%s] %s → %s carries an outcome: %w", id, t.From, t.To, ErrIllegalTransition)
		}
		// An operator resolving recovery_required may replace a retryable
		// error recorded for the attempt: that error was never final.
		superseded := t.From == StateRecoveryRequired && t.Resolution != nil &&
			rec.Outcome != nil && rec.Outcome.Kind == "retryable_error"
		if rec.Outcome != nil && rec.Outcome.Attempt == t.Outcome.Attempt && !superseded {
			return fmt.Errorf("execution[%s] attempt %d: %w", id, t.Outcome.Attempt, ErrOutcomeRecorded)
		}
	}
	switch t.To {
	case StateSucceeded:
		if t.Outcome == nil {
			return fmt.Errorf("execution[%s] %s → succeeded without an outcome: %w", id, t.From, ErrIllegalTransition)
		}
	case StateFailed:
		held := rec.Outcome != nil && rec.Outcome.Attempt == t.Attempt
		if t.Outcome == nil && !held {
			return fmt.Errorf("execution[%s] %s → failed without an outcome for attempt %d: %w", id, t.From, t.Attempt, ErrIllegalTransition)
		}
	}
	// 6. Resolutions come from operators resolving recovery_required.
	if t.Resolution != nil && t.From != StateRecoveryRequired {
		return fmt.Errorf("execution[%s] %s → %s carries a resolution: %w", id, t.From, t.To, ErrIllegalTransition)
	}
	// 8. Uncertainty.
	switch {
	case t.Uncertain && t.RuledOut:
		return fmt.Errorf("execution[%s] %s → %s both marks and clears uncertainty: %w", id, t.From, t.To, ErrIllegalTransition)
	case t.Uncertain && rec.Effect == EffectRead:
		return fmt.Errorf("execution[%s] is a read and cannot be marked uncertain: %w", id, ErrIllegalTransition)
	case (t.To == StateFailed || t.To == StateCancelled) && (t.Uncertain || rec.Uncertain && !t.RuledOut):
		return fmt.Errorf("execution[%s] %s → %s: an attempt may have taken effect and nothing rules it out: %w",
			id, t.From, t.To, ErrIllegalTransition)
	}
	// 11. A call at rest before its dispatch is parked only by an accepted
	// restore, or by a node that knows it was dispatched since.
	if (t.From == StateAwaitingApproval || t.From == StateApproved) && t.To == StateRecoveryRequired && !t.Uncertain {
		return fmt.Errorf("execution[%s] %s → recovery_required only marked uncertain (an accepted restore forgot what followed): %w",
			id, t.From, ErrIllegalTransition)
	}
	// 9. Reads never fence.
	if t.To == StateRecoveryRequired && rec.Effect == EffectRead {
		return fmt.Errorf("execution[%s] is a read and never enters recovery_required: %w", id, ErrIllegalTransition)
	}
	// 10. Lazy durability only where recovery re-derives a lost outcome.
	if t.Lazy && (t.From != StateDispatched || t.To != StateSucceeded ||
		rec.Policy != PolicyIdempotentRetry && rec.Policy != PolicyReconcile) {
		return fmt.Errorf("execution[%s] %s → %s under policy %q cannot be lazy: only succeeded outcomes of idempotent-retry and reconcile calls are re-derived after a loss: %w",
			id, t.From, t.To, rec.Policy, ErrIllegalTransition)
	}
	return nil
}

// checkStateNonce applies rule 12 to t against rec.
func checkStateNonce(rec Record, t Transition) error {
	if t.Approval == nil {
		return nil
	}
	recorded := ""
	if rec.Approval != nil {
		recorded = rec.Approval.StateNonce
	}
	nonce := t.Approval.StateNonce
	switch {
	case nonce == "" && recorded == "":
		return nil
	case t.From == StateAwaitingApproval && nonce != "" && nonce == recorded:
		return fmt.Errorf("execution[%s] %s: the request state's answer was recorded already (approval %s): %w",
			rec.ID, rec.State, rec.Approval.Decision, ErrStateUsed)
	case t.From == StateAwaitingApproval && (nonce == "" || t.To == StateApproved || t.To == StateRejected):
		return nil // the decision consumes the state; rule 2 judges a stale From
	case t.From != StateAwaitingApproval && nonce == recorded:
		return nil // the approval carried on as recorded
	}
	return fmt.Errorf("execution[%s] %s → %s sets request-state nonce %q over %q: only the decision records one: %w",
		rec.ID, t.From, t.To, nonce, recorded, ErrIllegalTransition)
}

// Recovery policies as Record.Policy spells them (rule 10).
const (
	PolicyIdempotentRetry = "idempotent-retry"
	PolicyReconcile       = "reconcile"
)

// EffectRead is Record.Effect of an operation without side effects.
const EffectRead = "read"

// OutcomeSourceDuplicate is Outcome.Source of a duplicate answered with
// an earlier execution's outcome (Record.DuplicateOf names it).
const OutcomeSourceDuplicate = "duplicate"

// CheckCreate validates a record Create is asked to start: ErrInvalid for a
// value that can never be stored, ErrIllegalTransition for a state the
// grammar does not start in. Backends call it through Start.
func CheckCreate(rec Record) error {
	if rec.ID == "" {
		return fmt.Errorf("%w: record without id", ErrInvalid)
	}
	if rec.MaxAttempts < 1 {
		return fmt.Errorf("%w: execution[%s] max_attempts %d, must be >= 1", ErrInvalid, rec.ID, rec.MaxAttempts)
	}
	if rec.DuplicateWindow < 0 {
		return fmt.Errorf("%w: execution[%s] duplicate window %s is negative", ErrInvalid, rec.ID, rec.DuplicateWindow)
	}
	answered := rec.State == StateSucceeded && rec.DuplicateOf != ""
	if answered {
		if o := rec.Outcome; o == nil || o.Source != OutcomeSourceDuplicate || o.Attempt != 0 || rec.Attempt != 0 || rec.Resolution != nil {
			return fmt.Errorf("execution[%s] created succeeded as a duplicate of %s needs attempt 0 and an outcome of source %q for attempt 0: %w",
				rec.ID, rec.DuplicateOf, OutcomeSourceDuplicate, ErrIllegalTransition)
		}
	} else if rec.Outcome != nil || rec.Resolution != nil {
		return fmt.Errorf("execution[%s] created with an outcome or resolution: %w", rec.ID, ErrIllegalTransition)
	}
	if rec.Uncertain {
		return fmt.Errorf("execution[%s] created uncertain: %w", rec.ID, ErrIllegalTransition)
	}
	if rec.DuplicateOf != "" && rec.State != StateAwaitingApproval && rec.State != StateSucceeded {
		return fmt.Errorf("execution[%s] created %s as a duplicate of %s: a duplicate is held for a reviewer (awaiting_approval) or answered (succeeded): %w",
			rec.ID, rec.State, rec.DuplicateOf, ErrIllegalTransition)
	}
	switch rec.State {
	case StateSucceeded:
		if !answered {
			return fmt.Errorf("execution[%s] cannot be created %q: %w", rec.ID, rec.State, ErrIllegalTransition)
		}
	case StateAwaitingApproval, StateCancelled:
		if rec.Attempt != 0 {
			return fmt.Errorf("execution[%s] created %s at attempt %d, must be 0: %w", rec.ID, rec.State, rec.Attempt, ErrIllegalTransition)
		}
	case StateDispatched:
		if rec.Attempt != 1 {
			return fmt.Errorf("execution[%s] created dispatched at attempt %d, must be 1: %w", rec.ID, rec.Attempt, ErrIllegalTransition)
		}
	case StateRecoveryRequired:
		if rec.Effect == EffectRead {
			return fmt.Errorf("execution[%s] is a read and cannot be created recovery_required: %w", rec.ID, ErrIllegalTransition)
		}
		if rec.Attempt != 0 && rec.Attempt != 1 {
			return fmt.Errorf("execution[%s] created recovery_required at attempt %d, must be 0 or 1: %w", rec.ID, rec.Attempt, ErrIllegalTransition)
		}
	default:
		return fmt.Errorf("execution[%s] cannot be created %q: %w", rec.ID, rec.State, ErrIllegalTransition)
	}
	return nil
}
