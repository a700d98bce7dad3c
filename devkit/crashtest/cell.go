package crashtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/manifests"
)

// cell is one point × operation × variant run in its own data directory.
type cell struct {
	o         *Options
	spec      cellSpec
	connector string
	dir       string
	manifest  []byte
	// baseline is the effect count of an uninterrupted run of the same
	// operation and variant, when known.
	baseline *int

	data, manifests string
	// dsn is the cell's shared ledger (Options.Ledger), or "".
	dsn string
	// config is the connhost.toml the cell runs with: Options.Config, or
	// on a shared ledger a copy naming the approver the cell approves as.
	config string
	kills  int
	// runID tells this run's calls from another run's (see Run).
	runID string
	// heldAnswered: in the in-flight row, the provider told what it
	// answered the released request (Row.HeldAnswer).
	heldAnswered bool
	// retention is the key retention the host applies to the connector
	// (keyRetention); clockOffset how far ahead the cell's processes run
	// (the key rows, once the provider's clock moved).
	retention, clockOffset time.Duration
	// provider is the manifest's [provider] claim (the provider_key row).
	provider manifests.Provider
}

// result is the subset of host.Result (exec --json) the judge reads.
type result struct {
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	Receipt     string `json:"receipt"`
	Error       string `json:"error"`
	Attempt     int    `json:"attempt"`
	// NextAttemptAt: when a pending call is worth asking about again.
	NextAttemptAt time.Time `json:"next_attempt_at"`
	Approval      *struct {
		ID         string `json:"id"`
		ArgsDigest string `json:"args_digest"`
	} `json:"approval"`
	// Code is set when connhost answered a problem document instead.
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// history is the subset of `connhost history --json` (an execution in
// the shape of the HTTP API, with its events) the judge reads.
type history struct {
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
	Events  []struct {
		Time     time.Time `json:"time"`
		Attempt  int       `json:"attempt"`
		From     string    `json:"from"`
		To       string    `json:"to"`
		Decision string    `json:"decision"`
		Actor    string    `json:"actor"`
		Evidence string    `json:"evidence"`
	} `json:"events"`
}

// nothingHappened are the final statuses that tell a caller the call took
// no effect.
var nothingHappened = []string{"failed", "rejected", "expired", "cancelled"}

// final statuses: the call will not move without an operator or a runtime.
var finalStatuses = []string{"succeeded", "failed", "rejected", "expired", "abandoned", "cancelled", "recovery_required"}

// prepare makes the cell's directories, its manifest copy and (with
// Options.Ledger) its shared ledger.
func (c *cell) prepare(ctx context.Context) error {
	c.manifests = filepath.Join(c.dir, "manifests")
	c.data = filepath.Join(c.dir, "data")
	if err := os.MkdirAll(c.manifests, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(c.data, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.manifests, c.connector+".toml"), c.manifest, 0o644); err != nil {
		return err
	}
	c.config = c.o.Config
	if c.o.Ledger != nil {
		var err error
		if c.dsn, err = c.o.Ledger(ctx); err != nil {
			return fmt.Errorf("a shared ledger for the cell: %w", err)
		}
		if c.config, err = c.approverConfig(); err != nil {
			return err
		}
	}
	return nil
}

// callArgs is the exec command line of the cell's call. The session
// names the run as well as the cell: the idempotency key is derived from
// it, and a provider that outlives one run must not take the next run's
// calls for retries of this one.
func (c *cell) callArgs(args json.RawMessage) []string {
	return c.callArgsAs("call-"+c.spec.point, args)
}

// callArgsAs is the exec command line of a call of the cell's session
// with the tool-call id toolCall.
func (c *cell) callArgsAs(toolCall string, args json.RawMessage) []string {
	return []string{"exec", "--session", "crashtest-" + c.runID + "-" + filepath.Base(c.dir), "--tool-call", toolCall,
		"--tool", c.connector + "." + c.spec.op.Name, "--args", string(args)}
}

// preflight runs the cell's call without a crash and returns its final
// answer.
func (c *cell) preflight(ctx context.Context) (result, error) {
	if err := c.prepare(ctx); err != nil {
		return result{}, err
	}
	if err := c.startCell(ctx); err != nil {
		return result{}, err
	}
	args, err := c.o.Args(ctx, c.spec.op.Name)
	if err != nil {
		return result{}, fmt.Errorf("sample arguments: %w", err)
	}
	return c.driveToFinal(ctx, c.callArgs(args))
}

func (c *cell) run(ctx context.Context) (Row, error) {
	op := c.spec.op
	row := Row{Point: c.spec.point, Operation: op.Name, Policy: string(op.Recovery), Effect: string(op.Effect), Gated: c.spec.gated}
	if op.Effect == manifests.EffectRead {
		row.Policy = ""
	}
	if err := c.prepare(ctx); err != nil {
		return row, err
	}
	if err := c.startCell(ctx); err != nil {
		return row, err
	}
	args, err := c.o.Args(ctx, op.Name)
	if err != nil {
		return row, fmt.Errorf("sample arguments: %w", err)
	}
	before, err := c.o.Effects(ctx, op.Name)
	if err != nil {
		return row, fmt.Errorf("count effects before: %w", err)
	}
	switch c.spec.point {
	case PointEqualArgs:
		return c.equalArgs(ctx, row, args, before)
	case PointProviderKey:
		return c.proveKey(ctx, row, args, before)
	}
	call := c.callArgs(args)

	row.Reached = true
	var inFlight []string // what the call answered while the provider held it
	var told *result      // what the process killed at after_answer printed
	switch {
	case c.spec.point == crash.AfterAnswer:
		if told, err = c.killAfterAnswer(ctx, call); err != nil {
			return row, err
		}
	case c.spec.point == PointInFlight:
		if inFlight, err = c.killWhileHeld(ctx, call, before, &row); errors.Is(err, errNotHeld) {
			// The provider cannot hold this request (an emulator without
			// the endpoint's hold point): n/a, still judged for
			// duplicates and lost calls.
			row.Reached, inFlight = false, nil
		} else if err != nil {
			return row, err
		}
	default:
		// Phase 1 (and 2 for after_reconcile_return): armed until a
		// process dies at the point.
		phases := []string{c.spec.point}
		switch c.spec.point {
		case crash.AfterReconcileReturn:
			phases = []string{crash.AfterPluginReturn, crash.AfterReconcileReturn}
		case PointKeyKept, PointKeyExpired:
			phases = []string{crash.AfterPluginReturn}
		}
		for _, p := range phases {
			_, killed, err := c.sequence(ctx, p, call)
			if err != nil {
				return row, err
			}
			if !killed {
				row.Reached = false
				break
			}
		}
		if row.Reached && (c.spec.point == PointKeyKept || c.spec.point == PointKeyExpired) {
			// A day later, for the provider and for the host.
			d := c.retention - time.Minute
			if c.spec.point == PointKeyExpired {
				d = c.retention + time.Minute
			}
			if err := c.o.Clock.Advance(ctx, d); err != nil {
				return row, fmt.Errorf("move the provider's clock %s ahead: %w", d, err)
			}
			c.clockOffset = d
		}
	}
	res, err := c.driveToFinal(ctx, call)
	if err != nil {
		return row, err
	}
	// Re-issue once more: exactly one result.
	again, err := c.exec(ctx, "", call)
	if err != nil {
		return row, err
	}
	var h history
	if res.ExecutionID != "" {
		p, err := c.connhost(ctx, "", "history", res.ExecutionID)
		if err != nil {
			return row, err
		}
		if err := json.Unmarshal(p.Stdout, &h); err != nil || p.Code != 0 {
			return row, fmt.Errorf("history %s: exit %d: %s %s", res.ExecutionID, p.Code, clip(string(p.Stdout)), clip(string(p.Stderr)))
		}
	}
	after, err := c.o.Effects(ctx, op.Name)
	if err != nil {
		return row, fmt.Errorf("count effects after: %w", err)
	}
	row.Kills = c.kills
	row.Effects = after - before
	row.Final = res.Status
	if res.Code != "" {
		row.Final = "error:" + res.Code
	}
	row.Receipt = res.Receipt
	row.ConnectorError = res.Error
	row.Attempt = h.Attempt
	row.Decision = "none"
	for _, ev := range h.Events {
		// On a shared ledger actors name the lease: recovery@node#epoch.
		if ev.Actor == "recovery" || strings.HasPrefix(ev.Actor, "recovery@") {
			row.Decision = ev.Decision
			break
		}
	}
	problems := c.judge(ctx, &row, res, again.result, h)
	if told != nil && (told.Status != res.Status || told.Receipt != res.Receipt) {
		problems = append(problems, fmt.Sprintf("the caller was told %s/%q before the kill, recovery answered %s/%q",
			told.Status, told.Receipt, res.Status, res.Receipt))
	}
	if c.spec.point == PointInFlight && row.Reached {
		problems = append(problems, judgeInFlight(row, inFlight, c.heldAnswered)...)
	}
	if (c.spec.point == PointKeyKept || c.spec.point == PointKeyExpired) && row.Reached {
		problems = append(problems, judgeKeyRetention(row, c.spec.point, c.retention)...)
	}
	row.Pass = len(problems) == 0
	row.Problem = strings.Join(problems, "; ")
	if !row.Pass {
		row.Trail = h.trail()
	}
	return row, nil
}

// trail renders the events one per line, timed from the first.
func (h history) trail() []string {
	var out []string
	for _, ev := range h.Events {
		line := fmt.Sprintf("+%.3fs attempt %d %s→%s %s", ev.Time.Sub(h.Events[0].Time).Seconds(), ev.Attempt, orDash(ev.From), ev.To, ev.Decision)
		if ev.Actor != "" {
			line += " (" + ev.Actor + ")"
		}
		if ev.Evidence != "" {
			line += ": " + clip(ev.Evidence)
		}
		out = append(out, line)
	}
	return out
}

// driveToFinal restarts connhost on the cell's data directory (no crash
// armed; opening runs recovery) and drives the call until its status is
// final, as a runtime does: a pending answer (a retry, an attempt that must
// settle before reconcile's "not applied" counts) says when to ask again.
func (c *cell) driveToFinal(ctx context.Context, call []string) (result, error) {
	var res result
	deadline := time.Now().Add(c.o.ProcessTimeout)
	for turn := 0; ; turn++ {
		var killed bool
		var err error
		if res, killed, err = c.sequence(ctx, "", call); err != nil {
			return res, err
		}
		if killed {
			return res, fmt.Errorf("a process died by SIGKILL without a crash point armed")
		}
		if slices.Contains(finalStatuses, res.Status) || res.Code != "" || turn >= 20 || time.Now().After(deadline) {
			return res, nil
		}
		if wait := time.Until(res.NextAttemptAt); wait > 0 {
			select {
			case <-time.After(min(wait, time.Until(deadline))):
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
	}
}

// killAfterAnswer drives the call to its dispatching exec (approving a
// gated call unarmed first) and kills that process right after it printed
// its answer, which it returns: with LoseUnsynced a lazily written outcome
// is lost there, and what recovery answers must be what the caller saw.
func (c *cell) killAfterAnswer(ctx context.Context, call []string) (*result, error) {
	if c.spec.gated {
		res, err := c.exec(ctx, "", call)
		if err != nil || res.killed || res.Status != "awaiting_approval" || res.Approval == nil {
			return nil, fmt.Errorf("gated call answered %q %s before the armed exec: %v", res.Status, res.Code, err)
		}
		p, err := c.connhost(ctx, "", "approve", res.Approval.ID, "--by", approver, "--digest", res.Approval.ArgsDigest)
		if err != nil || p.Code != 0 {
			return nil, fmt.Errorf("approve: exit %d: %v %s", p.Code, err, clip(string(p.Stderr)))
		}
	}
	res, err := c.exec(ctx, crash.AfterAnswer, call)
	if err != nil {
		return nil, err
	}
	if !res.killed || res.Status == "" {
		return nil, fmt.Errorf("exec armed at %s answered %q without dying there", crash.AfterAnswer, res.Status)
	}
	told := res.result
	return &told, nil
}

// killWhileHeld is the in-flight row: the provider holds the call's request
// (received, not yet applied), the connhost process running it is
// SIGKILLed, and the call is re-driven by new processes for longer than the
// host's whole retry budget while the request stays held. Then the request
// is released and lands. It returns the statuses answered while it was
// held.
func (c *cell) killWhileHeld(ctx context.Context, call []string, before int, row *Row) ([]string, error) {
	if c.spec.gated {
		// Approve first, without a hold: the row is about the dispatch.
		res, err := c.exec(ctx, "", call)
		if err != nil || res.killed || res.Status != "awaiting_approval" || res.Approval == nil {
			return nil, fmt.Errorf("gated call answered %q %s before the hold: %v", res.Status, res.Code, err)
		}
		p, err := c.connhost(ctx, "", "approve", res.Approval.ID, "--by", approver, "--digest", res.Approval.ArgsDigest)
		if err != nil || p.Code != 0 {
			return nil, fmt.Errorf("approve before the hold: exit %d: %v %s", p.Code, err, clip(string(p.Stderr)))
		}
	}
	if err := c.o.Hold.Arm(ctx, c.spec.op.Name); errors.Is(err, ErrCannotHold) {
		return nil, fmt.Errorf("%w: %w", errNotHeld, err)
	} else if err != nil {
		return nil, fmt.Errorf("arm the provider's hold: %w", err)
	}
	p, err := c.connhostKilledWhen(ctx, func(ctx context.Context) error { return c.o.Hold.WaitHeld(ctx) }, call...)
	if err != nil {
		return nil, err
	}
	if !p.Killed() {
		// Disarm: a hold left armed would catch the next cell's request.
		if err := c.o.Hold.Release(ctx); err != nil {
			return nil, fmt.Errorf("release the provider's unused hold: %w", err)
		}
		return nil, fmt.Errorf("%w (the call finished, exit %d)", errNotHeld, p.Code)
	}
	// Past the whole retry budget: every attempt the host makes meets the
	// held request (in progress), or a reconcile that must wait for it.
	var seen []string
	for turn := 0; turn < 3; turn++ {
		res, killed, err := c.sequence(ctx, "", call)
		if err != nil || killed {
			return nil, fmt.Errorf("re-driving while held: killed %t: %w", killed, err)
		}
		st := res.Status
		if res.Code != "" {
			st = "error:" + res.Code
		}
		seen = append(seen, st)
		if st != "pending" {
			break
		}
	}
	if n, err := c.o.Effects(ctx, c.spec.op.Name); err != nil {
		return nil, err
	} else if n != before {
		seen = append(seen, fmt.Sprintf("effects:%d", n-before))
	}
	if err := c.o.Hold.Release(ctx); err != nil {
		return nil, fmt.Errorf("release the provider's hold: %w", err)
	}
	// The held request lands now (the provider completes it without its
	// client). A provider that tells when it answered it says when the
	// count is final; else the count is awaited.
	if ha, ok := c.o.Hold.(HeldAnswerer); ok {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		st, err := ha.HeldAnswer(actx)
		switch {
		case err == nil:
			row.HeldAnswer, c.heldAnswered = st, true
			return seen, nil
		case !errors.Is(err, ErrNoHeldAnswer):
			return nil, fmt.Errorf("the provider's answer to the released request: %w", err)
		}
	}
	landed := time.Now().Add(30 * time.Second)
	for {
		n, err := c.o.Effects(ctx, c.spec.op.Name)
		if err != nil {
			return nil, err
		}
		if n > before || time.Now().After(landed) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return seen, nil
}

// errNotHeld: the provider never held the call's request.
var errNotHeld = errors.New("the provider did not hold the request")

// judgeInFlight checks the in-flight row: while the provider held the
// request nothing may claim the call failed, and once the held request
// was answered there is exactly one effect.
//
// An effect that appears while the request is held came from a
// re-dispatch (the held request has not reached the provider). That is
// the safe design of a provider that refuses a duplicate atomically (a
// unique field, a key it deduplicates by): the held request then meets
// the re-dispatch's effect and is refused, or replayed. It is judged by
// the count once the provider answered the held request (answers: the
// holder tells when that was), which holds the second effect of a
// provider that does not refuse it. A holder that cannot tell leaves no
// final count to judge by, so there the early effect itself fails.
func judgeInFlight(row Row, seen []string, answers bool) []string {
	var problems []string
	for _, st := range seen {
		switch {
		case st == "failed":
			problems = append(problems, "answered failed while the provider was still processing the call")
		case strings.HasPrefix(st, "effects:") && !answers:
			problems = append(problems, "an effect appeared while the request was held ("+st+"), and the provider cannot say when the held request was answered: there is no final count to judge it by")
		}
	}
	if row.Final == "failed" {
		problems = append(problems, "ended failed though the held request took effect")
	}
	if row.Effects != 1 && !row.Duplicate {
		problems = append(problems, fmt.Sprintf("%d effects after the held request was released, want 1", row.Effects))
	}
	if row.Duplicate && row.HeldAnswer/100 == 2 {
		problems = append(problems, fmt.Sprintf("the held request, released after the call was re-driven, was answered %d and took effect again: nothing at the provider refuses the duplicate", row.HeldAnswer))
	}
	return problems
}

// judgeKeyRetention checks a key row (the effect applied, then the
// clocks moved by the retention less or more a minute): within the
// retention the key is re-sent and the provider, which still knows it,
// answers with the one effect; past it the key is never re-sent, and
// reconcile finds the effect (succeeded, not dispatched again) or an
// operator decides (recovery_required, key_retention_passed).
func judgeKeyRetention(row Row, point string, retention time.Duration) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if point == PointKeyKept {
		if row.Decision != string(host.DecisionRecoverRetry) || row.Final != "succeeded" {
			bad("%s within the key retention of %s: recovery decided %s and the call ended %s, want recover_retry and succeeded", point, retention, row.Decision, row.Final)
		}
		if row.Effects > 1 {
			bad("the provider forgot the key before the retention the manifest declares (%s): the key re-sent %s after the call made a second effect; declare the provider's real retention in [provider] idempotency_retention", retention, retention-time.Minute)
		}
		return problems
	}
	switch {
	case row.Attempt > 1 || row.Decision == string(host.DecisionRecoverRetry):
		bad("past the key retention of %s the call was dispatched again (attempt %d, decision %s): the provider may have forgotten the key", retention, row.Attempt, row.Decision)
	case row.Final == "succeeded" && row.Decision != string(host.DecisionReconciledApplied):
		bad("past the key retention the call succeeded by %s, want reconciled_applied", row.Decision)
	case row.Final == "recovery_required" && row.Decision != string(host.DecisionKeyRetentionPassed):
		bad("past the key retention the call became recovery_required by %s, want key_retention_passed", row.Decision)
	case row.Final != "succeeded" && row.Final != "recovery_required":
		bad("past the key retention the call ended %s, want succeeded (reconcile found the effect) or recovery_required (an operator decides)", row.Final)
	}
	if row.Effects != 1 {
		bad("%d effects, want the one the call made before the kill", row.Effects)
	}
	return problems
}

// judge checks a finished cell against the declared policy and returns
// what it broke.
func (c *cell) judge(ctx context.Context, row *Row, res, again result, h history) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	op := c.spec.op
	external := op.Effect == manifests.EffectExternal
	// Did the crash leave a dispatched attempt without an outcome?
	uncertain := row.Reached && (c.spec.point == crash.AfterDispatchRecord || c.spec.point == crash.AfterPluginReturn ||
		c.spec.point == crash.AfterReconcileReturn || (c.spec.point == crash.AfterIntent && !c.spec.gated))
	pluginRan := c.spec.point == crash.AfterPluginReturn || c.spec.point == crash.AfterReconcileReturn

	if res.Code != "" {
		bad("connhost answered %s: %s", res.Code, res.Detail)
	}
	if !slices.Contains(finalStatuses, res.Status) {
		row.Lost = true
		bad("execution lost: ended %q, neither terminal nor recovery_required", row.Final)
	}
	if again.Status != res.Status || again.Receipt != res.Receipt {
		bad("re-issued call answered %s/%q, first answer %s/%q", again.Status, again.Receipt, res.Status, res.Receipt)
	}
	if h.State != "" && h.State != res.Status && slices.Contains(finalStatuses, res.Status) {
		bad("ledger says %s, the call answered %s", h.State, res.Status)
	}
	if external && row.Effects > 1 {
		row.Duplicate = true
		bad("%d effects at the provider for one call", row.Effects)
	}
	if row.Effects < 0 {
		row.EffectUndone = true
		bad("effect undone: the provider holds %d effects fewer than before the cell", -row.Effects)
	}
	if external && res.Status == "succeeded" && row.Effects != 1 {
		row.SucceededWithoutEffect = row.Effects == 0
		bad("succeeded with %d effects (want 1)", row.Effects)
	}
	if external && row.Effects > 0 && slices.Contains(nothingHappened, res.Status) {
		row.AppliedButFailed = true
		bad("applied but answered %s: the provider holds %d effect(s) of a call its caller is told did nothing, and would issue again", res.Status, row.Effects)
	}
	if res.Status == "succeeded" && external {
		problems = append(problems, c.checkReceipt(ctx, row, res.Receipt)...)
	}
	if !external || c.spec.point == PointInFlight || c.spec.point == PointKeyKept || c.spec.point == PointKeyExpired {
		// The in-flight row is judged by judgeInFlight, the key rows by
		// judgeKeyRetention.
		return problems
	}
	switch op.Recovery {
	case manifests.PolicyIdempotentRetry, manifests.PolicyReconcile:
		if res.Status != "succeeded" {
			bad("%s call ended %s, want succeeded", op.Recovery, row.Final)
		}
		if uncertain {
			want := string(host.DecisionRecoverRetry)
			if op.Recovery == manifests.PolicyReconcile {
				want = string(host.DecisionReconciledNotApplied)
				if pluginRan {
					want = string(host.DecisionReconciledApplied)
				}
			}
			if row.Decision != want {
				bad("recovery decided %s, want %s", row.Decision, want)
			}
		}
	case manifests.PolicyManual:
		if uncertain {
			if res.Status != "recovery_required" {
				bad("manual call with an unknown outcome ended %s, want recovery_required", row.Final)
			}
			if row.Decision != string(host.DecisionManualPolicy) {
				bad("recovery decided %s, want manual_policy", row.Decision)
			}
			if h.Attempt > 1 {
				bad("manual call re-executed (attempt %d)", h.Attempt)
			}
			if !pluginRan && row.Effects != 0 {
				bad("%d effects though the connector never ran before the kill and must not run after it", row.Effects)
			}
			if pluginRan && c.baseline != nil && row.Effects != *c.baseline {
				bad("%d effects after a kill that followed the connector's return, an uninterrupted call leaves %d", row.Effects, *c.baseline)
			}
		}
	}
	return problems
}

// startCell tells Options.Receipts that a cell begins.
func (c *cell) startCell(ctx context.Context) error {
	if c.o.Receipts == nil {
		return nil
	}
	if err := c.o.Receipts.StartCell(ctx, c.spec.op.Name); err != nil {
		return fmt.Errorf("ask the provider what exists before the cell: %w", err)
	}
	return nil
}

// checkReceipt checks the receipt of a succeeded external call: that it
// names what the call's effect left (Options.CheckReceipt), and that
// this is the effect of a call of this cell (Options.Receipts), marking a
// wrong receipt in row.
func (c *cell) checkReceipt(ctx context.Context, row *Row, receipt string) []string {
	op := c.spec.op.Name
	if c.o.CheckReceipt != nil {
		problem, err := c.o.CheckReceipt(ctx, op, receipt)
		switch {
		case err != nil:
			return []string{fmt.Sprintf("checking receipt %q: %v", receipt, err)}
		case problem != "":
			return []string{problem}
		}
	}
	if c.o.Receipts == nil || receipt == "" {
		return nil
	}
	problem, err := c.o.Receipts.OwnReceipt(ctx, op, receipt)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("checking whose effect receipt %q names: %v", receipt, err)}
	case problem != "":
		row.WrongReceipt = true
		return []string{problem}
	}
	return nil
}

// equalArgs is the row PointEqualArgs: two calls of one session with
// different tool-call ids and the same arguments, each driven to its end
// without a crash, as a runtime does (approving what awaits approval, a
// held duplicate included: the reviewer means both). Each must leave an
// effect of its own, unless the operation's duplicate_window answers the
// second with the first's outcome.
func (c *cell) equalArgs(ctx context.Context, row Row, args json.RawMessage, before int) (Row, error) {
	op := c.spec.op
	first, second := c.callArgsAs("call-equal-1", args), c.callArgsAs("call-equal-2", args)
	a, err := c.driveToFinal(ctx, first)
	if err != nil {
		return row, err
	}
	b, err := c.driveToFinal(ctx, second)
	if err != nil {
		return row, err
	}
	var h history
	if b.ExecutionID != "" {
		p, err := c.connhost(ctx, "", "history", b.ExecutionID)
		if err != nil {
			return row, err
		}
		if err := json.Unmarshal(p.Stdout, &h); err != nil || p.Code != 0 {
			return row, fmt.Errorf("history %s: exit %d: %s %s", b.ExecutionID, p.Code, clip(string(p.Stdout)), clip(string(p.Stderr)))
		}
	}
	after, err := c.o.Effects(ctx, op.Name)
	if err != nil {
		return row, fmt.Errorf("count effects after: %w", err)
	}
	row.Reached = true
	row.Effects = after - before
	row.Final = statusOf(a) + "/" + statusOf(b)
	row.Receipt = a.Receipt + "/" + b.Receipt
	row.ConnectorError = b.Error
	if row.ConnectorError == "" {
		row.ConnectorError = a.Error
	}
	row.Attempt = h.Attempt
	row.Decision = "none"
	for _, ev := range h.Events {
		if ev.Decision == string(host.DecisionDuplicateHeld) || ev.Decision == string(host.DecisionDuplicateAnswered) {
			row.Decision = ev.Decision
			break
		}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	answered := op.DuplicateWindow > 0 && op.OnDuplicate == manifests.DuplicateAnswer
	held := op.DuplicateWindow > 0 && !answered
	for i, r := range []result{a, b} {
		if !slices.Contains(finalStatuses, r.Status) || r.Code != "" {
			row.Lost = true
			bad("call %d ended %s, neither terminal nor recovery_required", i+1, statusOf(r))
		}
		if r.Status != "succeeded" {
			bad("call %d of two with equal arguments ended %s, want succeeded (each runs, without a crash)", i+1, statusOf(r))
			continue
		}
		problems = append(problems, c.checkReceipt(ctx, &row, r.Receipt)...)
	}
	want := 2
	switch {
	case answered:
		want = 1
		if row.Decision != string(host.DecisionDuplicateAnswered) {
			bad("the operation declares duplicate_window %s with on_duplicate = \"answer\", but the second call was not answered with the first's outcome (decision %s)", op.DuplicateWindow, row.Decision)
		}
		if b.Status == "succeeded" && a.Receipt != b.Receipt {
			bad("the second call was answered receipt %q, the first's is %q", b.Receipt, a.Receipt)
		}
	case held && row.Decision != string(host.DecisionDuplicateHeld):
		bad("the operation declares duplicate_window %s (on_duplicate hold), but the second call was not held for a reviewer (decision %s)", op.DuplicateWindow, row.Decision)
	}
	switch {
	case row.Effects > want:
		row.Duplicate = true
		bad("%d effects at the provider for %d call(s) with equal arguments, want %d", row.Effects, 2, want)
	case row.Effects < 0:
		row.EffectUndone = true
		bad("effect undone: the provider holds %d effects fewer than before the cell", -row.Effects)
	case row.Effects < want && a.Status == "succeeded" && b.Status == "succeeded":
		row.SucceededWithoutEffect = true
		bad("two different calls with equal arguments both succeeded, and the provider holds %d effect(s), want %d: the calls were merged (a key derived from the arguments, or a provider deduplicating by an argument, takes a second genuine call for a retry of the first)", row.Effects, want)
	case row.Effects < want:
		bad("%d effect(s) for two calls with equal arguments, want %d", row.Effects, want)
	}
	row.Pass = len(problems) == 0
	row.Problem = strings.Join(problems, "; ")
	return row, nil
}

// proveKey is the row PointProviderKey: one call without a crash, whose
// effectful request the prover then repeats at the provider, as it was
// and with the declared key changed.
func (c *cell) proveKey(ctx context.Context, row Row, args json.RawMessage, before int) (Row, error) {
	op := c.spec.op
	if err := c.o.Prover.CaptureNext(op.Name); err != nil {
		return row, err
	}
	res, err := c.driveToFinal(ctx, c.callArgs(args))
	if err != nil {
		return row, err
	}
	after, err := c.o.Effects(ctx, op.Name)
	if err != nil {
		return row, fmt.Errorf("count effects after: %w", err)
	}
	row.Reached, row.Effects, row.Final, row.Receipt, row.ConnectorError, row.Decision = true, after-before, statusOf(res), res.Receipt, res.Error, "none"
	key := c.provider.IdempotencyKey()
	var problems []string
	switch {
	case res.Status != "succeeded":
		row.Lost = !slices.Contains(finalStatuses, res.Status)
		problems = append(problems, fmt.Sprintf("the call ended %s without a crash: there is no request of it to repeat", row.Final))
	case row.Effects != 1:
		problems = append(problems, fmt.Sprintf("the call made %d effects without a crash, want 1", row.Effects))
	default:
		problem, err := c.o.Prover.ProveKey(ctx, op.Name, c.provider)
		if err != nil {
			return row, fmt.Errorf("repeat the request at the provider: %w", err)
		}
		if problem != "" {
			problems = append(problems, fmt.Sprintf("[provider] says the provider deduplicates by %s; %s", key, problem))
		}
	}
	row.Pass = len(problems) == 0
	row.Problem = strings.Join(problems, "; ")
	if row.Pass {
		row.ProvenKey = key
	}
	return row, nil
}

// statusOf is a call's final status, or the problem code connhost
// answered instead.
func statusOf(r result) string {
	if r.Code != "" {
		return "error:" + r.Code
	}
	return r.Status
}

// sequence drives the call the way a runtime does: exec, approve when it
// awaits approval, exec again. With crashAt set it stops at the first
// process that died by SIGKILL.
func (c *cell) sequence(ctx context.Context, crashAt string, call []string) (result, bool, error) {
	res, err := c.exec(ctx, crashAt, call)
	if err != nil || res.killed {
		return res.result, res.killed, err
	}
	if res.Status != "awaiting_approval" || res.Approval == nil {
		return res.result, false, nil
	}
	p, err := c.connhost(ctx, crashAt, "approve", res.Approval.ID, "--by", approver, "--digest", res.Approval.ArgsDigest)
	if err != nil || p.Killed() {
		return res.result, p.Killed(), err
	}
	res, err = c.exec(ctx, crashAt, call)
	return res.result, res.killed, err
}

type execResult struct {
	result
	killed bool
}

// exec runs `connhost exec` and decodes its answer: a Result (exit 0, 4
// or 5) or a problem document.
func (c *cell) exec(ctx context.Context, crashAt string, call []string) (execResult, error) {
	p, err := c.connhost(ctx, crashAt, call...)
	if err != nil {
		return execResult{}, err
	}
	if p.Killed() {
		// A process killed after its answer (after_answer) printed it.
		var r result
		_ = json.Unmarshal(p.Stdout, &r)
		return execResult{result: r, killed: true}, nil
	}
	var r result
	if err := json.Unmarshal(p.Stdout, &r); err != nil {
		// A problem document carries a numeric status: say what it says.
		var prob struct{ Code, Detail string }
		if json.Unmarshal(p.Stdout, &prob) == nil && prob.Code != "" {
			return execResult{}, fmt.Errorf("exec: exit %d: connhost answered %s: %s", p.Code, prob.Code, prob.Detail)
		}
		return execResult{}, fmt.Errorf("exec: exit %d, unreadable answer %q: %v (stderr %s)", p.Code, clip(string(p.Stdout)), err, clip(string(p.Stderr)))
	}
	if r.Status == "" && r.Code == "" {
		return execResult{}, fmt.Errorf("exec: exit %d, answer without status or problem code: %s", p.Code, clip(string(p.Stdout)))
	}
	return execResult{result: r}, nil
}

func digestReader(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// approver is the principal a cell approves its gated calls as.
const approver = "crashtest"

// approverConfig writes the cell's config on a shared ledger: Options.Config
// with the approver as a principal. Its token (in the config, as on every
// node) signs the approvals the cell makes on the ledger directly: nodes
// dispatch no unsigned approval there.
func (c *cell) approverConfig() (string, error) {
	b, err := os.ReadFile(c.o.Config)
	if err != nil {
		return "", err
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return "", err
	}
	b = fmt.Appendf(b, "\n[[principals]]\nname = %q\nroles = [\"approver\"]\ntoken = \"%x\"\n", approver, tok)
	path := filepath.Join(c.dir, "connhost.toml")
	return path, os.WriteFile(path, b, 0o600)
}
