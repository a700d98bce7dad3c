package stripe_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

const testKey = "sk_test_connhost"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

type env struct {
	t   *testing.T
	srv *stripe.Server
	url string
}

func newEnv(t *testing.T, opts stripe.Options) *env {
	t.Helper()
	if opts.Now == nil {
		c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		opts.Now = c.Now
	}
	srv := stripe.New(opts)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return &env{t: t, srv: srv, url: hs.URL}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) errObj(t *testing.T) stripe.Error {
	t.Helper()
	var e stripe.ErrorResponse
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil {
		t.Fatalf("not a Stripe error (%d): %s", r.status, r.body)
	}
	return *e.Error
}

func (r resp) pi(t *testing.T) stripe.PaymentIntent {
	t.Helper()
	var pi stripe.PaymentIntent
	if err := json.Unmarshal(r.body, &pi); err != nil || pi.Object != "payment_intent" {
		t.Fatalf("not a payment_intent (%d): %s", r.status, r.body)
	}
	return pi
}

type req struct {
	method string
	path   string
	form   string // already encoded, order preserved
	key    string // idempotency key
	apiKey string // default testKey; "-" for none
	header map[string]string
}

func (e *env) do(r req) resp {
	e.t.Helper()
	return e.doCtx(context.Background(), r)
}

func (e *env) doCtx(ctx context.Context, r req) resp {
	e.t.Helper()
	res, err := e.try(ctx, r)
	if err != nil {
		e.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	return res
}

func (e *env) try(ctx context.Context, r req) (resp, error) {
	method := r.method
	if method == "" {
		method = "POST"
	}
	var body io.Reader
	target := e.url + r.path
	if method == "POST" {
		body = strings.NewReader(r.form)
	} else if r.form != "" {
		target += "?" + r.form
	}
	hr, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return resp{}, err
	}
	if method == "POST" {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	switch r.apiKey {
	case "":
		hr.Header.Set("Authorization", "Bearer "+testKey)
	case "-":
	default:
		hr.Header.Set("Authorization", "Bearer "+r.apiKey)
	}
	if r.key != "" {
		hr.Header.Set("Idempotency-Key", r.key)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{status: res.StatusCode, header: res.Header}, err
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}, nil
}

// createPI is a confirmed $20 card payment carrying an execution id.
func createPI(execID string) string {
	return "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[connhost_execution_id]=" + url.QueryEscape(execID)
}

func (e *env) listPIs() []stripe.PaymentIntent {
	e.t.Helper()
	r := e.do(req{method: "GET", path: "/v1/payment_intents", form: "limit=100"})
	var l stripe.List[stripe.PaymentIntent]
	if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 {
		e.t.Fatalf("list: %d %s", r.status, r.body)
	}
	return l.Data
}

func (e *env) search(q string) stripe.SearchResult[stripe.PaymentIntent] {
	e.t.Helper()
	r := e.do(req{method: "GET", path: "/v1/payment_intents/search", form: "query=" + url.QueryEscape(q)})
	var s stripe.SearchResult[stripe.PaymentIntent]
	if err := json.Unmarshal(r.body, &s); err != nil || r.status != 200 {
		e.t.Fatalf("search %q: %d %s", q, r.status, r.body)
	}
	return s
}
