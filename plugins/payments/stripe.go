package main

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/codec"
	"github.com/connhost/connhost/abi/guest"
)

// stripeVersion pins the API version of every request (Stripe-Version
// header), so a change of the account's default version cannot change the
// shapes this connector parses.
const stripeVersion = "2024-06-20"

// defaultBaseURL is used when the host has no "base_url" configured.
const defaultBaseURL = "https://api.stripe.com"

// Metadata keys the connector writes on every object it creates. Reconcile
// finds an earlier call's effect by metaKey; metaExecution is for humans
// reading the Stripe dashboard.
const (
	metaKey       = "connhost_key"
	metaExecution = "connhost_execution_id"
)

// maxKeyLen is Stripe's limit on Idempotency-Key values. A longer key cannot
// be handed to Stripe unchanged, and a changed key would not deduplicate.
const maxKeyLen = 255

// client is a Stripe API client bound to one call. It reaches Stripe only
// through the host's HTTP capability.
type client struct {
	call   *guest.Call
	base   string // scheme://host[:port][/prefix], no trailing slash
	apiKey string
}

// newStripe reads the connector's config. A missing base_url means the
// production API; a missing api_key is an error.
func newStripe(c *guest.Call) (*client, error) {
	base, err := c.Config("base_url")
	switch {
	case errors.Is(err, guest.ErrConfigNotSet) || (err == nil && base == ""):
		base = defaultBaseURL
	case err != nil:
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("config base_url %q is not an http(s) origin", base)
	}
	key, err := c.Config("api_key")
	if err != nil {
		return nil, err
	}
	if key == "" || strings.ContainsAny(key, "\r\n ") {
		return nil, errors.New("config api_key is empty or malformed")
	}
	return &client{call: c, base: strings.TrimRight(base, "/"), apiKey: key}, nil
}

// send performs one request. query, when non-empty, is the encoded URL
// query; form, when non-nil, is the form-encoded body; idemKey, when
// non-empty, is sent as Idempotency-Key.
func (s *client) send(method, path, query string, form []byte, idemKey string) abi.HTTPResponse {
	u := s.base + path
	if query != "" {
		u += "?" + query
	}
	h := make([]abi.Header, 3, 5)
	h[0] = abi.Header{Name: "Authorization", Value: "Bearer " + s.apiKey}
	h[1] = abi.Header{Name: "Stripe-Version", Value: stripeVersion}
	h[2] = abi.Header{Name: "Accept", Value: "application/json"}
	if form != nil {
		h = append(h, abi.Header{Name: "Content-Type", Value: "application/x-www-form-urlencoded"})
	}
	if idemKey != "" {
		h = append(h, abi.Header{Name: "Idempotency-Key", Value: idemKey})
	}
	return s.call.HTTP(abi.HTTPRequest{Method: method, URL: u, Header: h, Body: form})
}

// apiError is what the connector reads of Stripe's error body:
// {"error":{"type","code","message",…}}.
type apiError struct {
	Type          string
	Code          string
	DeclineCode   string
	Message       string
	Param         string
	PaymentIntent *struct{ ID, Status string }
}

// decodeAPIError reads a Stripe error body; ok is false for anything else
// (not JSON, no "error" object).
func decodeAPIError(body []byte) (e apiError, ok bool) {
	err := codec.DecodeObject(body, func(name string, v *codec.Value) error {
		if name != "error" {
			return nil
		}
		ok = v.Kind() == codec.KindObject
		return v.Object(e.member)
	})
	return e, ok && err == nil
}

func (e *apiError) member(name string, v *codec.Value) error {
	switch name {
	case "type":
		return v.String(&e.Type)
	case "code":
		return v.String(&e.Code)
	case "decline_code":
		return v.String(&e.DeclineCode)
	case "message":
		return v.String(&e.Message)
	case "param":
		return v.String(&e.Param)
	case "payment_intent":
		if v.Kind() == codec.KindNull {
			e.PaymentIntent = nil
			return v.Skip()
		}
		if e.PaymentIntent == nil {
			e.PaymentIntent = new(struct{ ID, Status string })
		}
		pi := e.PaymentIntent
		return v.Object(func(name string, v *codec.Value) error {
			switch name {
			case "id":
				return v.String(&pi.ID)
			case "status":
				return v.String(&pi.Status)
			}
			return nil
		})
	}
	return nil
}

// failure is a request that did not produce a usable 2xx answer.
type failure struct {
	kind failureKind
	msg  string
}

// failureKind is what a failed request tells about its effect.
type failureKind uint8

const (
	// permanent: nothing happened and repeating the request cannot help
	// (declined card, invalid request, 401/403/404, allowlist denial).
	permanent failureKind = iota
	// notApplied: Stripe refused before acting (rate limit, lock timeout,
	// a read that failed); the same request may be sent again.
	notApplied
	// uncertain: the request may have taken effect — a POST whose answer
	// was lost, cut, oversized or a 5xx (Stripe: a 500's result is
	// indeterminate). The retry carries the same Idempotency-Key, so
	// Stripe replays instead of acting twice while it keeps the key.
	uncertain
	// inProgress: 409 idempotency_key_in_use, the first request with the
	// key is still executing at Stripe.
	inProgress
	// misuse: Stripe answered idempotency_error — the key was already used
	// with other parameters. A connhost bug or a key collision; loud.
	misuse
)

// check classifies resp. It returns ok when resp is a 2xx response the
// caller should decode. mutating says whether the request was a POST that
// may have taken effect: for those, every answer that leaves the outcome
// open (timeout, network error, 5xx, oversized or unreadable body) is
// uncertain, never "retryable": the host must not believe nothing happened.
func check(resp abi.HTTPResponse, mutating bool) (failure, bool) {
	open := notApplied // an answer that leaves the outcome open
	if mutating {
		open = uncertain
	}
	switch resp.Err {
	case abi.HTTPOK:
	case abi.HTTPDenied:
		return failure{msg: "stripe: request denied by the connector's http allowlist: " + resp.Message}, false
	case abi.HTTPInvalid:
		// Also what the guest SDK reports when the host's response
		// envelope does not decode — after the request was performed.
		k := permanent
		if mutating {
			k = uncertain
		}
		return failure{kind: k, msg: "stripe: request or response envelope invalid: " + resp.Message}, false
	case abi.HTTPTimeout, abi.HTTPNetwork:
		return failure{kind: open, msg: fmt.Sprintf("stripe: %s: %s", resp.Err, resp.Message)}, false
	case abi.HTTPTooLarge:
		k := permanent
		if mutating {
			k = uncertain
		}
		return failure{kind: k, msg: "stripe: response body over the host's size cap: " + resp.Message}, false
	default:
		return failure{msg: fmt.Sprintf("stripe: http error %s: %s", resp.Err, resp.Message)}, false
	}
	if resp.Status >= 200 && resp.Status < 300 {
		return failure{}, true
	}
	f := failure{kind: permanent}
	switch {
	case resp.Status == 409 && mutating:
		f.kind = inProgress
	case resp.Status == 409 || resp.Status == 429:
		f.kind = notApplied
	case resp.Status >= 500:
		f.kind = open
	}
	e, ok := decodeAPIError(resp.Body)
	if !ok {
		f.msg = fmt.Sprintf("stripe: HTTP %d with a non-Stripe body (%s, %d bytes)%s",
			resp.Status, contentType(resp), len(resp.Body), requestID(resp))
		return f, false
	}
	f.msg = fmt.Sprintf("stripe: HTTP %d %s", resp.Status, e.Type)
	if e.Code != "" {
		f.msg += "/" + e.Code
	}
	if e.DeclineCode != "" {
		f.msg += "/" + e.DeclineCode
	}
	if e.Param != "" {
		f.msg += " param " + e.Param
	}
	if e.Message != "" {
		f.msg += ": " + clip(e.Message, 300)
	}
	if pi := e.PaymentIntent; pi != nil && pi.ID != "" {
		f.msg += fmt.Sprintf(" (payment_intent %s status %s)", pi.ID, pi.Status)
	}
	f.msg += requestID(resp)
	switch {
	case e.Code == "idempotency_key_in_use" && mutating:
		// The first request with this key is still executing.
		f.kind = inProgress
	case e.Code == "lock_timeout" || e.Type == "rate_limit_error" || e.Code == "rate_limit":
		// A lock or a rate limiter ran before the endpoint executed:
		// nothing was saved for this attempt, the same key may be retried.
		f.kind = notApplied
	case e.Type == "idempotency_error":
		f.kind = misuse
	case e.Type == "api_error":
		f.kind = open
	}
	return f, false
}

// executeFailure turns a failure into an execute/execute_with_key outcome.
func executeFailure(c *guest.Call, f failure) abi.Outcome {
	switch f.kind {
	case misuse:
		c.Error(c.Operation + ": Stripe rejected the idempotency key as reused with different parameters; " +
			"the key must map to exactly one request: " + f.msg)
		return guest.Permanent("%s", f.msg)
	case notApplied:
		return guest.Retryable("%s", f.msg)
	case uncertain:
		return guest.Uncertain("%s", f.msg)
	case inProgress:
		return guest.InProgress("%s", f.msg)
	default:
		return guest.Permanent("%s", f.msg)
	}
}

func contentType(resp abi.HTTPResponse) string {
	if ct := resp.Get("Content-Type"); ct != "" {
		return clip(ct, 60)
	}
	return "no content type"
}

func requestID(resp abi.HTTPResponse) string {
	if id := resp.Get("Request-Id"); id != "" {
		return " [request-id " + clip(id, 80) + "]"
	}
	return ""
}

// clip shortens s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return strings.ToValidUTF8(s, "")
}

// checkKey validates the idempotency key the host handed over.
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("no idempotency key: this operation must be called through execute_with_key or reconcile")
	case len(key) > maxKeyLen:
		return fmt.Errorf("idempotency key is %d bytes, Stripe accepts at most %d", len(key), maxKeyLen)
	case strings.ContainsAny(key, "\r\n"):
		return errors.New("idempotency key contains a line break")
	}
	return nil
}

// validID reports whether id looks like a Stripe object id with prefix.
func validID(id, prefix string) bool {
	if !strings.HasPrefix(id, prefix) || len(id) <= len(prefix) || len(id) > 255 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// searchString quotes s for Stripe's search query language.
func searchString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, `'`, `\'`) + "'"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
