//go:build unix

package soak

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/connhost/connhost/devkit/sandbox/mailpit"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/notify"
)

// evidence is what the providers hold, indexed by execution: payment
// intents and refunds by metadata[connhost_execution_id], messages by
// Message-ID, and the copies a release relayed by their recipient (see
// releaseTo). Objects without the tag are listed under "".
type evidence struct {
	pis, refunds, msgs map[string][]string
	copies             map[string][]string
	// notices are dev's own mails about calls that wait for a human
	// (isNotice), which no connector sent: set aside, not effects.
	notices []string
	pi      map[string]stripe.PaymentIntent
	refund  map[string]stripe.Refund
	msg     map[string]mailpit.MessageSummary
}

func newEvidence() *evidence {
	return &evidence{pis: map[string][]string{}, refunds: map[string][]string{}, msgs: map[string][]string{}, copies: map[string][]string{},
		pi: map[string]stripe.PaymentIntent{}, refund: map[string]stripe.Refund{}, msg: map[string]mailpit.MessageSummary{}}
}

func (ev *evidence) addPI(p stripe.PaymentIntent) {
	x := p.Metadata["connhost_execution_id"]
	ev.pis[x] = append(ev.pis[x], p.ID)
	ev.pi[p.ID] = p
}

func (ev *evidence) addRefund(r stripe.Refund) {
	x := r.Metadata["connhost_execution_id"]
	ev.refunds[x] = append(ev.refunds[x], r.ID)
	ev.refund[r.ID] = r
}

func (ev *evidence) addMessage(m mailpit.MessageSummary) {
	ev.msgs[m.MessageID] = append(ev.msgs[m.MessageID], m.ID)
	ev.msg[m.ID] = m
	// A relayed copy keeps the original's headers; the release's
	// recipients, which no header names, are its Bcc (as Mailpit shows
	// them).
	for _, to := range m.Bcc {
		if to != nil && strings.HasPrefix(to.Address, "relay-") {
			ev.copies[to.Address] = append(ev.copies[to.Address], m.ID)
		}
	}
}

// isNotice reports whether m is one of dev's notification mails (a call
// awaits approval or needs an operator; see server/notify): sent from
// connhost@localhost, tagged notify.MailTag, with a Message-ID of the
// notifier's own. Everything else the mailbox holds is a connector's.
func isNotice(m mailpit.MessageSummary) bool {
	return m.From != nil && m.From.Address == "connhost@localhost" && slices.Contains(m.Tags, notify.MailTag) &&
		strings.HasSuffix(m.MessageID, "@connhost.notify")
}

// releaseTo is the recipient of the release_message call toolCallID: the
// e-mail emulator relays the released message to itself, and the copy
// (with a Message-ID of its own) arrives with it as its Bcc.
func releaseTo(toolCallID string) string { return "relay-" + toolCallID + "@example.com" }

// evidence reads everything the providers hold, through their list APIs
// (read-after-write consistent, unlike Stripe search).
func (s *soak) evidence(ctx context.Context) (*evidence, error) {
	ev := newEvidence()
	pis, err := s.prov.PaymentIntents(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pis {
		ev.addPI(p)
	}
	rs, err := s.prov.Refunds(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		ev.addRefund(r)
	}
	ms, err := s.prov.Messages(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if isNotice(m) {
			ev.notices = append(ev.notices, m.ID)
			continue
		}
		ev.addMessage(m)
	}
	return ev, nil
}

// events reads every execution's audit trail (several at a time).
func (s *soak) events(ctx context.Context, api string, recs []httpapi.Execution) map[string][]ledger.Event {
	var mu sync.Mutex
	out := map[string][]ledger.Event{}
	ch := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for id := range ch {
				v, p, err := s.api.get(ctx, api, id)
				if err != nil || p != nil {
					s.errorf("GET /v1/executions/%s: %v %+v", id, err, p)
					continue
				}
				mu.Lock()
				out[id] = v.Events
				mu.Unlock()
			}
		})
	}
	for _, r := range recs {
		ch <- r.ExecutionID
	}
	close(ch)
	wg.Wait()
	return out
}
