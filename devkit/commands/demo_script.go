package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
)

// partPayment: create_payment (idempotent-retry) killed after Stripe charged.
func (d *demo) partPayment(ctx context.Context) error {
	call := demoCall(demoSessionPayment, "call_1", "payments.create_payment",
		`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":"order 1001"}`)
	d.sayf("The agent asks connhost to charge 20.00 USD. The manifest says create_payment needs a human's approval, so connhost records the intent and waits: nothing reaches Stripe yet.")
	id, err := d.gated(ctx, d.mfs, call, "payments")
	if err != nil {
		return err
	}
	d.sayf("A reviewer approves exactly these arguments: the approval is bound to the args digest shown, and the first dispatch consumes it.")
	if err := d.approve(ctx, d.mfs, id, "amount matches order 1001"); err != nil {
		return err
	}
	d.sayf("The runtime re-drives the call. connhost writes the dispatch record, the connector sends the request, Stripe charges the card — and the process is killed by SIGKILL the instant the connector returns, before the outcome is recorded (CONNHOST_CRASH_AT=after_plugin_return).")
	d.crashed(ctx, d.mfs, call, id)
	d.sayf("What does Stripe hold now? (Any connhost command would run recovery as it opens the ledger, so the demo asks the provider only.)")
	pis := d.provider(ctx, id, "payments", 1, 1)
	if len(pis) > 0 {
		d.piPayment = pis[0]
	}
	d.sayf("connhost starts again on the same data directory: the agent runtime re-issues the same call. Opening the ledger runs recovery before anything else. " +
		"The call was dispatched and has no outcome, and create_payment's policy is idempotent-retry, so connhost dispatches attempt 2 with the same idempotency key. " +
		"Stripe knows the key and replays its first answer instead of charging again.")
	st, res, _ := d.execResult(ctx, d.mfs, call, "", cli.ExitOK)
	st.ExecutionID = id
	d.expect(st, "status succeeded", string(res.Status), string(host.StatusSucceeded))
	d.expect(st, "attempt 2 (the re-dispatch)", fmt.Sprint(res.Attempt), "2")
	d.expect(st, "receipt is the PaymentIntent Stripe created before the kill", res.Receipt, d.piPayment)
	d.emit(st)

	d.sayf("The audit trail shows every transition, who decided it and on what evidence.")
	rec, evs := d.history(ctx, d.mfs, id)
	d.expectDecisions(evs, decisions(host.DecisionIntent, host.DecisionDispatch, host.DecisionRecoverRetry))
	d.sayf("And the provider: still one PaymentIntent, carrying the key of the ledger record.")
	st2 := d.newStep("provider")
	st2.ExecutionID = id
	found, err := d.client.FindPaymentIntents(ctx, "connhost_execution_id", id)
	if err == nil && len(found) == 1 {
		d.expect(st2, "the PaymentIntent's metadata[connhost_key] is the record's idempotency key", found[0].Metadata["connhost_key"], rec.IdempotencyKey)
	}
	d.fillProvider(ctx, st2, id, "payments", 1, 1)
	if st2.Provider != nil {
		d.expect(st2, "Stripe replayed one answer", fmt.Sprint(st2.Provider.StripeReplays), "1")
	}
	d.emit(st2)
	return nil
}

// partEmail: email.send (reconcile) killed after Mailpit stored it.
func (d *demo) partEmail(ctx context.Context) error {
	call := demoCall(demoSessionEmail, "call_1", "email.send",
		`{"to":["ada@example.com"],"subject":"Your order 1001 has shipped","text":"Hi Ada, your order is on its way."}`)
	d.sayf("Now the agent sends Ada an email. Mailpit has no idempotency: sending twice puts two emails in Ada's inbox. So send's declared policy is reconcile: after a crash, ask Mailpit whether the message exists. It needs approval too.")
	id, err := d.gated(ctx, d.mfs, call, "email")
	if err != nil {
		return err
	}
	if err := d.approve(ctx, d.mfs, id, "text checked"); err != nil {
		return err
	}
	d.sayf("Re-driven, sent, and killed by SIGKILL right after Mailpit stored the message, before the outcome was recorded.")
	d.crashed(ctx, d.mfs, call, id)
	d.sayf("Mailpit holds the message: Ada got her email once.")
	msgs := d.provider(ctx, id, "email", 1, 1)
	d.sayf("Restart. Recovery finds the call dispatched without an outcome; the policy is reconcile, so connhost calls the connector's reconcile with the same key. " +
		"The connector searches Mailpit for the Message-ID it derives from that key, compares it exactly, finds the message and reports it applied. Nothing is sent again.")
	st, res, _ := d.execResult(ctx, d.mfs, call, "", cli.ExitOK)
	st.ExecutionID = id
	d.expect(st, "status succeeded", string(res.Status), string(host.StatusSucceeded))
	d.expect(st, "source reconciled (the provider's word, not a new send)", res.Source, "reconciled")
	if len(msgs) == 1 {
		d.expect(st, "receipt is the Mailpit id of the stored message", res.Receipt, msgs[0])
	}
	d.emit(st)
	_, evs := d.history(ctx, d.mfs, id)
	d.expectDecisions(evs, decisions(host.DecisionIntent, host.DecisionDispatch, host.DecisionReconciledApplied))
	st2 := d.newStep("provider")
	st2.ExecutionID = id
	d.fillProvider(ctx, st2, id, "email", 1, 1)
	if st2.Provider != nil {
		d.expect(st2, "Mailpit received one send in all", fmt.Sprint(st2.Provider.MessagesSent), "1")
	}
	d.emit(st2)
	return nil
}

// partManual: a manual policy, recovery_required, fence, operator.
func (d *demo) partManual(ctx context.Context) error {
	call := demoCall(demoSessionManual, "call_1", "payments.create_payment",
		`{"amount":4500,"currency":"eur","payment_method":"pm_card_visa","description":"order 1002"}`)
	d.sayf("Some effects can be neither deduplicated nor checked afterwards; their policy is manual. " +
		"The shipped manual operation is email.release_message (relay a stored message through Mailpit's SMTP relay), but the in-process Mailpit emulator does not implement the release endpoint, so that call could not apply anything here. " +
		"Instead the demo runs the same create_payment under a copy of payments.toml in $DEMO/manifests-manual that declares recovery = \"manual\": the commands of this part run with --manifests $DEMO/manifests-manual.")
	id, err := d.gated(ctx, d.manual, call, "payments")
	if err != nil {
		return err
	}
	if err := d.approve(ctx, d.manual, id, "amount matches order 1002"); err != nil {
		return err
	}
	d.sayf("Killed the same way, after Stripe charged the card.")
	d.crashed(ctx, d.manual, call, id)
	pis := d.provider(ctx, id, "payments", 2, 1)
	d.sayf("Restart. The policy is manual, so recovery does not guess: it neither re-sends nor asks the provider. The execution becomes recovery_required and its session is fenced.")
	st, res, _ := d.execResult(ctx, d.manual, call, "", cli.ExitRecoveryRequired)
	st.ExecutionID = id
	d.expect(st, "status recovery_required", string(res.Status), string(host.StatusRecoveryRequired))
	d.emit(st)

	lookup := d.piPayment
	if lookup == "" && len(pis) > 0 {
		lookup = pis[0]
	}
	look := demoCall(demoSessionManual, "call_2", "payments.get_payment", fmt.Sprintf(`{"payment_intent":%q}`, lookup))
	d.sayf("The agent goes on in the same session with a harmless read (look up order 1001's payment). connhost refuses it: new work in a fenced session waits until the uncertain call is settled.")
	st, r := d.command(ctx, d.manual, "", look...)
	var p httpapi.Problem
	if d.exitIs(st, r, cli.ExitRecoveryRequired) && d.decode(st, r.Stdout, &p) {
		st.Code = string(p.Code)
		d.expect(st, "refused with code session_fenced", string(p.Code), string(httpapi.CodeSessionFenced))
		listed := slices.ContainsFunc(p.UncertainCalls, func(u host.UncertainCall) bool { return u.ExecutionID == id })
		d.check(st, "the refusal lists the uncertain call", listed, fmt.Sprint(p.UncertainCalls))
		var buf bytes.Buffer
		cli.RenderProblem(&buf, &p)
		st.Notes = append(st.Notes, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")...)
	}
	d.emit(st)

	d.sayf("The operator starts from the list of calls recovery could not decide.")
	st, r = d.command(ctx, d.manual, "", "ls", "--state", "recovery_required")
	var list demoList
	if d.exitIs(st, r, cli.ExitOK) && d.decode(st, r.Stdout, &list) {
		ids := make([]string, 0, len(list.Executions))
		for _, e := range list.Executions {
			ids = append(ids, e.ExecutionID)
			st.Notes = append(st.Notes, fmt.Sprintf("%s  %s  %s  session %s  tool call %s  attempt %d/%d",
				e.ExecutionID, e.State, e.Tool, e.SessionID, e.ToolCallID, e.Attempt, e.MaxAttempts))
		}
		d.expect(st, "exactly this execution is recovery_required", strings.Join(ids, ","), id)
	}
	d.emit(st)

	receipt := ""
	if len(pis) > 0 {
		receipt = pis[0]
	}
	d.sayf("The operator checks Stripe for a PaymentIntent whose metadata connhost_execution_id is %s, finds %s (succeeded), and records that the call was applied.", id, cli.OrDash(receipt))
	args := []string{"resolve", id, "--applied", "--by", demoOperator,
		"--reason", "found " + cli.OrDash(receipt) + " in the Stripe dashboard (metadata connhost_execution_id)"}
	if receipt != "" {
		args = append(args, "--receipt", receipt)
	}
	st, r = d.command(ctx, d.manual, "", args...)
	var rr host.Result
	if d.exitIs(st, r, cli.ExitOK) && d.decode(st, r.Stdout, &rr) {
		d.noteResult(st, rr)
		d.expect(st, "status succeeded", string(rr.Status), string(host.StatusSucceeded))
		d.expect(st, "source operator", rr.Source, "operator")
	}
	d.emit(st)

	d.sayf("The session accepts new work again: the runtime re-issues the refused read.")
	st, res, _ = d.execResult(ctx, d.manual, look, "", cli.ExitOK)
	d.expect(st, "status succeeded", string(res.Status), string(host.StatusSucceeded))
	d.emit(st)

	_, evs := d.history(ctx, d.manual, id)
	d.expectDecisions(evs, decisions(host.DecisionIntent, host.DecisionDispatch, host.DecisionManualPolicy, host.DecisionOperatorApplied))
	i := slices.IndexFunc(evs, func(e demoEvent) bool { return e.Decision == string(host.DecisionManualPolicy) })
	j := slices.IndexFunc(evs, func(e demoEvent) bool { return e.Decision == string(host.DecisionOperatorApplied) })
	st2 := d.newStep("provider")
	st2.ExecutionID = id
	d.check(st2, "manual_policy moved the call to recovery_required", i >= 0 && evs[i].To == string(ledger.StateRecoveryRequired), "")
	d.check(st2, "operator_applied by "+demoOperator+" moved it to succeeded", j > i && evs[j].To == string(ledger.StateSucceeded) && evs[j].Actor == demoOperator, "")
	d.fillProvider(ctx, st2, id, "payments", 2, 1)
	d.emit(st2)
	return nil
}

// partProof lists every execution and counts its provider objects.
func (d *demo) partProof(ctx context.Context) error {
	d.sayf("Every execution in the ledger against the objects the providers hold. An external call's objects are found by its identity: the PaymentIntent's metadata connhost_execution_id, the message's Mailpit id (the receipt) and Message-ID.")
	st, r := d.command(ctx, d.mfs, "", "ls", "--limit", "1000")
	var list demoList
	if !d.exitIs(st, r, cli.ExitOK) || !d.decode(st, r.Stdout, &list) {
		d.emit(st)
		return errors.New("ls failed")
	}
	st.Kind = "proof"
	st.Output = nil // the table below says it all
	pis, err := d.client.PaymentIntents(ctx)
	if err != nil {
		return err
	}
	msgs, err := d.client.Messages(ctx)
	if err != nil {
		return err
	}
	succeeded := map[string]int{}
	for _, e := range list.Executions {
		tool := e.Tool
		row := demoProofRow{ExecutionID: e.ExecutionID, Tool: tool, Effect: e.Effect, Policy: cli.OrDash(e.Policy), State: string(e.State),
			Source: e.Source, Receipt: e.Receipt}
		if e.Effect == string(manifests.EffectExternal) {
			if e.State == ledger.StateSucceeded {
				succeeded[tool]++
			}
			switch tool {
			case "payments.create_payment":
				for _, p := range pis {
					if p.Metadata["connhost_execution_id"] == e.ExecutionID {
						row.ProviderObjects++
						if p.ID != row.Receipt {
							d.check(st, "receipt of "+e.ExecutionID+" names its PaymentIntent", false, p.ID+" vs "+row.Receipt)
						}
					}
				}
			case "email.send":
				for _, m := range msgs {
					if m.ID == row.Receipt {
						row.ProviderObjects++
						dup, err := d.client.FindMessagesByMessageID(ctx, m.MessageID)
						if err == nil {
							d.expect(st, "one message with Message-ID "+m.MessageID, fmt.Sprint(len(dup)), "1")
						}
					}
				}
			}
			d.expect(st, "one provider object for "+e.ExecutionID+" ("+tool+", "+string(e.State)+")", fmt.Sprint(row.ProviderObjects), "1")
		}
		st.Proof = append(st.Proof, row)
	}
	d.expect(st, "PaymentIntents at Stripe = succeeded create_payment executions", fmt.Sprint(len(pis)), fmt.Sprint(succeeded["payments.create_payment"]))
	d.expect(st, "messages in Mailpit = succeeded email.send executions", fmt.Sprint(len(msgs)), fmt.Sprint(succeeded["email.send"]))
	d.expect(st, "2 PaymentIntents at Stripe in all (one per charge the agent asked for)", fmt.Sprint(len(pis)), "2")
	d.expect(st, "1 message in Mailpit in all", fmt.Sprint(len(msgs)), "1")
	st.Provider = &demoProvider{PaymentIntents: len(pis), Messages: len(msgs)}
	if !d.json {
		var buf bytes.Buffer
		tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "EXECUTION\tTOOL\tPOLICY\tLEDGER\tSOURCE\tRECEIPT\tPROVIDER OBJECTS")
		for _, row := range st.Proof {
			objs := "- (read)"
			if row.Effect == string(manifests.EffectExternal) {
				objs = fmt.Sprint(row.ProviderObjects)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.ExecutionID, row.Tool, row.Policy, row.State, cli.OrDash(row.Source), cli.OrDash(row.Receipt), objs)
		}
		_ = tw.Flush()
		st.Notes = append(st.Notes, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")...)
		st.Notes = append(st.Notes, "", fmt.Sprintf("Stripe holds %d PaymentIntent(s), Mailpit %d message(s); the ledger has %d succeeded create_payment and %d succeeded send execution(s).",
			len(pis), len(msgs), succeeded["payments.create_payment"], succeeded["email.send"]))
	}
	d.emit(st)
	return nil
}

func demoCall(session, toolCall, tool, args string) []string {
	return []string{"exec", "--session", session, "--tool-call", toolCall, "--tool", tool, "--args", args}
}

// decisions names audit-trail decisions as the events spell them.
func decisions(ds ...host.DecisionCode) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d)
	}
	return out
}
