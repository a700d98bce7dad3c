package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// MailTag tags every notification mail, so that a mailbox search
// (tag:connhost-notification) finds them apart from a connector's mail.
const MailTag = "connhost-notification"

// Mailpit is the Channel of connhost dev: an e-mail per notice through a
// Mailpit's send API (POST /api/v1/send), the local one dev's e-mail
// connector uses.
type Mailpit struct {
	// URL is the Mailpit's base URL.
	URL string
	// From and To are the mail's addresses.
	From, To string
	client   *http.Client
}

// NewMailpit returns the Channel mailing from → to through the Mailpit at
// base.
func NewMailpit(base, from, to string) *Mailpit {
	return &Mailpit{URL: strings.TrimRight(base, "/"), From: from, To: to,
		client: &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Name implements Channel.
func (*Mailpit) Name() string { return "email" }

type mailAddress struct {
	Email string
}

type mailpitSend struct {
	From    mailAddress
	To      []mailAddress
	Subject string
	Text    string
	Tags    []string
	Headers map[string]string
}

// Deliver implements Channel.
func (m *Mailpit) Deliver(ctx context.Context, n Notice) error {
	b, err := json.Marshal(mailpitSend{From: mailAddress{m.From}, To: []mailAddress{{m.To}}, Subject: n.Subject(), Text: MailText(n),
		Tags: []string{MailTag}, Headers: map[string]string{"Message-ID": "<" + n.ID() + "@connhost.notify>"}})
	if err != nil {
		return Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", m.URL+"/api/v1/send", bytes.NewReader(b))
	if err != nil {
		return Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return fmt.Errorf("notify: mail through %s: %w", m.URL, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch s := resp.StatusCode; {
	case s == http.StatusOK:
		return nil
	case s >= 500:
		return fmt.Errorf("notify: mail through %s: %s", m.URL, resp.Status)
	default:
		return Permanent(fmt.Errorf("notify: mail through %s: %s %s", m.URL, resp.Status, bytes.TrimSpace(msg)))
	}
}

// MailText is the plain-text body of n's mail: what waits, the link to
// act on it, and the command line.
func MailText(n Notice) string {
	var b strings.Builder
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-13s %s\n", k, v)
		}
	}
	fmt.Fprintf(&b, "%s\n\n", n.Subject())
	line("execution", n.ExecutionID)
	line("approval", n.ApprovalID)
	line("tool", n.Tool)
	line("namespace", n.Namespace)
	line("session", n.SessionID)
	line("state", n.State)
	line("waiting since", n.Since.UTC().Format(time.RFC3339))
	if n.ExpiresAt != nil {
		line("expires", n.ExpiresAt.UTC().Format(time.RFC3339))
	}
	line("why", n.Why)
	line("calls", strings.Join(n.Calls, " "))
	fmt.Fprintf(&b, "\nOpen it: %s\n", n.ConsoleURL)
	if n.Command != "" {
		fmt.Fprintf(&b, "Or: %s\n", n.Command)
	}
	return b.String()
}
