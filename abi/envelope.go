package abi

import (
	"fmt"

	"github.com/connhost/connhost/abi/codec"
)

// OutcomeKind is the typed result of a connector call.
type OutcomeKind uint8

// Outcome kinds. Execute and execute_with_key return OK, Retryable,
// Permanent, Uncertain or InProgress; reconcile returns Applied, NotApplied
// or Unknown.
//
// The execute kinds say what the connector knows about its attempt's
// effect: OK (it happened), Retryable and Permanent (it did not happen),
// Uncertain (it may have happened), InProgress (the provider is still
// working on an earlier request with the same key). The host never reports
// an execution failed while an attempt may have taken effect.
const (
	// OutcomeOK: the operation took effect (or, for a read, answered).
	// Result holds its JSON result; Receipt may name the external object.
	OutcomeOK OutcomeKind = 1
	// OutcomeRetryable: this attempt did not take effect and may be tried
	// again (a rate limit or a refusal before the provider acted, a request
	// that never left). An answer that cannot rule out an effect is
	// OutcomeUncertain, not this.
	OutcomeRetryable OutcomeKind = 2
	// OutcomePermanent: the operation did not take effect and retrying the
	// same input cannot help (declined card, invalid request).
	OutcomePermanent OutcomeKind = 3
	// OutcomeApplied: reconcile found the effect of the original call.
	// Result and Receipt describe it.
	OutcomeApplied OutcomeKind = 4
	// OutcomeNotApplied: reconcile has authoritative evidence that the
	// original call had no effect.
	OutcomeNotApplied OutcomeKind = 5
	// OutcomeUnknown: reconcile could not decide (provider unreachable,
	// search not yet consistent). The host treats it as recovery_required.
	OutcomeUnknown OutcomeKind = 6
	// OutcomeUncertain: the attempt may have taken effect and the connector
	// cannot tell (the request was sent and the answer was lost, timed out,
	// or was a provider error that leaves the result open, such as a 5xx to
	// a POST). The host applies the operation's declared recovery policy,
	// exactly as after a crash.
	OutcomeUncertain OutcomeKind = 7
	// OutcomeInProgress: the provider says an earlier request with this
	// execution's idempotency key is still being processed (Stripe's 409
	// idempotency_key_in_use). Nothing is known yet; the host waits and asks
	// again with the same key later. It is never a failure.
	OutcomeInProgress OutcomeKind = 8
)

var outcomeNames = [...]string{
	OutcomeOK:         "ok",
	OutcomeRetryable:  "retryable_error",
	OutcomePermanent:  "permanent_error",
	OutcomeApplied:    "applied",
	OutcomeNotApplied: "not_applied",
	OutcomeUnknown:    "unknown",
	OutcomeUncertain:  "uncertain",
	OutcomeInProgress: "in_progress",
}

// String returns the kind's name as used in the ledger and the API
// ("ok", "retryable_error", "permanent_error", "applied", "not_applied",
// "unknown", "uncertain", "in_progress").
func (k OutcomeKind) String() string {
	if k.Valid() {
		return outcomeNames[k]
	}
	return fmt.Sprintf("outcome(%d)", uint8(k))
}

// Valid reports whether k is one of the defined kinds.
func (k OutcomeKind) Valid() bool { return k >= OutcomeOK && k <= OutcomeInProgress }

// ForReconcile reports whether k is a reconcile answer (applied, not_applied,
// unknown) rather than an execute answer.
func (k OutcomeKind) ForReconcile() bool { return k >= OutcomeApplied && k <= OutcomeUnknown }

// Outcome is the envelope a connector returns from execute, execute_with_key
// and reconcile.
type Outcome struct {
	Kind OutcomeKind
	// Result is the operation's JSON result (empty when there is none).
	Result []byte
	// Receipt names the external object the call created or found, e.g. a
	// PaymentIntent id or a Mailpit message id.
	Receipt string
	// Error is a human-readable message for error and unknown outcomes.
	Error string
}

const tagOutcome = 0xC1 // outcome envelope, version 1

// AppendBinary appends the wire form of o to b:
// tag(1) kind(1) result(bytes) receipt(bytes) error(bytes).
func (o Outcome) AppendBinary(b []byte) []byte {
	w := writer{b: b}
	w.u8(tagOutcome)
	w.u8(uint8(o.Kind))
	w.bytes(o.Result)
	w.str(o.Receipt)
	w.str(o.Error)
	return w.b
}

// DecodeOutcome parses an outcome envelope. It checks structure and kind,
// and that a non-empty Result is valid JSON; it does not check that the kind
// fits the export that produced it. The returned Result aliases b.
func DecodeOutcome(b []byte) (Outcome, error) {
	r := reader{b: b}
	if tag := r.u8(); r.err == nil && tag != tagOutcome {
		return Outcome{}, fmt.Errorf("%w: outcome tag %#x", ErrBadTag, tag)
	}
	o := Outcome{Kind: OutcomeKind(r.u8())}
	o.Result = r.bytes()
	o.Receipt = r.str()
	o.Error = r.str()
	if err := r.done(); err != nil {
		return Outcome{}, fmt.Errorf("abi: decode outcome: %w", err)
	}
	if !o.Kind.Valid() {
		return Outcome{}, fmt.Errorf("abi: decode outcome: %w %d", ErrBadKind, uint8(o.Kind))
	}
	if len(o.Result) > 0 && !codec.Valid(o.Result) {
		return Outcome{}, fmt.Errorf("abi: decode outcome: result is not valid JSON")
	}
	if len(o.Result) == 0 {
		o.Result = nil
	}
	return o, nil
}

// Description is what a module says about itself through [ExportDescribe].
// The host cross-checks it against the connector's manifest.
type Description struct {
	// ABI is the ABI version the module was built against.
	ABI int `json:"abi"`
	// Operations lists every operation the module implements.
	Operations []OperationInfo `json:"operations"`
}

// OperationInfo says which entry points one operation implements.
type OperationInfo struct {
	Name string `json:"name"`
	// Execute: the operation answers connhost_execute.
	Execute bool `json:"execute"`
	// ExecuteWithKey: the operation answers connhost_execute_with_key and
	// hands the key to its provider. Required by recovery "idempotent-retry".
	ExecuteWithKey bool `json:"execute_with_key"`
	// Reconcile: the operation answers connhost_reconcile. Required by
	// recovery "reconcile".
	Reconcile bool `json:"reconcile"`
}

// Operation returns the named operation's info and whether it exists.
func (d Description) Operation(name string) (OperationInfo, bool) {
	for _, op := range d.Operations {
		if op.Name == name {
			return op, true
		}
	}
	return OperationInfo{}, false
}

// DecodeDescription parses and checks a description: known fields only,
// non-empty unique operation names, and each operation implementing at least
// one of execute and execute_with_key.
func DecodeDescription(b []byte) (Description, error) {
	var d Description
	if err := UnmarshalStrict(b, &d); err != nil {
		return Description{}, fmt.Errorf("abi: decode description: %w", err)
	}
	seen := make(map[string]bool, len(d.Operations))
	for i, op := range d.Operations {
		switch {
		case op.Name == "":
			return Description{}, fmt.Errorf("abi: decode description: operation %d has no name", i)
		case seen[op.Name]:
			return Description{}, fmt.Errorf("abi: decode description: operation %q listed twice", op.Name)
		case !op.Execute && !op.ExecuteWithKey:
			return Description{}, fmt.Errorf("abi: decode description: operation %q implements neither execute nor execute_with_key", op.Name)
		}
		seen[op.Name] = true
	}
	return d, nil
}
