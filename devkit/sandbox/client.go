package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/mailpit"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// DefaultAPIKey is the Stripe test key Client uses unless told otherwise.
const DefaultAPIKey = "sk_test_connhost_sandbox"

// Client is what tests use to observe and steer the providers over HTTP,
// so it works for an in-process Sandbox, for `connhost sandbox` in another
// process and (for the email read methods) for a real Mailpit.
//
// Counting and finding use the list endpoints, never Stripe search: lists
// are read-after-write consistent, search is not. Client is safe for
// concurrent use.
type Client struct {
	// PaymentsURL and EmailURL are the emulators' base URLs.
	PaymentsURL, EmailURL string
	// APIKey authenticates Stripe calls. The default value is DefaultAPIKey.
	APIKey string
	// HTTP is the client used. The default value has a 30 s timeout.
	HTTP *http.Client
}

// NewClient returns a Client for the given base URLs.
func NewClient(paymentsURL, emailURL string) *Client {
	return &Client{PaymentsURL: paymentsURL, EmailURL: emailURL, APIKey: DefaultAPIKey, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// StatusError is an unexpected HTTP answer.
type StatusError struct {
	Method, URL string
	Status      int
	Body        string
}

// Error implements error.
func (e *StatusError) Error() string {
	return fmt.Sprintf("sandbox: %s %s: %d %s", e.Method, e.URL, e.Status, e.Body)
}

func (c *Client) do(ctx context.Context, method, u string, body any, stripeAuth bool, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if stripeAuth {
		key := c.APIKey
		if key == "" {
			key = DefaultAPIKey
		}
		req.Header.Set("Authorization", "Bearer "+key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("sandbox: %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("sandbox: %s %s: reading: %w", method, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Method: method, URL: u, Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sandbox: %s %s: decoding: %w", method, u, err)
	}
	return nil
}

// PaymentIntents returns every payment intent, newest first, paging
// through GET /v1/payment_intents.
func (c *Client) PaymentIntents(ctx context.Context) ([]stripe.PaymentIntent, error) {
	return listAll(ctx, c, "/v1/payment_intents", url.Values{}, func(p stripe.PaymentIntent) string { return p.ID })
}

// Refunds returns every refund (of paymentIntent, when not empty), newest
// first.
func (c *Client) Refunds(ctx context.Context, paymentIntent string) ([]stripe.Refund, error) {
	q := url.Values{}
	if paymentIntent != "" {
		q.Set("payment_intent", paymentIntent)
	}
	return listAll(ctx, c, "/v1/refunds", q, func(r stripe.Refund) string { return r.ID })
}

func listAll[T any](ctx context.Context, c *Client, path string, q url.Values, id func(T) string) ([]T, error) {
	var out []T
	q.Set("limit", "100")
	for {
		var l stripe.List[T]
		if err := c.do(ctx, "GET", c.PaymentsURL+path+"?"+q.Encode(), nil, true, &l); err != nil {
			return nil, err
		}
		out = append(out, l.Data...)
		if !l.HasMore || len(l.Data) == 0 {
			return out, nil
		}
		q.Set("starting_after", id(l.Data[len(l.Data)-1]))
	}
}

// CountPaymentIntents returns how many payment intents exist (real effects,
// declines included).
func (c *Client) CountPaymentIntents(ctx context.Context) (int, error) {
	pis, err := c.PaymentIntents(ctx)
	return len(pis), err
}

// CountRefunds returns how many refunds exist.
func (c *Client) CountRefunds(ctx context.Context) (int, error) {
	rs, err := c.Refunds(ctx, "")
	return len(rs), err
}

// FindPaymentIntents returns the payment intents whose metadata[key] is
// exactly value, newest first.
func (c *Client) FindPaymentIntents(ctx context.Context, key, value string) ([]stripe.PaymentIntent, error) {
	pis, err := c.PaymentIntents(ctx)
	if err != nil {
		return nil, err
	}
	var out []stripe.PaymentIntent
	for _, p := range pis {
		if v, ok := p.Metadata[key]; ok && v == value {
			out = append(out, p)
		}
	}
	return out, nil
}

// Messages returns every message in the mailbox, newest first.
func (c *Client) Messages(ctx context.Context) ([]mailpit.MessageSummary, error) {
	var out []mailpit.MessageSummary
	for start := 0; ; {
		var s mailpit.MessagesSummary
		if err := c.do(ctx, "GET", fmt.Sprintf("%s/api/v1/messages?start=%d&limit=200", c.EmailURL, start), nil, false, &s); err != nil {
			return nil, err
		}
		out = append(out, s.Messages...)
		start += len(s.Messages)
		if len(s.Messages) == 0 || uint64(start) >= s.MessagesCount {
			return out, nil
		}
	}
}

// CountMessages returns how many messages the mailbox holds.
func (c *Client) CountMessages(ctx context.Context) (int, error) {
	var s mailpit.MessagesSummary
	if err := c.do(ctx, "GET", c.EmailURL+"/api/v1/messages?limit=1", nil, false, &s); err != nil {
		return 0, err
	}
	return int(s.Total), nil
}

// FindMessagesByMessageID returns the messages whose Message-ID is exactly
// id (with or without angle brackets). Mailpit's message-id: search is a
// substring match; this filters its results exactly.
func (c *Client) FindMessagesByMessageID(ctx context.Context, id string) ([]mailpit.MessageSummary, error) {
	id = strings.Trim(id, "<>")
	var s mailpit.MessagesSummary
	q := url.Values{"query": {`message-id:"` + id + `"`}, "limit": {"1000"}}
	if err := c.do(ctx, "GET", c.EmailURL+"/api/v1/search?"+q.Encode(), nil, false, &s); err != nil {
		return nil, err
	}
	var out []mailpit.MessageSummary
	for _, m := range s.Messages {
		if m.MessageID == id {
			out = append(out, m)
		}
	}
	return out, nil
}

// DeleteMessages empties the mailbox.
func (c *Client) DeleteMessages(ctx context.Context) error {
	return c.do(ctx, "DELETE", c.EmailURL+"/api/v1/messages", nil, false, nil)
}

// AddPaymentsFault installs a fault rule on the Stripe emulator.
func (c *Client) AddPaymentsFault(ctx context.Context, r fault.Rule) error {
	return c.do(ctx, "POST", c.PaymentsURL+fault.ControlPrefix+"faults", r, false, nil)
}

// AddEmailFault installs a fault rule on the Mailpit emulator.
func (c *Client) AddEmailFault(ctx context.Context, r fault.Rule) error {
	return c.do(ctx, "POST", c.EmailURL+fault.ControlPrefix+"faults", r, false, nil)
}

// ClearFaults removes every fault rule from both emulators.
func (c *Client) ClearFaults(ctx context.Context) error {
	for _, base := range []string{c.PaymentsURL, c.EmailURL} {
		if err := c.do(ctx, "DELETE", base+fault.ControlPrefix+"faults", nil, false, nil); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseHeld lets every request held by a Hold rule continue, on both
// emulators (those whose URL is set).
func (c *Client) ReleaseHeld(ctx context.Context) error {
	for _, base := range []string{c.PaymentsURL, c.EmailURL} {
		if base == "" {
			continue
		}
		if err := c.do(ctx, "POST", base+fault.ControlPrefix+"release", nil, false, nil); err != nil {
			return err
		}
	}
	return nil
}

// Held returns how many requests Hold rules block right now, on both
// emulators (those whose URL is set).
func (c *Client) Held(ctx context.Context) (int, error) {
	n := 0
	for _, base := range []string{c.PaymentsURL, c.EmailURL} {
		if base == "" {
			continue
		}
		var h struct{ Held int }
		if err := c.do(ctx, "GET", base+fault.ControlPrefix+"held", nil, false, &h); err != nil {
			return 0, err
		}
		n += h.Held
	}
	return n, nil
}

// SetSearchLag changes the Stripe search lag.
func (c *Client) SetSearchLag(ctx context.Context, d time.Duration) error {
	return c.do(ctx, "POST", c.PaymentsURL+fault.ControlPrefix+"search_lag", map[string]fault.Duration{"lag": fault.Duration(d)}, false, nil)
}

// AdvanceClock moves the Stripe emulator's clock forward.
func (c *Client) AdvanceClock(ctx context.Context, d time.Duration) error {
	return c.do(ctx, "POST", c.PaymentsURL+fault.ControlPrefix+"clock", map[string]fault.Duration{"advance": fault.Duration(d)}, false, nil)
}

// PaymentsStats returns the Stripe emulator's counters.
func (c *Client) PaymentsStats(ctx context.Context) (stripe.Stats, error) {
	var st stripe.Stats
	err := c.do(ctx, "GET", c.PaymentsURL+fault.ControlPrefix+"stats", nil, false, &st)
	return st, err
}

// EmailStats returns the Mailpit emulator's counters.
func (c *Client) EmailStats(ctx context.Context) (mailpit.Stats, error) {
	var st mailpit.Stats
	err := c.do(ctx, "GET", c.EmailURL+fault.ControlPrefix+"stats", nil, false, &st)
	return st, err
}
