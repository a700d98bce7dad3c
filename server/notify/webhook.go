package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/connhost/connhost/internal/ipclass"
)

// SecretPrefix starts a Standard Webhooks signing secret: "whsec_" and
// the base64 of the key.
const SecretPrefix = "whsec_"

// ParseSecret returns the HMAC key of a Standard Webhooks secret
// ("whsec_" + base64 of 24 to 64 random bytes).
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, errors.New(`notify: a webhook secret starts with "whsec_" and the base64 of its key (make one with: echo whsec_$(openssl rand -base64 32))`)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New(`notify: the webhook secret after "whsec_" is not base64 (make one with: echo whsec_$(openssl rand -base64 32))`)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("notify: the webhook secret's key is %d bytes, want 24 to 64 (make one with: echo whsec_$(openssl rand -base64 32))", len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature of body sent as message id at ts:
// "v1," and the base64 of HMAC-SHA256(key, id "." ts "." body).
func Sign(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	// URL receives a POST per notice.
	URL string
	// Key is the HMAC key (see ParseSecret).
	Key []byte
	// AllowHosts are the host names (or IP literals) URL's host may be;
	// a loopback host is allowed without being listed. Matching ignores
	// case.
	AllowHosts []string
	// Timeout bounds one delivery. The default value is 15s.
	Timeout time.Duration
	// Now is the clock of webhook-timestamp. The default value is
	// time.Now.
	Now func() time.Time
}

// Webhook is the Channel of a webhook receiver.
type Webhook struct {
	o      WebhookOptions
	u      *url.URL
	client *http.Client
}

// CheckWebhookURL checks raw as a webhook URL under allowHosts: an http
// or https URL without credentials whose host is loopback or listed;
// https unless loopback (the body names calls and sessions).
func CheckWebhookURL(raw string, allowHosts []string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("notify: webhook URL %q: want an http or https URL", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("notify: webhook URL %s: no user or password in it (the body is signed; the receiver verifies the signature)", u.Redacted())
	}
	h := u.Hostname()
	loopback := ipclass.OfHost(h) == ipclass.Loopback
	if !loopback && !slices.ContainsFunc(allowHosts, func(a string) bool { return strings.EqualFold(a, h) }) {
		return nil, fmt.Errorf("notify: webhook host %s is not in [notify] allow_hosts (%s): list it there to send it notifications", h, strings.Join(allowHosts, ", "))
	}
	if !loopback && u.Scheme != "https" {
		return nil, fmt.Errorf("notify: webhook URL %s: use https (plain http only to a loopback receiver)", u.Redacted())
	}
	return u, nil
}

// NewWebhook returns the Channel posting to o.URL; the URL must pass
// CheckWebhookURL. Redirects are never followed (an answer 3xx is a
// failure), and every connection is checked as it is dialled: never to a
// cloud metadata address, and only to loopback when the host was allowed
// for being loopback.
func NewWebhook(o WebhookOptions) (*Webhook, error) {
	u, err := CheckWebhookURL(o.URL, o.AllowHosts)
	if err != nil {
		return nil, err
	}
	if len(o.Key) == 0 {
		return nil, errors.New("notify: a webhook needs a signing secret")
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	loopbackOnly := ipclass.OfHost(u.Hostname()) == ipclass.Loopback
	dialer := &net.Dialer{Timeout: o.Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("notify: dial %s: %w", address, err)
		}
		switch c := ipclass.Of(ap.Addr()); {
		case c == ipclass.Metadata, c == ipclass.Unspecified:
			return Permanent(fmt.Errorf("notify: webhook host %s resolves to %s (%s): refused", u.Hostname(), ap.Addr(), c))
		case loopbackOnly && c != ipclass.Loopback:
			return Permanent(fmt.Errorf("notify: webhook host %s was allowed as loopback but resolves to %s: refused", u.Hostname(), ap.Addr()))
		}
		return nil
	}}
	tr := &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: o.Timeout, ResponseHeaderTimeout: o.Timeout,
		MaxIdleConns: 2, IdleConnTimeout: time.Minute, ForceAttemptHTTP2: true}
	client := &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Webhook{o: o, u: u, client: client}, nil
}

// Name implements Channel.
func (*Webhook) Name() string { return "webhook" }

// Deliver implements Channel: one signed POST. A 2xx answer is a
// delivery; 5xx, 429, 408, timeouts and connection failures are worth a
// retry; any other answer (4xx, 3xx) is Permanent.
func (w *Webhook) Deliver(ctx context.Context, n Notice) error {
	b, err := n.Body()
	if err != nil {
		return Permanent(err)
	}
	id, ts := n.ID(), w.o.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, "POST", w.u.String(), bytes.NewReader(b))
	if err != nil {
		return Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "connhost-notify")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(w.o.Key, id, ts, b))
	resp, err := w.client.Do(req)
	if err != nil {
		if IsPermanent(err) {
			return err
		}
		return fmt.Errorf("notify: POST %s: %w", w.u.Redacted(), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return nil
	case s >= 500, s == http.StatusTooManyRequests, s == http.StatusRequestTimeout:
		return fmt.Errorf("notify: POST %s answered %s", w.u.Redacted(), resp.Status)
	default:
		return Permanent(fmt.Errorf("notify: POST %s answered %s (not retried; redirects are not followed)", w.u.Redacted(), resp.Status))
	}
}
