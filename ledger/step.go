package ledger

import "time"

// What a change writes, in one place for every backend: Start and Step
// check the grammar (grammar.go) and return the record and event a backend
// stores, so that two backends given the same calls store the same values
// and refuse the same changes. A backend adds only what storage needs: the
// atomic write, the compare-and-set against concurrent writers, and the
// indexes.

// Start checks rec against the grammar (CheckCreate) and returns the record
// and first event Create stores. It sets Version, Events (1), UpdatedAt and
// (if zero) CreatedAt, and fills in the event's Seq (1), Time,
// ExecutionID, ToolCallID, Attempt and To (Decision defaults to "intent").
// Both are returned as a later read decodes them (see Normalize).
func Start(rec Record, ev Event, now time.Time) (Record, Event, error) {
	if err := CheckCreate(rec); err != nil {
		return Record{}, Event{}, err
	}
	rec.Version = RecordVersion
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.UpdatedAt = now
	rec.Events = 1
	ev.Seq, ev.Time, ev.ExecutionID, ev.ToolCallID = 1, now, rec.ID, rec.ToolCallID
	ev.Attempt, ev.From, ev.To = rec.Attempt, "", rec.State
	if ev.Decision == "" {
		ev.Decision = "intent"
	}
	Normalize(&rec)
	ev.Time = normTime(ev.Time)
	return rec, ev, nil
}

// Step checks t against the stored record old (CheckTransition) and
// returns the record and event Apply stores: the state and attempt t asks
// for, every non-zero field of t, the uncertainty mark as rule 8 says,
// UpdatedAt = now and one more event. Both are returned as a later read
// decodes them.
func Step(old Record, t Transition, now time.Time) (Record, Event, error) {
	if err := CheckTransition(old, t); err != nil {
		return Record{}, Event{}, err
	}
	rec := old
	rec.Version = RecordVersion // what this write stores, whatever old was read from
	rec.State, rec.Attempt, rec.UpdatedAt = t.To, t.Attempt, now
	if !t.Deadline.IsZero() {
		rec.Deadline = t.Deadline
	}
	if !t.NextAttemptAt.IsZero() {
		rec.NextAttemptAt = t.NextAttemptAt
	}
	if t.Approval != nil {
		a := *t.Approval
		rec.Approval = &a
	}
	if t.Outcome != nil {
		o := *t.Outcome
		rec.Outcome = &o
	}
	if t.Resolution != nil {
		r := *t.Resolution
		rec.Resolution = &r
	}
	if t.CancelRequested {
		rec.CancelRequested = true
	}
	switch {
	case t.Uncertain:
		rec.Uncertain = true
	case t.RuledOut || rec.State.Terminal():
		rec.Uncertain = false
	}
	rec.Events = old.Events + 1
	ev := t.Event
	ev.Seq, ev.Time, ev.ExecutionID, ev.ToolCallID = rec.Events, now, old.ID, rec.ToolCallID
	ev.Attempt, ev.From, ev.To = rec.Attempt, old.State, rec.State
	Normalize(&rec)
	ev.Time = normTime(ev.Time)
	return rec, ev, nil
}

// StartsLegacySession reports whether first, as the first record of its
// session, classifies the session as legacy: a call resumed from history the
// ledger had no record of. Such a session predates the ledger, so "no
// record" never proves "never ran" in it, not even for calls added to it
// later (SessionKnown stays false). Every other first record makes the
// session known. A session is classified once, by its first record.
func StartsLegacySession(first Record) bool {
	return first.Resumed && first.State == StateRecoveryRequired
}

// Pruned returns the partial record that Get returns, with ErrPruned, for
// an execution pruned by retention: what its tombstone keeps.
func Pruned(id, namespace, sessionID, toolCallID, argsDigest string, state State, terminalAt time.Time) Record {
	return Record{
		Version: RecordVersion, ID: id, Namespace: namespace, SessionID: sessionID,
		ToolCallID: toolCallID, ArgsDigest: argsDigest, State: state, UpdatedAt: normTime(terminalAt),
	}
}
