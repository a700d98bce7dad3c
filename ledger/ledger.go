// Package ledger is connhost's durable execution ledger: execution records,
// their append-only audit trail, the pending index recovery reads, and the
// transition grammar that every change must obey.
//
// The [Ledger] interface is what the host uses; [Open] returns the Pebble
// implementation, the embedded default, and package ledger/pgledger one on
// PostgreSQL that a fleet of nodes shares. Both call [Start] and [Step], the
// grammar and what a change writes, and both pass the conformance suite in
// ledger/ledgertest. Pebble types never leave this package.
//
// Every transition is applied as one synced write that updates the record,
// appends an [Event] and maintains the indexes, so the record, the trail and
// the indexes never disagree. The ledger itself refuses illegal transitions
// (see grammar.go): callers cannot move a terminal record, record a second
// outcome for one attempt, or dispatch past the attempt cap.
package ledger

import (
	"context"
	"time"
)

// State is an execution's state in the transition grammar.
type State string

// Execution states. See grammar.go for the transitions between them.
const (
	// StateAwaitingApproval: intent recorded, waiting for a reviewer.
	StateAwaitingApproval State = "awaiting_approval"
	// StateApproved: approved, not yet dispatched.
	StateApproved State = "approved"
	// StateDispatched: attempt n handed to the connector; until its outcome
	// is recorded the outcome is unknown.
	StateDispatched State = "dispatched"
	// StateRetryWait: the last attempt failed retryably; the next attempt
	// is due at NextAttemptAt.
	StateRetryWait State = "retry_wait"
	// StateRecoveryRequired: the outcome is unknown and no policy could
	// decide it; an operator must resolve it. Its session is fenced.
	StateRecoveryRequired State = "recovery_required"

	// StateSucceeded is terminal: the effect happened; Outcome holds the
	// result and receipt.
	StateSucceeded State = "succeeded"
	// StateFailed is terminal: permanent error or attempts exhausted.
	StateFailed State = "failed"
	// StateRejected is terminal: a reviewer rejected the call.
	StateRejected State = "rejected"
	// StateExpired is terminal: the approval request expired.
	StateExpired State = "expired"
	// StateAbandoned is terminal: an operator decided the call had no
	// effect and must not be retried.
	StateAbandoned State = "abandoned"
	// StateCancelled is terminal: cancelled before it was dispatched.
	StateCancelled State = "cancelled"
)

// Terminal reports whether s never changes again.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateRejected, StateExpired, StateAbandoned, StateCancelled:
		return true
	}
	return false
}

// RecordVersion is the version byte of the record encoding (the binary
// form of binary.go) written and read by this release.
const RecordVersion = 2

// Record is one execution: what was asked, under which policy, and where it
// stands. Records are values: the ledger returns copies.
type Record struct {
	// Version is the encoding version the record was read from.
	Version int `json:"v"`
	// ID is the execution id, see ExecutionID.
	ID         string `json:"id"`
	Namespace  string `json:"namespace"`
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`

	Connector string `json:"connector"`
	Operation string `json:"operation"`
	// ManifestDigest and ModuleDigest identify the manifest and module that
	// the intent was recorded under.
	ManifestDigest string `json:"manifest_digest"`
	ModuleDigest   string `json:"module_digest"`
	// Effect is "external" or "read".
	Effect string `json:"effect"`
	// Policy is the declared recovery policy; PolicyVersion identifies the
	// exact policy fields (recovery, approval, attempts) it was recorded
	// under.
	Policy        string `json:"policy"`
	PolicyVersion string `json:"policy_version"`

	// Args are the exact argument bytes the runtime sent; ArgsDigest is the
	// hex sha256 of their canonical JSON form.
	Args       []byte `json:"args"`
	ArgsDigest string `json:"args_digest"`
	// IdempotencyKey is handed to the connector through the ABI only.
	IdempotencyKey string `json:"idempotency_key"`
	// Resumed is set when the runtime flagged the call as resumed from
	// older history.
	Resumed bool `json:"resumed,omitempty"`
	// RequestedBy is the principal that made the call (the runtime's name
	// on a server with principals; the anonymous principal's on one
	// without), fixed at Create; empty where no server stood between the
	// caller and the executor (the Go API, the CLI, stdio MCP).
	RequestedBy string `json:"requested_by,omitempty"`
	// Traceparent and Tracestate are the W3C trace context of the span
	// that created the execution (the executor's execute_tool span), fixed
	// at Create; "" when tracing was off. Work done on the execution
	// later (an approval, a recovery after a crash, an operator's
	// resolution) joins that trace. They identify a trace, nothing more.
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`

	State State `json:"state"`
	// Attempt is the number of the current (or last) dispatch; 0 before
	// the first dispatch.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Deadline is when the current attempt's call must have returned.
	Deadline time.Time `json:"deadline,omitzero"`
	// NextAttemptAt is when a retry_wait execution becomes due.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`

	Approval   *Approval   `json:"approval,omitempty"`
	Outcome    *Outcome    `json:"outcome,omitempty"`
	Resolution *Resolution `json:"resolution,omitempty"`
	// CancelRequested records a cooperative cancellation request.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Uncertain is set while an earlier attempt may have taken effect at
	// the provider and nothing has ruled it out since (a crash or a lost
	// answer, then a re-dispatch or a wait). Such an execution never ends
	// failed or cancelled without evidence (see grammar.go, rule 8): a
	// runtime that read "failed" would issue the call again.
	Uncertain bool `json:"uncertain,omitempty"`

	// Events is the number of events in the audit trail.
	Events uint64 `json:"events"`

	// DuplicateWindow is the operation's duplicate-intent window when the
	// record was created (0: not guarded). A guarded record is indexed by
	// its intent (IntentKey) and creation time, and Create refuses a new
	// guarded record whose intent repeats a recent one (ErrDuplicate).
	DuplicateWindow time.Duration `json:"duplicate_window,omitempty"`
	// DuplicateOf is the execution this one may repeat: set when the
	// duplicate-intent guard held the call for a reviewer
	// (awaiting_approval) or answered it with that execution's outcome
	// (created succeeded, its Outcome from the earlier one, Source
	// "duplicate").
	DuplicateOf string `json:"duplicate_of,omitempty"`
	// IntentDigest is the digest of a guarded record's intent: the
	// arguments that make a call the same effect, each normalised as
	// the operation's manifest says (manifests.Operation.IntentDigest).
	// IntentKey uses it in place of ArgsDigest, so that spellings a
	// provider takes for one effect ("USD" and "usd") are one intent.
	// Empty: the intent is the arguments' digest.
	IntentDigest string `json:"intent_digest,omitempty"`
}

// ApprovalDecision is the state of an approval request.
type ApprovalDecision string

// Approval decisions.
const (
	ApprovalPending  ApprovalDecision = "pending"
	ApprovalApproved ApprovalDecision = "approved"
	ApprovalRejected ApprovalDecision = "rejected"
	ApprovalExpired  ApprovalDecision = "expired"
	// ApprovalCancelled: the execution was cancelled while its approval
	// request was pending; nobody decided it.
	ApprovalCancelled ApprovalDecision = "cancelled"
)

// Approval binds a reviewer's decision to the exact arguments and policy it
// was shown.
type Approval struct {
	ID            string           `json:"id"`
	ArgsDigest    string           `json:"args_digest"`
	PolicyVersion string           `json:"policy_version"`
	RequestedAt   time.Time        `json:"requested_at"`
	ExpiresAt     time.Time        `json:"expires_at"`
	Decision      ApprovalDecision `json:"decision"`
	By            string           `json:"by,omitempty"`
	Reason        string           `json:"reason,omitempty"`
	DecidedAt     time.Time        `json:"decided_at,omitzero"`
	// ConsumedBy is the attempt that used the approval (0 = unused). An
	// approval authorises exactly one first dispatch.
	ConsumedBy int `json:"consumed_by,omitempty"`
	// Signature is the reviewer's signature over the decision, made with
	// a key derived from the deciding principal's credential (see
	// host.ApprovalKey); "" for a decision made without one. The ledger
	// stores it and never checks it: the executor does, before it
	// dispatches a gated call on a shared ledger.
	Signature string `json:"signature,omitempty"`
	// StateNonce is the nonce of the single-use request state whose
	// answer made the decision (an MCP client's answer to the input
	// request that asked its user to approve: see server/mcpserver);
	// "" for a decision made otherwise. The decision that records it
	// consumes the state: a later decision naming the same nonce is
	// refused with ErrStateUsed (grammar.go, rule 12).
	StateNonce string `json:"state_nonce,omitempty"`
}

// Outcome is a recorded result.
type Outcome struct {
	// Kind is the connector's outcome kind name ("ok", "permanent_error",
	// "applied", …) or "operator" for an operator resolution.
	Kind    string `json:"kind"`
	Result  []byte `json:"result,omitempty"`
	Receipt string `json:"receipt,omitempty"`
	Error   string `json:"error,omitempty"`
	// Source is "connector", "reconciled" or "operator".
	Source string `json:"source"`
	// Attempt is the dispatch this outcome belongs to.
	Attempt int `json:"attempt"`
}

// Resolution records an operator's decision on a recovery_required call.
type Resolution struct {
	// Applied: the operator verified the effect happened.
	Applied bool `json:"applied"`
	// Retry (with Applied false): dispatch again; otherwise abandon.
	Retry  bool      `json:"retry,omitempty"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Event is one entry of an execution's append-only audit trail.
type Event struct {
	// Seq numbers the execution's events from 1.
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	ExecutionID string    `json:"execution_id"`
	ToolCallID  string    `json:"tool_call_id"`
	Attempt     int       `json:"attempt"`
	From        State     `json:"from,omitempty"`
	To          State     `json:"to"`
	// Decision names what happened or was decided, e.g. "intent",
	// "dispatch", "outcome", "retry_scheduled", "recover_retry",
	// "reconciled_applied", "recovery_required", "operator_applied".
	Decision string `json:"decision"`
	// Evidence is what the decision was based on (a receipt, an error, a
	// reconcile answer).
	Evidence string `json:"evidence,omitempty"`
	// Actor is who decided: "executor", "recovery" or an operator's name.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Transition is one requested change to a record. The ledger applies it only
// if the record is in From at attempt FromAttempt and the grammar allows
// From → To; it then sets the fields below that are non-zero and appends an
// event built from Event (Seq, Time, ExecutionID, ToolCallID, Attempt, From
// and To are filled in by the ledger).
type Transition struct {
	From        State
	FromAttempt int
	To          State
	// Attempt is the record's attempt after the transition. Entering
	// dispatched requires Attempt == FromAttempt+1 and
	// Attempt <= MaxAttempts (dispatched → dispatched at FromAttempt+1 is a
	// re-dispatch after crash recovery); the only exception is
	// dispatched → dispatched at Attempt == FromAttempt with
	// CancelRequested set and no Outcome, which records a cancel request.
	// Every other transition requires Attempt == FromAttempt. The full
	// rules are in grammar.go.
	Attempt int

	Deadline      time.Time
	NextAttemptAt time.Time
	Approval      *Approval
	// Outcome is required entering succeeded and failed (and must carry
	// Attempt == the record's attempt); it is refused elsewhere, except for
	// retry_wait where it records the retryable error. An attempt has at
	// most one outcome: giving a second one is ErrOutcomeRecorded, and
	// failing a record that already holds its attempt's retryable error
	// (from retry_wait or recovery_required) takes no new Outcome.
	Outcome    *Outcome
	Resolution *Resolution
	// CancelRequested sets the cancellation flag (it is never cleared).
	CancelRequested bool
	// Uncertain marks the record Uncertain: the attempt it leaves may have
	// taken effect. RuledOut clears the mark: the transition rests on
	// evidence that no attempt so far took effect (reconcile answered
	// not_applied, the provider answered definitively under the same
	// idempotency key, an operator said so). Setting both is illegal.
	Uncertain bool
	RuledOut  bool
	// Lazy lets Apply return once the transition is written, without
	// waiting for its own fsync: it becomes durable with the next synced
	// write or within Options.LazySyncInterval. A crash in between may lose
	// it, so only a transition whose loss recovery re-derives may be lazy:
	// the grammar admits it only into succeeded, from dispatched, for the
	// policies idempotent-retry and reconcile (rule 10).
	Lazy bool

	Event Event
}

// Order is the order in which List returns records.
type Order uint8

// Orders of List.
const (
	// OrderID lists records in execution-id order (ids are hashes, so
	// this order says nothing about time). It is the zero value.
	OrderID Order = iota
	// OrderNewest lists the most recently created records first: by
	// CreatedAt descending, and by id descending among records created at
	// the same instant. A record's place never changes (CreatedAt is
	// fixed), so paging with After neither skips nor repeats a record;
	// records created after a listing began appear only on a new one.
	OrderNewest
	// OrderDue lists the records a recovery pass must look at, soonest
	// first by the time DueAt gives them, and by id among records due at
	// the same instant: for records awaiting approval (or approved), the
	// soonest to expire first. Records that are never due
	// (recovery_required, terminal) are not listed. It walks the due
	// index, so a page reads what it returns and what the filter skips,
	// never the history. After and AfterDue continue a listing after a
	// position, not after a record: the record that ended the previous
	// page may have been decided since.
	OrderDue
)

// Filter selects records for List. Zero fields match everything.
type Filter struct {
	State     State
	Namespace string
	// Namespaces, when not empty, matches the records of any of these
	// namespaces (a principal's scope); Namespace, when set too, narrows
	// it further.
	Namespaces []string
	SessionID  string
	// After continues a listing after this execution id: the last record
	// of the previous page. With OrderNewest it must name a record the
	// ledger holds (List returns ErrNotFound, or ErrPruned once the
	// record has been pruned). With OrderDue, After and AfterDue are the
	// id and the due time (DueAt) of the last record of the previous page,
	// which need not exist any more.
	After    string
	AfterDue time.Time
	// Limit caps the number of records; 0 means 100.
	Limit int
	// Order is the order of the records. The default value is OrderID.
	Order Order
}

// Ledger is the durable store of executions. Implementations are safe for
// concurrent use; every write is durable (synced) before it returns.
type Ledger interface {
	// Create records a new execution and its first event in one synced
	// write. The first record of a session also classifies the session:
	// known under the current protocol, or legacy when that first record is
	// a resumed call the ledger had no record of (see SessionKnown). If a record with rec.ID already exists, nothing is written
	// and Create returns the existing record and ErrExists.
	//
	// A guarded record (rec.DuplicateWindow > 0, rec.DuplicateOf empty)
	// whose id is new is first checked against the records of the same
	// intent (IntentKey): if one created at or after rec.CreatedAt minus
	// the window is succeeded or not terminal (and not pruned), nothing is
	// written and Create returns such a record and ErrDuplicate: the
	// earliest that is not itself a duplicate (DuplicateOf empty), else
	// the earliest (of the first MaxRepeatCandidates). The check and the write are atomic with respect to
	// every other Create of the same intent, on every node sharing the
	// ledger: of concurrent guarded records of one intent, one is created
	// and the others get ErrDuplicate with it. A record with DuplicateOf
	// set (the caller's answer to ErrDuplicate) is not checked, and is
	// indexed like the others.
	Create(ctx context.Context, rec Record, ev Event) (Record, error)
	// Get returns a record or ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// Apply performs one transition atomically (record + event + indexes in
	// one synced batch) and returns the new record. It returns ErrNotFound,
	// ErrConflict (the record is not in t.From at t.FromAttempt),
	// ErrTerminal, ErrIllegalTransition, ErrAttemptsExhausted or
	// ErrOutcomeRecorded.
	Apply(ctx context.Context, id string, t Transition) (Record, error)
	// Events returns an execution's audit trail in order.
	Events(ctx context.Context, id string) ([]Event, error)
	// Pending calls fn for every non-terminal record, reading only the
	// pending index: its cost grows with the number of pending executions,
	// not with history. Iteration stops at the first error fn returns.
	Pending(ctx context.Context, fn func(Record) error) error
	// Due calls fn, in the order of their due time, with the id of every
	// execution a recovery pass must look at by until (see DueAt), reading
	// only the due index: an idle ledger whose pending executions wait
	// for reviewers or operators answers at once. Iteration stops at the
	// first error fn returns.
	Due(ctx context.Context, until time.Time, fn func(id string) error) error
	// AwaitingApproval returns the number of executions awaiting approval
	// in namespace, or in every namespace when namespace is "", without
	// reading them.
	AwaitingApproval(ctx context.Context, namespace string) (int, error)
	// Fenced returns the recovery_required records of a session.
	Fenced(ctx context.Context, namespace, sessionID string) ([]Record, error)
	// SessionKnown reports whether the session runs under the current
	// protocol: its first recorded execution was a call made under it.
	// A session whose first record was a resumed call with no record (its
	// history predates the ledger) stays unknown for good.
	SessionKnown(ctx context.Context, namespace, sessionID string) (bool, error)
	// List returns records matching f, in f.Order.
	List(ctx context.Context, f Filter) ([]Record, error)
	// Prune deletes terminal records (and their events) that became
	// terminal before olderThan, keeping a tombstone per execution id so
	// the id stays fenced: Get then returns ErrPruned. It returns the
	// number of records pruned.
	Prune(ctx context.Context, olderThan time.Time) (int, error)
	// Close releases the ledger. It is an error to use it afterwards.
	Close() error
}
