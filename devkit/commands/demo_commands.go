package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
)

// gated runs the first call of a part and checks it awaits approval; it
// returns the execution id and leaves the approval in d.say's next step.
func (d *demo) gated(ctx context.Context, mfs string, call []string, provider string) (string, error) {
	st, res, ok := d.execResult(ctx, mfs, call, "", cli.ExitNotSucceeded)
	st.ExecutionID = res.ExecutionID
	d.expect(st, "status awaiting_approval", string(res.Status), string(host.StatusAwaitingApproval))
	if res.Approval != nil {
		d.pendingApproval = res.Approval
	}
	prov := d.counts(ctx)
	if prov != nil {
		st.Provider = prov
		if provider == "payments" {
			d.expect(st, "Stripe has not been called for it", fmt.Sprint(d.countFor(ctx, res.ExecutionID, provider)), "0")
		} else {
			d.expect(st, "Mailpit has not been called for it", fmt.Sprint(prov.Messages), "0")
		}
	}
	d.emit(st)
	if !ok || res.Approval == nil || res.ExecutionID == "" {
		return "", errors.New("the call did not return an approval request")
	}
	return res.ExecutionID, nil
}

// approve approves the pending approval of the part.
func (d *demo) approve(ctx context.Context, mfs, id, reason string) error {
	ap := d.pendingApproval
	d.pendingApproval = nil
	if ap == nil {
		return errors.New("no approval to approve")
	}
	st, r := d.command(ctx, mfs, "", "approve", ap.ID, "--by", demoReviewer, "--digest", ap.ArgsDigest, "--reason", reason)
	st.ExecutionID = id
	var res host.Result
	ok := d.exitIs(st, r, cli.ExitOK) && d.decode(st, r.Stdout, &res)
	if ok {
		d.noteResult(st, res)
		decision := ""
		if res.Approval != nil {
			decision = string(res.Approval.Decision)
		}
		st.Notes[0] = fmt.Sprintf("→ %s by %s, exit %d: the execution is %s until the runtime re-drives the call", decision, demoReviewer, r.Code, res.Status)
		d.expect(st, "approval approved by "+demoReviewer, decision, "approved")
	}
	d.emit(st)
	if !ok {
		return errors.New("approve failed")
	}
	return nil
}

// crashed re-drives call with CONNHOST_CRASH_AT=after_plugin_return and
// checks the process died by SIGKILL.
func (d *demo) crashed(ctx context.Context, mfs string, call []string, id string) {
	st, r := d.command(ctx, mfs, crash.AfterPluginReturn, call...)
	st.ExecutionID = id
	if r.err == nil {
		if r.Killed() {
			st.Notes = append(st.Notes, "→ killed by SIGKILL at after_plugin_return: no outcome recorded, nothing printed")
		}
		d.check(st, "the process died by SIGKILL at after_plugin_return", r.Killed(), r.describe())
	}
	d.emit(st)
}

// execResult runs an exec and decodes its Result.
func (d *demo) execResult(ctx context.Context, mfs string, call []string, crashAt string, wantExit int) (*demoStep, host.Result, bool) {
	st, r := d.command(ctx, mfs, crashAt, call...)
	var res host.Result
	ok := d.exitIs(st, r, wantExit) && d.decode(st, r.Stdout, &res)
	if ok {
		d.noteResult(st, res)
	}
	return st, res, ok
}

// noteResult records a Result in the step.
func (d *demo) noteResult(st *demoStep, res host.Result) {
	if st.ExecutionID == "" {
		st.ExecutionID = res.ExecutionID
	}
	st.Status, st.Source, st.Receipt = string(res.Status), res.Source, res.Receipt
	line := "→ " + string(res.Status)
	if res.Attempt > 0 {
		line += fmt.Sprintf(" (attempt %d)", res.Attempt)
	}
	if st.ExitCode != nil {
		line += fmt.Sprintf(", exit %d", *st.ExitCode)
	}
	st.Notes = append(st.Notes, line)
	st.Notes = append(st.Notes, "  execution "+res.ExecutionID)
	if res.Source != "" {
		st.Notes = append(st.Notes, "  source    "+res.Source)
	}
	if res.Receipt != "" {
		st.Notes = append(st.Notes, "  receipt   "+res.Receipt)
	}
	if len(res.Result) > 0 {
		st.Notes = append(st.Notes, "  result    "+cli.ClipText(cli.CompactJSON(res.Result), 100))
	}
	if res.Error != "" {
		st.Notes = append(st.Notes, "  error     "+cli.ClipText(res.Error, 100))
	}
	if ap := res.Approval; ap != nil {
		st.Notes = append(st.Notes, fmt.Sprintf("  approval  %s %s, args digest %s", ap.ID, ap.Decision, ap.ArgsDigest))
	}
}

// history runs connhost history and records its events in a step.
func (d *demo) history(ctx context.Context, mfs, id string) (host.Result, []demoEvent) {
	st, r := d.command(ctx, mfs, "", "history", id)
	st.ExecutionID = id
	var v httpapi.Execution
	if !d.exitIs(st, r, cli.ExitOK) || !d.decode(st, r.Stdout, &v) {
		d.emit(st)
		return host.Result{}, nil
	}
	st.Output = nil // the events below carry what matters
	st.Status = string(v.State)
	st.Source, st.Receipt = v.Source, v.Receipt
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s, policy %s, idempotency key %s\n", v.Tool, v.Policy, v.IdempotencyKey)
	fmt.Fprintln(tw, "#\tATTEMPT\tTRANSITION\tDECISION\tACTOR\tEVIDENCE / REASON")
	for _, e := range v.Events {
		ev := demoEvent{Seq: e.Seq, Attempt: e.Attempt, From: string(e.From), To: string(e.To), Decision: e.Decision, Actor: e.Actor, Evidence: e.Evidence}
		st.Events = append(st.Events, ev)
		tr := "→ " + ev.To
		if ev.From != "" {
			tr = ev.From + " → " + ev.To
		}
		note := e.Evidence
		if e.Reason != "" {
			note = strings.TrimPrefix(note+"; reason: "+e.Reason, "; ")
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", e.Seq, e.Attempt, tr, e.Decision, cli.OrDash(e.Actor), cli.ClipText(note, 70))
	}
	_ = tw.Flush()
	st.Notes = append(st.Notes, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")...)
	d.expect(st, "final state succeeded", string(v.State), string(ledger.StateSucceeded))
	d.pendingHistory = st
	return v.Result, st.Events
}

// expectDecisions checks that the audit trail of the last history step
// holds decisions in this order, then emits the step.
func (d *demo) expectDecisions(evs []demoEvent, want []string) {
	st := d.pendingHistory
	d.pendingHistory = nil
	if st == nil {
		return
	}
	i := 0
	for _, e := range evs {
		if i < len(want) && e.Decision == want[i] {
			i++
		}
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Decision)
	}
	d.check(st, "audit trail "+strings.Join(want, " → ")+" → succeeded", i == len(want), strings.Join(got, ", "))
	d.emit(st)
}

// demoList is connhost ls --json.
type demoList struct {
	Executions []host.Result `json:"executions"`
}
