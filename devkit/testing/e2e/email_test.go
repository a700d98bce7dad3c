package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/mailpit"
)

// The email tests run the shipped email module through the host against a
// real Mailpit (testenv, the pinned version). Only tests whose name ends in
// EmulatorFault use the Mailpit emulator, for failures a real Mailpit
// cannot be made to produce. Effects are counted in the mailbox by exact
// Message-ID (Mailpit's own search is a substring match).

const sendArgs = `{"to":"customer@example.com","subject":"Invoice 42","text":"Your invoice is attached."}`

// messageID is the Message-ID the connector derives from a verbatim key.
func messageID(key string) string { return key + "@connhost.invalid" }

// stored returns the messages whose Message-ID is exactly the key's.
func stored(tb testing.TB, mailbox *sandbox.Client, key string) []mailpit.MessageSummary {
	tb.Helper()
	ms, err := mailbox.FindMessagesByMessageID(context.Background(), messageID(key))
	if err != nil {
		tb.Fatal(err)
	}
	return ms
}

// wantStored fails unless the mailbox holds exactly n messages for key.
func wantStored(tb testing.TB, mailbox *sandbox.Client, key string, n int) []mailpit.MessageSummary {
	tb.Helper()
	ms := stored(tb, mailbox, key)
	if len(ms) != n {
		tb.Fatalf("the mailbox holds %d messages with Message-ID <%s>, want %d", len(ms), messageID(key), n)
	}
	return ms
}

type sendResult struct {
	ID          string `json:"id"`
	MessageID   string `json:"message_id"`
	AlreadySent bool   `json:"already_sent"`
}

func realMailpit(tb testing.TB) (*conn, *sandbox.Client) {
	tb.Helper()
	base := needMailpit(tb)
	return loadEmail(tb, base), shared.mailpit
}

func TestEmailSendStoresOneMessageInRealMailpit(t *testing.T) {
	c, mailbox := realMailpit(t)
	key := newKey("send")
	o := c.executeWithKey(t, "send", key, sendArgs)
	wantOutcome(t, o, abi.OutcomeOK)
	m := wantStored(t, mailbox, key, 1)[0]
	r := result[sendResult](t, o)
	if o.Receipt != m.ID || r.ID != m.ID || r.MessageID != messageID(key) || r.AlreadySent {
		t.Fatalf("receipt %q result %+v, want Mailpit's %s", o.Receipt, r, m.ID)
	}
	if m.Subject != "Invoice 42" || m.From == nil || m.From.Address != defaultFrom {
		t.Fatalf("stored message subject %q from %+v, want the configured default_from", m.Subject, m.From)
	}
}

func TestEmailSendSameKeyTwiceSendsOnceInRealMailpit(t *testing.T) {
	c, mailbox := realMailpit(t)
	key := newKey("send-twice")
	first := c.executeWithKey(t, "send", key, sendArgs)
	second := c.executeWithKey(t, "send", key, sendArgs)
	wantOutcome(t, first, abi.OutcomeOK)
	wantOutcome(t, second, abi.OutcomeOK)
	m := wantStored(t, mailbox, key, 1)[0]
	if r := result[sendResult](t, second); !r.AlreadySent || second.Receipt != first.Receipt || second.Receipt != m.ID {
		t.Fatalf("second send %+v receipt %q, want already_sent with receipt %s", r, second.Receipt, m.ID)
	}
}

// Mailpit's own validation refuses the message: permanent, nothing stored,
// and reconcile says not_applied.
func TestEmailSendInvalidRequestIsPermanentInRealMailpit(t *testing.T) {
	c, mailbox := realMailpit(t)
	key := newKey("send-invalid")
	o := c.executeWithKey(t, "send", key, `{"to":"a@b@c","subject":"s","text":"t"}`)
	wantOutcome(t, o, abi.OutcomePermanent, "HTTP 400", "invalid To address")
	wantStored(t, mailbox, key, 0)
	wantOutcome(t, c.reconcile(t, "send", key, `{"to":"a@b@c","subject":"s","text":"t"}`), abi.OutcomeNotApplied)
}

func TestEmailSendReconcileInRealMailpit(t *testing.T) {
	c, mailbox := realMailpit(t)
	t.Run("sent message is applied", func(t *testing.T) {
		key := newKey("rec-sent")
		sent := c.executeWithKey(t, "send", key, sendArgs)
		o := c.reconcile(t, "send", key, sendArgs)
		wantOutcome(t, o, abi.OutcomeApplied)
		if o.Receipt != sent.Receipt || o.Receipt != wantStored(t, mailbox, key, 1)[0].ID {
			t.Fatalf("reconcile receipt %q, want %q", o.Receipt, sent.Receipt)
		}
	})
	t.Run("never sent is not applied", func(t *testing.T) {
		wantOutcome(t, c.reconcile(t, "send", newKey("rec-never"), sendArgs), abi.OutcomeNotApplied)
	})
	// Mailpit's message-id: search matches substrings, so a message whose
	// Message-ID merely contains ours is returned by the search; it must
	// count neither for reconcile nor for send's own pre-check.
	t.Run("substring look-alike is not applied", func(t *testing.T) {
		key := newKey("rec-trap")
		wantOutcome(t, c.executeWithKey(t, "send", "x"+key, sendArgs), abi.OutcomeOK)
		hits := c.execute(t, "search_messages", fmt.Sprintf(`{"query":"message-id:%s"}`, messageID(key)))
		if r := result[struct{ Total int }](t, hits); r.Total != 1 {
			t.Fatalf("raw search %s: want Mailpit to return the look-alike (the trap must be real)", hits.Result)
		}
		wantOutcome(t, c.reconcile(t, "send", key, sendArgs), abi.OutcomeNotApplied)
		o := c.executeWithKey(t, "send", key, sendArgs)
		wantOutcome(t, o, abi.OutcomeOK)
		if r := result[sendResult](t, o); r.AlreadySent {
			t.Fatal("send took the look-alike for an earlier attempt")
		}
		wantStored(t, mailbox, key, 1)
		wantStored(t, mailbox, "x"+key, 1)
	})
	t.Run("unreachable Mailpit is unknown", func(t *testing.T) {
		base := closedPortURL(t)
		wantOutcome(t, loadEmail(t, base).reconcile(t, "send", newKey("rec-down"), sendArgs), abi.OutcomeUnknown, "network")
	})
}

// closedPortURL returns the base URL of a loopback port nothing listens on.
func closedPortURL(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

func TestEmailGetMessageInRealMailpit(t *testing.T) {
	c, _ := realMailpit(t)
	key := newKey("get")
	sent := c.executeWithKey(t, "send", key, `{"to":["a@example.com","b@example.com"],"subject":"Read me","text":"body text"}`)
	t.Run("success", func(t *testing.T) {
		o := c.execute(t, "get_message", fmt.Sprintf(`{"id":%q}`, sent.Receipt))
		wantOutcome(t, o, abi.OutcomeOK)
		v := result[struct {
			ID        string `json:"id"`
			MessageID string `json:"message_id"`
			Subject   string `json:"subject"`
			Text      string `json:"text"`
			To        []struct {
				Address string `json:"address"`
			} `json:"to"`
		}](t, o)
		if v.ID != sent.Receipt || v.MessageID != messageID(key) || v.Subject != "Read me" ||
			!strings.Contains(v.Text, "body text") || len(v.To) != 2 {
			t.Fatalf("get_message %s", o.Result)
		}
	})
	t.Run("unknown id is permanent", func(t *testing.T) {
		wantOutcome(t, c.execute(t, "get_message", `{"id":"e2eNoSuchMessage"}`), abi.OutcomePermanent, "HTTP 404")
	})
}

func TestEmailSearchMessagesInRealMailpit(t *testing.T) {
	c, _ := realMailpit(t)
	key := newKey("search")
	sent := c.executeWithKey(t, "send", key, `{"to":"search@example.com","subject":"Findable","text":"t"}`)
	o := c.execute(t, "search_messages", fmt.Sprintf(`{"query":"message-id:%s","limit":5}`, messageID(key)))
	wantOutcome(t, o, abi.OutcomeOK)
	r := result[struct {
		Total    int `json:"total"`
		Messages []struct {
			ID        string `json:"id"`
			MessageID string `json:"message_id"`
			Subject   string `json:"subject"`
		} `json:"messages"`
	}](t, o)
	if r.Total != 1 || len(r.Messages) != 1 || r.Messages[0].ID != sent.Receipt || r.Messages[0].Subject != "Findable" {
		t.Fatalf("search_messages %s", o.Result)
	}
	none := c.execute(t, "search_messages", `{"query":"subject:e2e-no-such-subject-zzz"}`)
	if r := result[struct{ Total int }](t, none); r.Total != 0 {
		t.Fatalf("search for nothing %s", none.Result)
	}
}

// release_message relays a stored message through Mailpit's SMTP relay,
// here the test's SMTP sink: one release, one relayed message.
func TestEmailReleaseMessageInRealMailpit(t *testing.T) {
	c, _ := realMailpit(t)
	sent := c.executeWithKey(t, "send", newKey("release"), sendArgs)
	t.Run("success relays once", func(t *testing.T) {
		before := len(shared.relay.messages())
		o := c.execute(t, "release_message", fmt.Sprintf(`{"id":%q,"to":"ops@example.com"}`, sent.Receipt))
		wantOutcome(t, o, abi.OutcomeOK)
		got := shared.relay.messages()[before:]
		if len(got) != 1 || len(got[0].To) != 1 || got[0].To[0] != "ops@example.com" || !strings.Contains(got[0].Data, "Invoice 42") {
			t.Fatalf("the relay received %+v, want one message to ops@example.com", got)
		}
	})
	t.Run("unknown id is permanent and relays nothing", func(t *testing.T) {
		before := len(shared.relay.messages())
		wantOutcome(t, c.execute(t, "release_message", `{"id":"e2eNoSuchMessage","to":"ops@example.com"}`), abi.OutcomePermanent)
		if n := len(shared.relay.messages()) - before; n != 0 {
			t.Fatalf("the relay received %d messages", n)
		}
	})
}

// Mailpit answering 5xx or 429 (a proxy in front of it, an overloaded
// server) cannot be produced by a real Mailpit on demand, so these run on
// the emulator. A refused send is retryable and stored nothing; a 500 that
// hides a stored message is found by send's own look-up and reported OK.
func TestEmailSendErrorClassesEmulatorFault(t *testing.T) {
	tests := []struct {
		name   string
		rule   fault.Rule
		want   abi.OutcomeKind
		stored int
	}{
		// Not stored yet after a 5xx is not "not sent": the request may
		// still be in flight, so the answer is uncertain.
		{name: "500 before storing is uncertain", rule: fault.Rule{Kind: fault.Status, Status: 500, Method: "POST", Path: "/api/v1/send"},
			want: abi.OutcomeUncertain},
		{name: "503 before storing is uncertain", rule: fault.Rule{Kind: fault.Status, Status: 503, Method: "POST", Path: "/api/v1/send"},
			want: abi.OutcomeUncertain},
		{name: "429 is retryable", rule: fault.Rule{Kind: fault.Status, Status: 429, Method: "POST", Path: "/api/v1/send"},
			want: abi.OutcomeRetryable},
		{name: "500 after storing is ok via look-up", rule: fault.Rule{Kind: fault.Status, Status: 500, Apply: true, Method: "POST", Path: "/api/v1/send"},
			want: abi.OutcomeOK, stored: 1},
	}
	c := loadEmail(t, shared.sb.EmailURL())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addEmailFault(t, tt.rule)
			key := newKey("email-class")
			o := c.executeWithKey(t, "send", key, sendArgs)
			wantOutcome(t, o, tt.want)
			wantStored(t, shared.sbc, key, tt.stored)
			// The retry with the same key (as the host would send it)
			// leaves exactly one message.
			wantOutcome(t, c.executeWithKey(t, "send", key, sendArgs), abi.OutcomeOK)
			wantStored(t, shared.sbc, key, 1)
		})
	}
	t.Run("500 on the look-up is unknown for reconcile", func(t *testing.T) {
		addEmailFault(t, fault.Rule{Kind: fault.Status, Status: 500, Method: "GET", Path: "/api/v1/search"})
		wantOutcome(t, c.reconcile(t, "send", newKey("email-rec"), sendArgs), abi.OutcomeUnknown, "HTTP 500")
	})
}

// Reads and release_message against a Mailpit (or a proxy in front of it)
// answering 5xx: reads are retryable; a release whose answer is lost may
// have relayed, so it is uncertain and logged at error level — never
// retried (recovery manual, one attempt: an operator decides).
func TestEmailReadsAndReleaseErrorClassesEmulatorFault(t *testing.T) {
	c := loadEmail(t, shared.sb.EmailURL())
	sent := c.executeWithKey(t, "send", newKey("email-reads"), sendArgs)
	tests := []struct {
		name, op, args string
		rule           fault.Rule
		want           abi.OutcomeKind
		fragments      []string
	}{
		{name: "get_message 500 is retryable", op: "get_message", args: fmt.Sprintf(`{"id":%q}`, sent.Receipt),
			rule: fault.Rule{Kind: fault.Status, Status: 500, Method: "GET", Path: "/api/v1/message/"},
			want: abi.OutcomeRetryable, fragments: []string{"HTTP 500"}},
		{name: "search_messages 503 is retryable", op: "search_messages", args: `{"query":"subject:anything"}`,
			rule: fault.Rule{Kind: fault.Status, Status: 503, Method: "GET", Path: "/api/v1/search"},
			want: abi.OutcomeRetryable, fragments: []string{"HTTP 503"}},
		{name: "search_messages 429 is retryable", op: "search_messages", args: `{"query":"subject:anything"}`,
			rule: fault.Rule{Kind: fault.Status, Status: 429, Method: "GET", Path: "/api/v1/search"},
			want: abi.OutcomeRetryable, fragments: []string{"HTTP 429"}},
		{name: "release_message 502 is uncertain", op: "release_message",
			args: fmt.Sprintf(`{"id":%q,"to":"ops@example.com"}`, sent.Receipt),
			rule: fault.Rule{Kind: fault.Status, Status: 502, Method: "POST", Path: "/api/v1/message/"},
			want: abi.OutcomeUncertain, fragments: []string{"outcome uncertain", "HTTP 502"}},
		{name: "release_message HTML error page is uncertain", op: "release_message",
			args: fmt.Sprintf(`{"id":%q,"to":"ops@example.com"}`, sent.Receipt),
			rule: fault.Rule{Kind: fault.HTML, Method: "POST", Path: "/api/v1/message/"},
			want: abi.OutcomeUncertain, fragments: []string{"outcome uncertain"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addEmailFault(t, tt.rule)
			wantOutcome(t, c.execute(t, tt.op, tt.args), tt.want, tt.fragments...)
			if tt.op == "release_message" && !containsAny(c.errorLogs(), "outcome uncertain") {
				t.Fatalf("no error-level log for the uncertain release; error logs %q", c.errorLogs())
			}
		})
	}
}
