// Package stripe is an emulator of the subset of the Stripe API
// the payments connector uses: PaymentIntents (create, retrieve, list,
// search) and refunds (create, retrieve, list), with Stripe's documented
// idempotency semantics (https://docs.stripe.com/api/idempotent_requests)
// and a search index that lags behind writes
// (https://docs.stripe.com/search#data-freshness).
//
// The Stripe surface lives under /v1/. A test-only control API under
// /_sandbox/ injects faults, moves the clock and reports statistics; it is
// never part of what a connector may rely on.
//
// A Server keeps its state in memory for its lifetime, and with Persist
// also in a file it reloads after a restart. It is safe for concurrent
// use.
package stripe

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/statefile"
)

// DefaultAPIVersion is the Stripe-Version the emulator reports when a
// request does not name one.
const DefaultAPIVersion = "2025-03-31.basil"

// Options configures a Server.
type Options struct {
	// Now returns the current time; tests inject a fake clock. Server.Advance
	// adds an offset on top of it. The default value is time.Now.
	Now func() time.Time
	// SearchLag is how long after creation an object becomes visible to
	// search (Stripe: usually under a minute, longer during incidents).
	// List and retrieve endpoints are never lagged. The default value is 0.
	SearchLag time.Duration
	// IdempotencyRetention is how long a saved idempotent result is
	// replayed; afterwards the key is pruned and a reuse runs anew (Stripe:
	// at least 24 hours). The default value is 24h.
	IdempotencyRetention time.Duration
	// MaxBodyBytes caps the request body. The default value is 1 MiB.
	MaxBodyBytes int64
	// Logger receives one line per request. The default value discards.
	Logger *slog.Logger
}

// EnsureDefaults fills in the zero fields with their documented defaults.
func (o *Options) EnsureDefaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IdempotencyRetention == 0 {
		o.IdempotencyRetention = 24 * time.Hour
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field at once.
func (o Options) Validate() error {
	var errs []error
	if o.SearchLag < 0 {
		errs = append(errs, errors.New("stripe: SearchLag must not be negative"))
	}
	if o.IdempotencyRetention < 0 {
		errs = append(errs, errors.New("stripe: IdempotencyRetention must not be negative"))
	}
	if o.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("stripe: MaxBodyBytes must not be negative"))
	}
	return errors.Join(errs...)
}

// Stats counts what the emulator did. Effects (payment intents, charges,
// refunds) count real executions only, never replays.
type Stats struct {
	Requests              int `json:"requests"`
	PaymentIntentsCreated int `json:"payment_intents_created"`
	ChargesSucceeded      int `json:"charges_succeeded"`
	ChargesDeclined       int `json:"charges_declined"`
	Refunds               int `json:"refunds"`
	Replays               int `json:"replays"`
	IdempotencyInUse      int `json:"idempotency_in_use"`
	IdempotencyMismatch   int `json:"idempotency_mismatch"`
	FaultsInjected        int `json:"faults_injected"`
}

type intent struct {
	pi       *PaymentIntent
	at       time.Time // precise creation time, for search lag
	refunded int64     // amount refunded on the latest charge
}

// Server is the emulator. It implements http.Handler.
type Server struct {
	opts    Options
	faults  *fault.Injector
	control *http.ServeMux
	api     *http.ServeMux

	mu        sync.Mutex
	offset    time.Duration
	searchLag time.Duration
	intents   []*intent // creation order
	byPI      map[string]*intent
	byCharge  map[string]*intent
	refunds   []*Refund
	byRefund  map[string]*Refund
	idem      map[string]*idemEntry
	lastSweep time.Time
	stats     Stats
	traces    []Traced

	// state is where Persist saves the state (by default in memory only).
	state statefile.File[savedState]
}

// New returns an emulator configured by opts. It panics if opts.Validate
// fails (sandbox.Start validates first and returns the error).
func New(opts Options) *Server {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	opts.EnsureDefaults()
	s := &Server{opts: opts, faults: fault.New(), searchLag: opts.SearchLag}
	s.state.Name, s.state.Empty = "stripe", "an empty provider"
	s.resetLocked()
	s.api = http.NewServeMux()
	s.api.HandleFunc("POST /v1/payment_intents", s.idempotent(s.createPaymentIntent))
	s.api.HandleFunc("GET /v1/payment_intents", s.authed(s.listPaymentIntents))
	s.api.HandleFunc("GET /v1/payment_intents/search", s.authed(s.searchPaymentIntents))
	s.api.HandleFunc("GET /v1/payment_intents/{id}", s.authed(s.getPaymentIntent))
	s.api.HandleFunc("POST /v1/refunds", s.idempotent(s.createRefund))
	s.api.HandleFunc("GET /v1/refunds", s.authed(s.listRefunds))
	s.api.HandleFunc("GET /v1/refunds/{id}", s.authed(s.getRefund))
	s.api.HandleFunc("/", s.authed(func(r *http.Request, _ string) (int, any) {
		return 404, errBody(&Error{Type: typeInvalidRequest, Message: fmt.Sprintf("Unrecognized request URL (%s: %s). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.", r.Method, r.URL.Path)})
	}))
	s.control = http.NewServeMux()
	s.faults.Register(s.control)
	s.registerControl(s.control)
	return s
}

// Faults returns the fault injector (add rules, release held requests).
func (s *Server) Faults() *fault.Injector { return s.faults }

// Close releases every held or hanging request. The state stays readable.
func (s *Server) Close() { s.faults.Close() }

// Now returns the emulator's clock: Options.Now plus every Advance.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nowLocked()
}

func (s *Server) nowLocked() time.Time { return s.opts.Now().Add(s.offset) }

// Advance moves the emulator's clock forward by d (search lag, key expiry).
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	s.offset += d
	s.mu.Unlock()
	_ = s.save() // logged; the clock is not an effect anyone waits for
}

// SetSearchLag changes how long new and existing objects stay invisible to
// search after their creation.
func (s *Server) SetSearchLag(d time.Duration) {
	s.mu.Lock()
	s.searchLag = d
	s.mu.Unlock()
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.FaultsInjected = s.faults.Injected()
	return st
}

// PaymentIntents returns every payment intent, newest first.
func (s *Server) PaymentIntents() []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PaymentIntent, 0, len(s.intents))
	for i := len(s.intents) - 1; i >= 0; i-- {
		out = append(out, *s.intents[i].pi.clone())
	}
	return out
}

// Refunds returns every refund, newest first.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, 0, len(s.refunds))
	for i := len(s.refunds) - 1; i >= 0; i-- {
		out = append(out, *s.refunds[i].clone())
	}
	return out
}

// Traced is an API request that carried a W3C trace context: the
// traceparent a caller's tracing sent, as the provider's own tracing would
// continue it.
type Traced struct {
	Method         string `json:"method"`
	Path           string `json:"path"`
	Traceparent    string `json:"traceparent"`
	Tracestate     string `json:"tracestate,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Baggage says whether the request carried a baggage header.
	Baggage bool `json:"baggage,omitempty"`
}

// maxTraced bounds the requests Traces remembers (the latest).
const maxTraced = 1000

// Traces returns the API requests that carried a traceparent header, in
// order of arrival (the latest 1000).
func (s *Server) Traces() []Traced {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Traced(nil), s.traces...)
}

// Reset forgets every object, idempotency key and counter. Fault rules,
// the clock and the search lag are kept.
func (s *Server) Reset() {
	s.mu.Lock()
	s.resetLocked()
	s.mu.Unlock()
	_ = s.save() // logged
}

func (s *Server) resetLocked() {
	s.intents = nil
	s.byPI = map[string]*intent{}
	s.byCharge = map[string]*intent{}
	s.refunds = nil
	s.byRefund = map[string]*Refund{}
	s.idem = map[string]*idemEntry{}
	s.stats = Stats{}
	s.traces = nil
}

// ServeHTTP routes the control API, applies faults and serves the Stripe
// surface.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, fault.ControlPrefix) {
		s.control.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	s.stats.Requests++
	if tp := r.Header.Get("traceparent"); tp != "" {
		if len(s.traces) == maxTraced {
			s.traces = append(s.traces[:0], s.traces[1:]...)
		}
		s.traces = append(s.traces, Traced{Method: r.Method, Path: r.URL.Path, Traceparent: tp, Tracestate: r.Header.Get("tracestate"),
			IdempotencyKey: r.Header.Get("Idempotency-Key"), Baggage: r.Header.Get("baggage") != ""})
	}
	s.mu.Unlock()
	s.faults.Serve(w, r, s.api, errorBodyFor, "stripe", s.opts.Logger)
}

// errorBodyFor renders the Stripe error answer for an injected status.
func errorBodyFor(status int) (string, []byte) {
	e := &Error{Type: typeAPI, Message: "Sorry, something went wrong. (sandbox fault)"}
	switch status {
	case http.StatusTooManyRequests:
		e = &Error{Type: typeInvalidRequest, Code: codeRateLimit, Message: "Too many requests hit the API too quickly. (sandbox fault)"}
	case http.StatusOK:
		return "application/json", []byte(`{}`)
	}
	b, _ := json.MarshalIndent(errBody(e), "", "  ")
	return "application/json", b
}

func errBody(e *Error) ErrorResponse { return ErrorResponse{Error: e} }

// handler is an endpoint: it gets the request and the caller's API key
// and returns a status and a JSON-encodable body.
type handler func(r *http.Request, apiKey string) (int, any)

// authed wraps a read-only endpoint with authentication and encoding.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, aerr := authenticate(r)
		if aerr != nil {
			s.write(w, r, aerr.status, errBody(aerr.err), nil)
			return
		}
		st, body := h(r, key)
		s.write(w, r, st, body, nil)
	}
}

func authenticate(r *http.Request) (string, *apiErr) {
	h := r.Header.Get("Authorization")
	var key string
	switch {
	case h == "":
		return "", &apiErr{status: 401, err: &Error{Type: typeInvalidRequest, Message: "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/."}}
	case strings.HasPrefix(h, "Bearer "):
		key = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	default:
		if u, _, ok := r.BasicAuth(); ok {
			key = u
		}
	}
	if !strings.HasPrefix(key, "sk_test_") || len(key) == len("sk_test_") {
		return "", &apiErr{status: 401, err: &Error{Type: typeInvalidRequest, Message: "Invalid API Key provided: " + redactKey(key)}}
	}
	return key, nil
}

func redactKey(k string) string {
	if len(k) <= 12 {
		return strings.Repeat("*", len(k))
	}
	return k[:8] + strings.Repeat("*", len(k)-12) + k[len(k)-4:]
}

// write encodes body (unless raw is set) and answers with Stripe's headers.
func (s *Server) write(w http.ResponseWriter, r *http.Request, status int, body any, raw []byte) {
	if raw == nil {
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			status = 500
			b = []byte(`{"error":{"type":"api_error","message":"encoding failed"}}`)
		}
		raw = append(b, '\n')
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if h.Get("Request-Id") == "" {
		h.Set("Request-Id", newID("req_"))
	}
	h.Set("Stripe-Version", apiVersion(r))
	if k := r.Header.Get("Idempotency-Key"); k != "" && r.Method == http.MethodPost {
		h.Set("Idempotency-Key", k)
	}
	w.WriteHeader(status)
	_, _ = w.Write(raw)
	s.opts.Logger.Debug("stripe sandbox", "method", r.Method, "path", r.URL.Path, "status", status)
}

func apiVersion(r *http.Request) string {
	if v := r.Header.Get("Stripe-Version"); v != "" {
		return v
	}
	return DefaultAPIVersion
}

// readForm decodes the request's parameters: the body for POST, the query
// string otherwise.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request) (url.Values, *apiErr) {
	if r.Method != http.MethodPost {
		return r.URL.Query(), nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		return nil, invalid("", "", "Could not read the request body: %v", err)
	}
	vals, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, invalid("", "", "Invalid request body: %v", err)
	}
	for k, v := range r.URL.Query() {
		vals[k] = append(vals[k], v...)
	}
	return vals, nil
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix plus 24 random base62 characters, like Stripe's ids.
func newID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b[:])
}

func limitParam(q url.Values) (int, *apiErr) {
	s := q.Get("limit")
	if s == "" {
		return 10, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 100 {
		return 0, invalid("limit", "", "Invalid integer: %s. limit must be between 1 and 100.", s)
	}
	return n, nil
}

// page applies starting_after / ending_before / limit to ids (newest first).
func page[T any](q url.Values, items []T, id func(T) string) ([]T, bool, *apiErr) {
	limit, aerr := limitParam(q)
	if aerr != nil {
		return nil, false, aerr
	}
	if before := q.Get("ending_before"); before != "" {
		end := indexOf(items, id, before)
		if end < 0 {
			return nil, false, invalid("ending_before", codeResourceMissing, "No such object: '%s'", before)
		}
		start := max(0, end-limit)
		return items[start:end], start > 0, nil
	}
	start := 0
	if after := q.Get("starting_after"); after != "" {
		i := indexOf(items, id, after)
		if i < 0 {
			return nil, false, invalid("starting_after", codeResourceMissing, "No such object: '%s'", after)
		}
		start = i + 1
	}
	end := min(len(items), start+limit)
	return items[start:end], end < len(items), nil
}

func indexOf[T any](items []T, id func(T) string, want string) int {
	for i, it := range items {
		if id(it) == want {
			return i
		}
	}
	return -1
}

func encodePage(off int) string {
	return "page_" + base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(off)))
}

func decodePage(p string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(p, "page_"))
	if err != nil || !strings.HasPrefix(p, "page_") {
		return 0, false
	}
	n, err := strconv.Atoi(string(b))
	return n, err == nil && n >= 0
}

// checkpoint is where an endpoint "begins executing" (see fault.Hold).
func (s *Server) checkpoint(ctx context.Context) bool { return s.faults.Checkpoint(ctx) }
