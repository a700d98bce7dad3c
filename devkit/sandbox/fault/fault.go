// Package fault injects provider failures into the sandbox emulators.
//
// A Rule names what goes wrong (Kind), which requests it hits (Method, Path)
// and how many times (Count). Rules never touch the test-only control API
// under /_sandbox/. Whether the emulated effect is performed is decided by
// Rule.Apply: with Apply false the request never reaches the endpoint, so the
// provider saw nothing; with Apply true the endpoint runs to completion (the
// effect happens and, for Stripe, the idempotency result is saved) and only
// the answer on the wire is damaged — the crash window in which the provider
// applied the call but the client did not hear about it.
//
// An Injector is safe for concurrent use.
package fault

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Kind names a failure mode.
type Kind string

// The failure modes. See Rule.Apply for whether the effect is performed.
const (
	// Status answers Rule.Status (default 500) with the emulator's error
	// body for that status (JSON for Stripe, text for Mailpit).
	Status Kind = "status"
	// HTML answers Rule.Status (default 502) with an HTML error page, as a
	// proxy in front of the provider would.
	HTML Kind = "html"
	// Truncated answers 200 with a JSON body cut in half, then closes the
	// connection. With Apply the real response is cut.
	Truncated Kind = "truncated"
	// Huge answers 200 with a syntactically valid JSON body of Rule.Size
	// bytes (default 16 MiB) to exercise the client's size cap.
	Huge Kind = "huge"
	// Hang waits Rule.Delay (zero: until the client goes away or the
	// server closes) before answering. Without Apply it then answers 504
	// and performs nothing; with Apply the effect is performed first and
	// the real response is written after the wait, if anyone still listens.
	Hang Kind = "hang"
	// Drop closes the connection without an answer. With Apply the effect
	// is performed first.
	Drop Kind = "drop"
	// Hold blocks the request once the endpoint has begun executing (for
	// Stripe: after the idempotency key is claimed, so a duplicate sees
	// 409 idempotency_key_in_use) until Injector.Release is called or the
	// server closes. Apply is ignored: the request then completes normally.
	// Only endpoints with an effect (POST) have that point; a read is
	// served normally.
	Hold Kind = "hold"
	// ExecError makes the endpoint fail with 500 after it has begun
	// executing but before any effect. For Stripe the 500 is saved under
	// the idempotency key and replayed to retries, as Stripe documents.
	// Like Hold it only affects endpoints with an effect (POST).
	ExecError Kind = "exec_error"
)

// Duration is a time.Duration that reads and writes JSON as "1.5s".
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler; it accepts "1.5s" or nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("fault: duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("fault: duration must be a string like \"2s\" or nanoseconds")
	}
	*d = Duration(n)
	return nil
}

// Rule is one injected failure.
type Rule struct {
	// Kind is the failure mode. Required.
	Kind Kind `json:"kind"`
	// Method restricts the rule to one HTTP method. The default value ""
	// matches every method.
	Method string `json:"method,omitempty"`
	// Path restricts the rule to request paths with this prefix. The
	// default value "" matches every path outside /_sandbox/.
	Path string `json:"path,omitempty"`
	// Count is how many matching requests the rule affects. The default
	// value 0 means 1; a negative value means every matching request
	// until the rule is cleared.
	Count int `json:"count,omitempty"`
	// Apply performs the effect before damaging the answer (see the
	// package comment). The default value is false.
	Apply bool `json:"apply,omitempty"`
	// Status is the HTTP status for Status (default 500) and HTML
	// (default 502).
	Status int `json:"status,omitempty"`
	// Delay is how long Hang waits. The default value 0 waits until the
	// client disconnects or the server closes.
	Delay Duration `json:"delay,omitempty"`
	// Size is the body size for Huge. The default value is 16 MiB.
	Size int `json:"size,omitempty"`
}

// Validate reports every problem with r at once.
func (r Rule) Validate() error {
	var errs []error
	switch r.Kind {
	case Status, HTML, Truncated, Huge, Hang, Drop, Hold, ExecError:
	case "":
		errs = append(errs, errors.New("fault: kind is required"))
	default:
		errs = append(errs, fmt.Errorf("fault: unknown kind %q", r.Kind))
	}
	if r.Status != 0 && (r.Status < 100 || r.Status > 599) {
		errs = append(errs, fmt.Errorf("fault: status %d out of range", r.Status))
	}
	if r.Delay < 0 {
		errs = append(errs, errors.New("fault: delay must not be negative"))
	}
	if r.Size < 0 {
		errs = append(errs, errors.New("fault: size must not be negative"))
	}
	if strings.HasPrefix(r.Path, ControlPrefix) {
		errs = append(errs, fmt.Errorf("fault: path %q is the control API", r.Path))
	}
	return errors.Join(errs...)
}

// PreExecution reports whether the rule answers without running the
// endpoint at all (so the provider records nothing, and Stripe saves no
// idempotency result).
func (r Rule) PreExecution() bool {
	switch r.Kind {
	case Hold, ExecError:
		return false
	}
	return !r.Apply
}

func (r Rule) matches(method, path string) bool {
	if strings.HasPrefix(path, ControlPrefix) {
		return false
	}
	if r.Method != "" && !strings.EqualFold(r.Method, method) {
		return false
	}
	return strings.HasPrefix(path, r.Path)
}

// ControlPrefix is the path prefix of the test-only control API. Faults
// never apply to it.
const ControlPrefix = "/_sandbox/"

type entry struct {
	rule Rule
	left int // < 0: unlimited
}

// Injector holds the active rules. The zero value is not usable; call New.
type Injector struct {
	mu       sync.Mutex
	rules    []*entry
	injected int
	held     int
	release  chan struct{} // closed by Release, replaced afterwards
	closed   chan struct{}
	once     sync.Once
	heldCond chan struct{} // closed and replaced whenever held changes
}

// New returns an Injector with no rules.
func New() *Injector {
	return &Injector{
		release:  make(chan struct{}),
		closed:   make(chan struct{}),
		heldCond: make(chan struct{}),
	}
}

// Add installs r after the existing rules. Rules are tried in order and
// the first match is consumed.
func (in *Injector) Add(r Rule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	left := r.Count
	if left == 0 {
		left = 1
	}
	in.mu.Lock()
	in.rules = append(in.rules, &entry{rule: r, left: left})
	in.mu.Unlock()
	return nil
}

// Clear removes every rule. Held requests stay held until Release.
func (in *Injector) Clear() {
	in.mu.Lock()
	in.rules = nil
	in.mu.Unlock()
}

// Rules returns the active rules with their remaining counts in Count.
func (in *Injector) Rules() []Rule {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]Rule, 0, len(in.rules))
	for _, e := range in.rules {
		r := e.rule
		r.Count = e.left
		out = append(out, r)
	}
	return out
}

// Injected returns how many requests a rule has hit so far.
func (in *Injector) Injected() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.injected
}

// Take consumes one use of the first rule that matches the request and
// returns it.
func (in *Injector) Take(method, path string) (Rule, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, e := range in.rules {
		if !e.rule.matches(method, path) {
			continue
		}
		if e.left > 0 {
			e.left--
			if e.left == 0 {
				in.rules = append(in.rules[:i:i], in.rules[i+1:]...)
			}
		}
		in.injected++
		return e.rule, true
	}
	return Rule{}, false
}

// Held returns how many requests are blocked by a Hold rule right now.
func (in *Injector) Held() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.held
}

// WaitHeld blocks until at least n requests are held or ctx is done.
func (in *Injector) WaitHeld(ctx context.Context, n int) error {
	for {
		in.mu.Lock()
		held, changed := in.held, in.heldCond
		in.mu.Unlock()
		if held >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("fault: waiting for %d held requests (have %d): %w", n, held, ctx.Err())
		}
	}
}

// Release lets every currently held request continue.
func (in *Injector) Release() {
	in.mu.Lock()
	close(in.release)
	in.release = make(chan struct{})
	in.mu.Unlock()
}

// Close releases held and hanging requests for good; later Hold and Hang
// rules do not block.
func (in *Injector) Close() {
	in.once.Do(func() { close(in.closed) })
}

func (in *Injector) setHeld(delta int) {
	in.mu.Lock()
	in.held += delta
	close(in.heldCond)
	in.heldCond = make(chan struct{})
	in.mu.Unlock()
}

type ctxKey struct{}

// WithRule returns a context that carries r to Checkpoint.
func WithRule(ctx context.Context, r Rule) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// Checkpoint is called by an endpoint at the moment it begins executing.
// For a Hold rule it blocks until Release; it returns true when an
// ExecError rule asks the endpoint to fail with 500 before any effect.
func (in *Injector) Checkpoint(ctx context.Context) (fail bool) {
	r, ok := ctx.Value(ctxKey{}).(Rule)
	if !ok {
		return false
	}
	switch r.Kind {
	case Hold:
		in.mu.Lock()
		rel := in.release
		in.mu.Unlock()
		in.setHeld(1)
		defer in.setHeld(-1)
		select {
		case <-rel:
		case <-in.closed:
		}
	case ExecError:
		return true
	}
	return false
}

// ErrorBody renders an emulator's error answer for a status code.
type ErrorBody func(status int) (contentType string, body []byte)

// Serve answers one request of an emulator whose endpoints are api: a
// request without a matching rule reaches api untouched; one hit by a rule
// is answered as the rule says — before the endpoint runs (ServePre), by
// the endpoint itself for hold and exec_error (which it reads from the
// request context via Checkpoint), or by the endpoint and then damaged on
// the way out (ServePost). logger, when set, records each fault under name.
func (in *Injector) Serve(w http.ResponseWriter, r *http.Request, api http.Handler, errBody ErrorBody, name string, logger *slog.Logger) {
	rule, hit := in.Take(r.Method, r.URL.Path)
	if !hit {
		api.ServeHTTP(w, r)
		return
	}
	if logger != nil {
		logger.Info(name+" sandbox: fault", "method", r.Method, "path", r.URL.Path, "kind", rule.Kind, "apply", rule.Apply)
	}
	if rule.PreExecution() {
		in.ServePre(w, r, rule, errBody)
		return
	}
	r = r.WithContext(WithRule(r.Context(), rule))
	if rule.Kind == Hold || rule.Kind == ExecError {
		api.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, r)
	in.ServePost(w, r, rule, rec, errBody)
}

// ServePre answers a request hit by a pre-execution rule (see
// Rule.PreExecution) without running the endpoint.
func (in *Injector) ServePre(w http.ResponseWriter, r *http.Request, rule Rule, errBody ErrorBody) {
	switch rule.Kind {
	case Status:
		writeStatus(w, rule, errBody)
	case HTML:
		writeHTML(w, rule)
	case Truncated:
		writeTruncated(w, http.StatusOK, []byte(`{"id":"sandbox_truncated","object":"`))
	case Huge:
		writeHuge(w, rule)
	case Hang:
		in.hang(r.Context(), rule)
		if r.Context().Err() != nil {
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = w.Write([]byte("504 gateway timeout (sandbox fault)\n"))
	case Drop:
		drop(w)
	}
}

// ServePost damages the real response rec of an endpoint that has already
// run (rule.Apply was true) and writes the result to w.
func (in *Injector) ServePost(w http.ResponseWriter, r *http.Request, rule Rule, rec *httptest.ResponseRecorder, errBody ErrorBody) {
	switch rule.Kind {
	case Status:
		writeStatus(w, rule, errBody)
	case HTML:
		writeHTML(w, rule)
	case Truncated:
		copyHeader(w, rec)
		body := rec.Body.Bytes()
		writeTruncated(w, rec.Code, body[:len(body)/2])
	case Huge:
		writeHuge(w, rule)
	case Hang:
		in.hang(r.Context(), rule)
		if r.Context().Err() != nil {
			return
		}
		Copy(w, rec)
	case Drop:
		drop(w)
	default:
		Copy(w, rec)
	}
}

// Copy writes a recorded response to w unchanged.
func Copy(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	copyHeader(w, rec)
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func copyHeader(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
}

func (in *Injector) hang(ctx context.Context, rule Rule) {
	var timer <-chan time.Time
	if rule.Delay > 0 {
		t := time.NewTimer(time.Duration(rule.Delay))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
	case <-ctx.Done():
	case <-in.closed:
	}
}

// writeStatus answers the rule's status (500 when unset) with the
// provider's error body for it.
func writeStatus(w http.ResponseWriter, rule Rule, errBody ErrorBody) {
	st := rule.Status
	if st == 0 {
		st = http.StatusInternalServerError
	}
	ct, b := errBody(st)
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(st)
	_, _ = w.Write(b)
}

func writeHTML(w http.ResponseWriter, rule Rule) {
	st := rule.Status
	if st == 0 {
		st = http.StatusBadGateway
	}
	text := fmt.Sprintf("%d %s", st, http.StatusText(st))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(st)
	_, _ = fmt.Fprintf(w, "<html>\r\n<head><title>%s</title></head>\r\n<body>\r\n<center><h1>%s</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", text, text)
}

// writeTruncated promises more bytes than it sends and then cuts the
// connection, so the client sees an unexpected EOF.
func writeTruncated(w http.ResponseWriter, status int, part []byte) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(part)*2+16))
	w.WriteHeader(status)
	_, _ = w.Write(part)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	drop(w)
}

func writeHuge(w http.ResponseWriter, rule Rule) {
	size := rule.Size
	if size == 0 {
		size = 16 << 20
	}
	const head, tail = `{"object":"padding","padding":"`, `"}`
	pad := max(size-len(head)-len(tail), 0)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(head)+pad+len(tail)))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString(head)
	chunk := []byte(strings.Repeat("x", 32<<10))
	for pad > 0 {
		n := min(pad, len(chunk))
		if _, err := bw.Write(chunk[:n]); err != nil {
			return
		}
		pad -= n
	}
	_, _ = bw.WriteString(tail)
	_ = bw.Flush()
}

// drop closes the underlying connection without a (complete) response.
func drop(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	conn, _, err := rc.Hijack()
	if err != nil {
		// Not hijackable (HTTP/2, recorder): abort the handler instead;
		// net/http then resets the stream / closes the connection.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
