package commands

import (
	"context"
	"fmt"
	"strings"
)

// provider reports the provider's objects after a kill and returns the
// ids of the execution's objects.
func (d *demo) provider(ctx context.Context, id, provider string, total, forExec int) []string {
	st := d.newStep("provider")
	st.ExecutionID = id
	ids := d.fillProvider(ctx, st, id, provider, total, forExec)
	d.emit(st)
	return ids
}

// fillProvider counts the providers' objects into st, checks them and
// returns the ids of the objects that belong to execution id.
func (d *demo) fillProvider(ctx context.Context, st *demoStep, id, provider string, total, forExec int) []string {
	prov := d.counts(ctx)
	if prov == nil {
		d.check(st, "the providers answer", false, "")
		return nil
	}
	st.Provider = prov
	var ids []string
	switch provider {
	case "payments":
		found, err := d.client.FindPaymentIntents(ctx, "connhost_execution_id", id)
		if err != nil {
			d.check(st, "Stripe answers", false, err.Error())
			return nil
		}
		for _, p := range found {
			ids = append(ids, p.ID)
			st.Notes = append(st.Notes, fmt.Sprintf("Stripe: PaymentIntent %s, %s, %d.%02d %s, metadata connhost_execution_id %s",
				p.ID, p.Status, p.Amount/100, p.Amount%100, strings.ToUpper(p.Currency), id))
		}
		st.Notes = append(st.Notes, fmt.Sprintf("Stripe holds %d PaymentIntent(s) in all; it replayed %d answer(s) to a repeated key", prov.PaymentIntents, prov.StripeReplays))
		d.expect(st, fmt.Sprintf("%d PaymentIntent(s) at Stripe", total), fmt.Sprint(prov.PaymentIntents), fmt.Sprint(total))
		d.expect(st, fmt.Sprintf("exactly %d PaymentIntent for %s", forExec, id), fmt.Sprint(len(found)), fmt.Sprint(forExec))
	case "email":
		msgs, err := d.client.Messages(ctx)
		if err != nil {
			d.check(st, "Mailpit answers", false, err.Error())
			return nil
		}
		for _, m := range msgs {
			ids = append(ids, m.ID)
			to := ""
			if len(m.To) > 0 {
				to = m.To[0].Address
			}
			st.Notes = append(st.Notes, fmt.Sprintf("Mailpit: message %s to %s, %q, Message-ID <%s>", m.ID, to, m.Subject, m.MessageID))
		}
		st.Notes = append(st.Notes, fmt.Sprintf("Mailpit holds %d message(s); it received %d send(s)", prov.Messages, prov.MessagesSent))
		d.expect(st, fmt.Sprintf("%d message(s) in Mailpit", total), fmt.Sprint(prov.Messages), fmt.Sprint(total))
		if len(msgs) == 1 {
			same, err := d.client.FindMessagesByMessageID(ctx, msgs[0].MessageID)
			if err == nil {
				d.expect(st, fmt.Sprintf("exactly %d message with its Message-ID", forExec), fmt.Sprint(len(same)), fmt.Sprint(forExec))
			}
		}
	}
	n := len(ids)
	prov.ForExecution = &n
	return ids
}

// counts returns the providers' totals, or nil when they do not answer.
func (d *demo) counts(ctx context.Context) *demoProvider {
	pis, err := d.client.CountPaymentIntents(ctx)
	if err != nil {
		return nil
	}
	msgs, err := d.client.CountMessages(ctx)
	if err != nil {
		return nil
	}
	ps, err := d.client.PaymentsStats(ctx)
	if err != nil {
		return nil
	}
	es, err := d.client.EmailStats(ctx)
	if err != nil {
		return nil
	}
	return &demoProvider{PaymentIntents: pis, Messages: msgs, StripeReplays: ps.Replays, MessagesSent: es.MessagesSent}
}

// countFor counts the provider objects of an execution (-1 on error).
func (d *demo) countFor(ctx context.Context, id, provider string) int {
	if provider != "payments" {
		return -1
	}
	found, err := d.client.FindPaymentIntents(ctx, "connhost_execution_id", id)
	if err != nil {
		return -1
	}
	return len(found)
}
