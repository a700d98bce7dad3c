package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/mailpit"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// Provider observes the providers of the shipped connectors over HTTP: a
// Stripe API (the emulator of devkit/sandbox, in- or out-of-process) and
// a Mailpit API (the real server or the emulator). It supplies Options'
// Effects, Exists and Args.
type Provider struct {
	client *sandbox.Client

	mu      sync.Mutex
	pi      string // a PaymentIntent refunds and reads name
	message string // a stored message reads and releases name
	// existed holds the PaymentIntents and Refunds there were when the
	// cell began, messages how many messages (StartCell).
	existed  map[string]bool
	messages int
}

// holdPaths are the requests of the shipped operations that take effect.
var holdPaths = map[string]struct {
	email bool
	path  string
}{
	"create_payment":  {false, "/v1/payment_intents"},
	"refund_payment":  {false, "/v1/refunds"},
	"send":            {true, "/api/v1/send"},
	"release_message": {true, "/api/v1/message/"},
}

// Arm implements Holder: a Hold rule for the operation's effectful POST on
// the emulator (or the holding proxy in front of a real Mailpit) that
// serves it.
func (p *Provider) Arm(ctx context.Context, operation string) error {
	hp, ok := holdPaths[operation]
	if !ok {
		return fmt.Errorf("%w: no provider request to hold for operation %q", ErrCannotHold, operation)
	}
	rule := fault.Rule{Kind: fault.Hold, Method: "POST", Path: hp.path}
	if hp.email {
		return p.client.AddEmailFault(ctx, rule)
	}
	return p.client.AddPaymentsFault(ctx, rule)
}

// WaitHeld implements Holder.
func (p *Provider) WaitHeld(ctx context.Context) error {
	for {
		n, err := p.client.Held(ctx)
		if err != nil || n > 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Release implements Holder.
func (p *Provider) Release(ctx context.Context) error { return p.client.ReleaseHeld(ctx) }

// Advance implements Clock: it moves the Stripe emulator's clock, which
// expires idempotency keys after its retention (24h, as Stripe does).
func (p *Provider) Advance(ctx context.Context, d time.Duration) error {
	if p.client.PaymentsURL == "" {
		return fmt.Errorf("crashtest: no payments emulator, whose clock moves")
	}
	return p.client.AdvanceClock(ctx, d)
}

// NewProvider returns a Provider for the given base URLs; either may be
// empty when the connector under test does not use it.
func NewProvider(paymentsURL, emailURL string) *Provider {
	return &Provider{client: sandbox.NewClient(paymentsURL, emailURL)}
}

// Effects counts PaymentIntents + Refunds + Messages, whatever the
// operation.
func (p *Provider) Effects(ctx context.Context, _ string) (int, error) {
	n := 0
	if p.client.PaymentsURL != "" {
		pis, err := p.client.CountPaymentIntents(ctx)
		if err != nil {
			return 0, err
		}
		rs, err := p.client.CountRefunds(ctx)
		if err != nil {
			return 0, err
		}
		n += pis + rs
	}
	if p.client.EmailURL != "" {
		ms, err := p.client.CountMessages(ctx)
		if err != nil {
			return 0, err
		}
		n += ms
	}
	return n, nil
}

// CheckReceipt implements Options.CheckReceipt: every external operation
// of the shipped connectors names the object its effect made (or, for
// release_message, the message it relayed), which must exist.
func (p *Provider) CheckReceipt(ctx context.Context, operation, receipt string) (string, error) {
	if receipt == "" {
		return fmt.Sprintf("%s succeeded without a receipt", operation), nil
	}
	ok, err := p.Exists(ctx, receipt)
	if err != nil || ok {
		return "", err
	}
	return fmt.Sprintf("receipt %s names no object at the provider", receipt), nil
}

// StartCell implements ReceiptOwner: it notes the PaymentIntents and
// Refunds that exist, and how many messages Mailpit holds.
func (p *Provider) StartCell(ctx context.Context, _ string) error {
	existed := map[string]bool{}
	if p.client.PaymentsURL != "" {
		pis, err := p.client.PaymentIntents(ctx)
		if err != nil {
			return err
		}
		for _, pi := range pis {
			existed[pi.ID] = true
		}
		rs, err := p.client.Refunds(ctx, "")
		if err != nil {
			return err
		}
		for _, r := range rs {
			existed[r.ID] = true
		}
	}
	n := 0
	if p.client.EmailURL != "" {
		var err error
		if n, err = p.client.CountMessages(ctx); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.existed, p.messages = existed, n
	return nil
}

// OwnReceipt implements ReceiptOwner for the shipped operations: a
// PaymentIntent or Refund must be one made since the cell began, a
// message one of those stored since; release_message names the message
// it relayed, which must be the one its arguments named.
func (p *Provider) OwnReceipt(ctx context.Context, operation, receipt string) (string, error) {
	p.mu.Lock()
	existed, messages, released := p.existed, p.messages, p.message
	p.mu.Unlock()
	notOwn := func(why string) string {
		return fmt.Sprintf("receipt %s names an object that exists but is not this call's effect: %s", receipt, why)
	}
	switch {
	case operation == "release_message":
		if receipt != released {
			return notOwn("release_message relays the message its arguments name, " + released), nil
		}
	case strings.HasPrefix(receipt, "pi_") || strings.HasPrefix(receipt, "re_"):
		if existed[receipt] {
			return notOwn("it existed before the cell's call was made"), nil
		}
	case p.client.EmailURL != "":
		n, err := p.client.CountMessages(ctx)
		if err != nil {
			return "", err
		}
		if n <= messages {
			return notOwn("Mailpit stored no message since the cell began"), nil
		}
		var s mailpit.MessagesSummary
		if err := getJSON(ctx, p.client, fmt.Sprintf("%s/api/v1/messages?limit=%d", p.client.EmailURL, n-messages), &s); err != nil {
			return "", err
		}
		if !slices.ContainsFunc(s.Messages, func(m mailpit.MessageSummary) bool { return m.ID == receipt }) {
			return notOwn(fmt.Sprintf("it is not one of the %d message(s) stored since the cell began", n-messages)), nil
		}
	}
	return "", nil
}

// getJSON GETs u and decodes its JSON answer into out.
func getJSON(ctx context.Context, c *sandbox.Client, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("crashtest: GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("crashtest: GET %s: %s: %s", u, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

// Exists reports whether the object a receipt names exists: a
// PaymentIntent (pi_…), a Refund (re_…) or else a Mailpit message ID.
func (p *Provider) Exists(ctx context.Context, receipt string) (bool, error) {
	switch {
	case strings.HasPrefix(receipt, "pi_") && p.client.PaymentsURL != "":
		pis, err := p.client.PaymentIntents(ctx)
		return slices.ContainsFunc(pis, func(pi stripe.PaymentIntent) bool { return pi.ID == receipt }), err
	case strings.HasPrefix(receipt, "re_") && p.client.PaymentsURL != "":
		rs, err := p.client.Refunds(ctx, "")
		return slices.ContainsFunc(rs, func(r stripe.Refund) bool { return r.ID == receipt }), err
	case p.client.EmailURL != "":
		req, err := http.NewRequestWithContext(ctx, "GET", p.client.EmailURL+"/api/v1/message/"+url.PathEscape(receipt), nil)
		if err != nil {
			return false, err
		}
		resp, err := p.client.HTTP.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		switch resp.StatusCode {
		case http.StatusOK:
			return true, nil
		case http.StatusNotFound:
			return false, nil
		}
		return false, fmt.Errorf("GET message %s: %s", receipt, resp.Status)
	}
	return false, fmt.Errorf("receipt %q names no object this provider knows", receipt)
}

// Args returns sample arguments for the operations of the shipped
// connectors (and of fixtures that reuse their names): create_payment,
// refund_payment (1 cent of a PaymentIntent it creates at the emulator
// once), get_payment, send, release_message, get_message and
// search_messages (about a message it stores in Mailpit once). Other
// operations are an error: give their arguments explicitly.
func (p *Provider) Args(ctx context.Context, operation string) (json.RawMessage, error) {
	switch operation {
	case "create_payment":
		return json.RawMessage(`{"amount":500,"currency":"usd","payment_method":"pm_card_visa","description":"connhost crashtest"}`), nil
	case "refund_payment", "get_payment":
		pi, err := p.paymentIntent(ctx)
		if err != nil {
			return nil, err
		}
		if operation == "get_payment" {
			return json.Marshal(map[string]any{"payment_intent": pi})
		}
		return json.Marshal(map[string]any{"payment_intent": pi, "amount": 1, "reason": "requested_by_customer"})
	case "send":
		return json.RawMessage(`{"to":"crash@example.com","subject":"connhost crashtest","text":"one crash, one message"}`), nil
	case "release_message", "get_message":
		id, err := p.storedMessage(ctx)
		if err != nil {
			return nil, err
		}
		if operation == "get_message" {
			return json.Marshal(map[string]any{"id": id})
		}
		return json.Marshal(map[string]any{"id": id, "to": "ops@example.com"})
	case "search_messages":
		return json.RawMessage(`{"query":"subject:crashtest","limit":5}`), nil
	}
	return nil, fmt.Errorf("crashtest: no sample arguments for operation %q (give them with --args)", operation)
}

// paymentIntent creates, once, a confirmed PaymentIntent of 1000.00 USD
// directly at the Stripe emulator.
func (p *Provider) paymentIntent(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pi != "" {
		return p.pi, nil
	}
	if p.client.PaymentsURL == "" {
		return "", fmt.Errorf("crashtest: no payments provider to create a PaymentIntent at")
	}
	form := url.Values{"amount": {"100000"}, "currency": {"usd"}, "payment_method": {"pm_card_visa"},
		"payment_method_types[]": {"card"}, "confirm": {"true"}}
	var pi struct {
		ID string `json:"id"`
	}
	if err := post(ctx, p.client, p.client.PaymentsURL+"/v1/payment_intents", "application/x-www-form-urlencoded",
		[]byte(form.Encode()), true, &pi); err != nil {
		return "", err
	}
	p.pi = pi.ID
	return p.pi, nil
}

// storedMessage stores, once, a message through Mailpit's send API.
func (p *Provider) storedMessage(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.message != "" {
		return p.message, nil
	}
	if p.client.EmailURL == "" {
		return "", fmt.Errorf("crashtest: no email provider to store a message at")
	}
	body, _ := json.Marshal(map[string]any{
		"From": map[string]string{"Email": "seed@example.com"}, "To": []map[string]string{{"Email": "crash@example.com"}},
		"Subject": "crashtest seed", "Text": "a stored message reads and releases name",
	})
	var out struct {
		ID string `json:"ID"`
	}
	if err := post(ctx, p.client, p.client.EmailURL+"/api/v1/send", "application/json", body, false, &out); err != nil {
		return "", err
	}
	p.message = out.ID
	return p.message, nil
}

func post(ctx context.Context, c *sandbox.Client, u, ctype string, body []byte, stripeAuth bool, out any) error {
	req, err := http.NewRequestWithContext(ctx, "POST", u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	if stripeAuth {
		req.Header.Set("Authorization", "Bearer "+sandbox.DefaultAPIKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("crashtest: POST %s: %w", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("crashtest: POST %s: %s: %s", u, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("crashtest: POST %s: %w", u, err)
	}
	return nil
}

// WriteConfig writes a connhost.toml at path that hands each connector the
// given config values and adds the loopback origin of its base_url (when
// it has one) to allow_http.
func WriteConfig(path string, connectors map[string]map[string]string) error {
	var b strings.Builder
	names := make([]string, 0, len(connectors))
	for n := range connectors {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "[connectors.%s]\n", n)
		keys := make([]string, 0, len(connectors[n]))
		for k := range connectors[n] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s = %s\n", k, strconv.Quote(connectors[n][k]))
		}
		if u, err := url.Parse(connectors[n]["base_url"]); err == nil && u.Host != "" {
			fmt.Fprintf(&b, "allow_http = [%s]\n", strconv.Quote(u.Scheme+"://"+u.Host))
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
