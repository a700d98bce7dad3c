package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/ledger"
)

// RecoveryReport summarises one Recover pass.
type RecoveryReport struct {
	// Pending is the number of non-terminal executions examined.
	Pending int `json:"pending"`
	// Decisions counts the resulting statuses, e.g. {"succeeded": 3,
	// "recovery_required": 1, "awaiting_approval": 2}.
	Decisions map[Status]int `json:"decisions"`
	// Uncertain lists the executions that need an operator.
	Uncertain []UncertainCall `json:"uncertain"`
	// Skipped counts executions a live call was already driving.
	Skipped int `json:"skipped"`
	// Errors lists executions the pass could not move (each stays pending
	// and is tried again by the next pass).
	Errors []string `json:"errors,omitempty"`
	// Claimed counts, on a fleet ledger, the executions this pass took
	// over from nodes whose lease was gone (they are among Pending).
	Claimed int `json:"claimed,omitempty"`
}

// Recover applies the recovery decision table to every pending execution:
// expired approval requests expire, dispatched executions without an outcome
// are re-dispatched with the same key (idempotent-retry), reconciled
// (reconcile) or parked as recovery_required (manual), and due retries run.
// Approved executions wait for their runtime to re-drive them, and so do
// executions in a fenced session. It reads
// only the ledger's pending index. Open runs it before admitting new work.
//
// On a fleet ledger the pass first claims the pending executions of every
// node whose lease is gone, then decides those this node owns (and those
// nobody owns), never another live node's. Under a Scope (WithScope) it
// decides and reports the scope's executions only.
func (e *Executor) Recover(ctx context.Context) (RecoveryReport, error) {
	return e.recover(ctx, nil, true)
}

// recover runs one pass over every pending execution. With reread, each
// record is read again under its flight, because a live call may have
// moved it since the pending index was read; Open passes false, since no
// call is admitted before its pass ends, which saves a point read per
// pending execution (the read that would otherwise grow with the size of
// the history).
func (e *Executor) recover(ctx context.Context, progress func(int), reread bool) (RecoveryReport, error) {
	return e.pass(ctx, progress, reread, false)
}

// recoverDue runs the pass of Run: over the executions due now only (see
// ledger.DueAt), so that its cost follows the work due, not the
// executions waiting for reviewers and operators.
func (e *Executor) recoverDue(ctx context.Context) (RecoveryReport, error) {
	return e.pass(ctx, nil, true, true)
}

// reportCorrupt logs, at most once an hour per execution (a due one is
// met by every pass), that id's record does not decode.
func (e *Executor) reportCorrupt(id string, err error) {
	now := time.Now()
	if last, ok := e.corruptLogged.Load(id); ok && now.Sub(last.(time.Time)) < time.Hour {
		return
	}
	e.corruptLogged.Store(id, now)
	e.opts.Logger.Error("an execution's record in the ledger does not decode (edited or copied in the database): it is neither run nor ended, and every request for it answers ledger_damaged; restore its row",
		"execution_id", id, "error", err)
}

// pass is recover (due false) or recoverDue (due true). A due execution
// is read under its flight, as with reread.
func (e *Executor) pass(ctx context.Context, progress func(int), reread, due bool) (RecoveryReport, error) {
	rep := RecoveryReport{Decisions: map[Status]int{}}
	var pending []ledger.Record
	add := func(r ledger.Record) error {
		pending = append(pending, r)
		return nil
	}
	addID := func(id string) error { return add(ledger.Record{ID: id}) }
	until := e.now()
	// On a fleet ledger: the executions of gone leases first; then this
	// node's own and nobody's, never another live node's.
	var claimStart time.Time
	if telemetry.Enabled() {
		claimStart = time.Now()
	}
	claimed, err := e.led.Claim(ctx)
	if err != nil {
		return rep, err
	}
	rep.Claimed = claimed
	if claimed > 0 && telemetry.Enabled() {
		// A takeover: its span lasts the pass, and the recovery span of
		// each execution decided in it links to it.
		var span trace.Span
		ctx, span = telemetry.StartAt(ctx, telemetry.SpanClaim, trace.SpanKindInternal, trace.WithTimestamp(claimStart))
		span.SetAttributes(telemetry.Claimed.Int(claimed))
		defer span.End()
	}
	if due {
		err = e.led.Due(ctx, until, addID)
	} else {
		err = e.led.Pending(ctx, add)
	}
	var bad *ledger.CorruptRecordsError
	if errors.As(err, &bad) {
		// One record edited or copied in the database fences its own
		// execution (nothing can run or end it: every read of it fails
		// with ErrCorrupt), not the node: the others are recovered.
		for i, id := range bad.IDs {
			rep.Errors = append(rep.Errors, fmt.Sprintf("execution[%s]: %v", id, bad.Errs[i]))
			e.reportCorrupt(id, bad.Errs[i])
		}
		err = nil
	}
	if err != nil {
		return rep, fmt.Errorf("host: read pending executions: %w", err)
	}
	reread = reread || due
	for i, r := range pending {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		release, ok := e.flights.tryAcquire(r.ID)
		if !ok {
			rep.Skipped++
			continue
		}
		rec, err := r, error(nil)
		if reread {
			rec, err = e.led.Get(ctx, r.ID)
		}
		if err == nil && !inScope(ctx, rec.Namespace) {
			release() // another namespace's: not this caller's to decide
			continue
		}
		if err == nil && !rec.State.Terminal() {
			var res Result
			rctx, span := ctx, trace.SpanFromContext(context.Background())
			if due || (rec.State != ledger.StateAwaitingApproval && rec.State != ledger.StateRecoveryRequired) {
				// Work on a call nobody waits for: it joins the call's
				// trace. (At Open, calls waiting for a human are only
				// looked at: they get no span.)
				rctx, span = joinRecorded(ctx, telemetry.SpanRecover, rec)
			}
			res, err = e.advance(rctx, nil, rec, observed{})
			endRecover(span, res, err)
			if err == nil {
				rep.Pending++
				rep.Decisions[res.Status]++
				if res.Status == StatusRecoveryRequired {
					rep.Uncertain = append(rep.Uncertain, UncertainCall{ExecutionID: rec.ID, ToolCallID: rec.ToolCallID, Tool: rec.Connector + "." + rec.Operation, Attempt: res.Attempt})
				}
			}
		}
		release()
		if err != nil {
			// One execution the pass cannot move must not stop the others
			// (nor Open): it is reported and stays pending for the next pass.
			rep.Errors = append(rep.Errors, fmt.Sprintf("execution[%s]: %v", r.ID, err))
			if errors.Is(err, ledger.ErrCorrupt) && !errors.As(err, new(*ledger.DamageError)) {
				e.reportCorrupt(r.ID, err)
			} else {
				e.opts.Logger.Error("recovery could not decide an execution", "execution_id", r.ID, "error", err)
			}
			continue
		}
		if progress != nil {
			progress(i + 1)
		}
	}
	return rep, nil
}
