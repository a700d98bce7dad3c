package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/connhost/connhost/internal/consumed"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// The journal of consumed approvals. On a shared ledger the signature of
// an approval proves who approved which call, but not that the call has
// not run yet: whoever holds the database's connection string can save
// the approved row and put it back, byte for byte, after the call ran
// (deleting the newer events), or edit the row of a call that succeeded
// into a retry_wait. Both verify, and before this journal both were
// dispatched again. So before a gated call's dispatch (first attempt,
// retry, recovery's or an operator's retry) a node consults its journal
// (Options.ConsumedDir, outside the database): a dispatch of that attempt
// recorded there, or the execution recorded as applied, makes the record
// one that went backwards, and the dispatch is refused: the execution
// becomes recovery_required with decision ledger_damaged (its session
// fenced; the node goes on serving every other call). Right after its
// dispatch record is written, and before the connector is called, the
// node claims the attempt in the journal (an exclusive create, synced);
// once it has recorded the call succeeded (the connector or reconcile
// answered applied, or an operator said so), it records that too. A
// node's own journal knows its own dispatches; nodes given one directory
// they share know each other's. See RATIONALE.md, "Why a journal of
// consumed approvals outside the database?".

// ConsumedRetention is how long after an approval's expiry the journal
// keeps the record of its dispatches, and so how long after it a gated
// call may still be dispatched on a shared ledger (a retry, a recovery):
// past it, no journal could tell a repeat from a first dispatch, and
// the approval no longer verifies.
const ConsumedRetention = 7 * 24 * time.Hour

// consumedSuffix names the default journal beside the witness.
const consumedSuffix = ".consumed"

// defaultConsumedDir is the journal beside witness: "data.consumed" for
// "data.witness", else witness + ".consumed".
func defaultConsumedDir(witness string) string {
	if witness == "" {
		return ""
	}
	return strings.TrimSuffix(filepath.Clean(witness), ledger.WitnessSuffix) + consumedSuffix
}

// journaled reports whether dispatches of rec go through the journal: a
// gated call with an effect on a shared ledger (a read has nothing to
// repeat).
func (e *Executor) journaled(rec ledger.Record, op *operation) bool {
	return e.journal != nil && e.gatedOnShared(op) && rec.Effect != string(manifests.EffectRead)
}

// repeated returns why the next dispatch of rec (attempt rec.Attempt+1)
// would repeat one the journal records, or "" when it would not: rec
// went backwards, or was edited, in the database. An error is a journal
// that cannot be read: nothing may be dispatched then.
func (e *Executor) repeated(rec ledger.Record, op *operation) (string, error) {
	switch rec.State {
	case ledger.StateApproved, ledger.StateRetryWait, ledger.StateDispatched:
	default:
		return "", nil
	}
	if !e.journaled(rec, op) {
		return "", nil
	}
	next := rec.Attempt + 1
	seen, path, ok, err := e.journal.Seen(rec.ID, next)
	if err != nil {
		return "", fmt.Errorf("host: execution[%s]: the journal of consumed approvals %s cannot be read, so no gated call is dispatched: %w", rec.ID, e.journal.Dir(), err)
	}
	if !ok {
		return "", nil
	}
	return repeatReason(rec, next, seen, path), nil
}

func repeatReason(rec ledger.Record, next int, seen consumed.Entry, path string) string {
	return fmt.Sprintf("the ledger holds this execution %s at attempt %d, so its next dispatch would be attempt %d, but the journal of consumed approvals says %s (%s): the record was restored or edited in the database after the call ran, and running it again could repeat its effect",
		rec.State, rec.Attempt, next, seen, path)
}

// claim records, in the journal, the dispatch of rec's attempt that was
// just written to the ledger, before the connector is called. It returns
// the observation that replaces the call when the call must not be made:
// the journal holds that dispatch already (evRepeat), or cannot record it
// (evRetryable: not called).
func (e *Executor) claim(rec ledger.Record, op *operation) (observed, bool) {
	if !e.journaled(rec, op) || rec.Approval == nil {
		return observed{}, true
	}
	now := e.now()
	err := e.journal.Claim(consumed.Entry{Execution: rec.ID, Attempt: rec.Attempt, Approval: rec.Approval.ID,
		Node: e.opts.Node, At: now, KeepUntil: keepConsumed(rec.Approval, now)})
	var re *consumed.RepeatError
	switch {
	case errors.As(err, &re):
		return observed{ev: evRepeat, detail: fmt.Sprintf("attempt %d was recorded as dispatched but not called: the journal of consumed approvals says %s (%s): the record was restored or edited in the database after the call ran, and running it again could repeat its effect",
			rec.Attempt, re.Entry, re.Path)}, false
	case err != nil:
		e.opts.Logger.Error("the journal of consumed approvals cannot record a dispatch: the call is not made", "execution", rec.ID, "attempt", rec.Attempt, "error", err)
		o := ledger.Outcome{Kind: "retryable_error", Error: "not called: " + err.Error(), Source: "host"}
		return observed{ev: evRetryable, out: o, detail: o.Error}, false
	}
	return observed{}, true
}

// noteApplied records in the journal that rec's attempt was applied: no
// later dispatch of rec may follow, whatever the ledger says.
func (e *Executor) noteApplied(rec ledger.Record, op *operation) {
	if !e.journaled(rec, op) || rec.Approval == nil {
		return
	}
	now := e.now()
	if err := e.journal.Applied(consumed.Entry{Execution: rec.ID, Attempt: rec.Attempt, Approval: rec.Approval.ID,
		Node: e.opts.Node, At: now, KeepUntil: keepConsumed(rec.Approval, now)}); err != nil {
		e.opts.Logger.Error("the journal of consumed approvals cannot record an applied call", "execution", rec.ID, "attempt", rec.Attempt, "error", err)
	}
}

// keepConsumed is how long a journal entry of approval a, written at now,
// is kept: ConsumedRetention past the approval's expiry (or now, if
// later).
func keepConsumed(a *ledger.Approval, now time.Time) time.Time {
	if a.ExpiresAt.After(now) {
		now = a.ExpiresAt
	}
	return now.Add(ConsumedRetention)
}

// maybePrune prunes the journal at most once an hour.
func (e *Executor) maybePrune() {
	if e.journal == nil {
		return
	}
	now := e.now()
	e.pruneMu.Lock()
	due := now.Sub(e.pruned) >= time.Hour || now.Before(e.pruned)
	if due {
		e.pruned = now
	}
	e.pruneMu.Unlock()
	if !due {
		return
	}
	if n, err := e.journal.Prune(now, ConsumedRetention); err != nil {
		e.opts.Logger.Warn("pruning the journal of consumed approvals failed", "dir", e.journal.Dir(), "error", err)
	} else if n > 0 {
		e.opts.Logger.Info("pruned the journal of consumed approvals", "dir", e.journal.Dir(), "entries", n)
	}
}
