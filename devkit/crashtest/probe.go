package crashtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/connhost/connhost/manifests"
)

// ErrNoArgs is what ConfigProbe.Args returns for an operation its config
// gives no sample arguments: they must come from elsewhere (--args).
var ErrNoArgs = errors.New("crashtest: the probe config gives no sample arguments for this operation")

// ConfigProbe observes a provider the way a ProbeConfig says: it serves a
// proxy in front of the provider (the URL the connector is handed), which
// can hold a request and counts answers, and it asks the provider's own
// API how many effects it holds, whether a receipt exists, and for the
// objects sample arguments name. It implements Options' Effects,
// CheckReceipt and Args, ReceiptOwner (what the requests of the cell's
// call named) and HeldAnswerer. It is safe for concurrent use.
//
// The proxy forwards every request whole, whether or not its client is
// still there when the provider answers, the way a provider that has
// received a request goes on with it: a request is forwarded once it has
// been read to its end, never before.
type ConfigProbe struct {
	cfg    *ProbeConfig
	base   string // the provider URL, without a trailing slash
	prefix string // its path, which the proxy strips before matching
	client *http.Client
	ln     net.Listener
	srv    *http.Server
	closed chan struct{}
	once   sync.Once

	mu      sync.Mutex
	armed   *RequestPattern // the next request matching it is held
	held    int             // requests held now
	release chan struct{}   // closed by Release
	answer  chan int        // the last held request's answer, once forwarded
	answers map[string]int  // counted answers per operation
	unique  string          // the token of the cell whose Args ran last
	// cellOp is the operation of the cell under way (StartCell); named
	// holds what its effect's requests named: their path segments, and
	// the values of the provider's 2xx answers to them.
	cellOp string
	named  map[string]bool
	// captureOp is the operation whose next 2xx effectful request is kept
	// in captured (CaptureNext).
	captureOp string
	captured  *capturedRequest
}

// capturedRequest is a request of the connector as the proxy received it.
type capturedRequest struct {
	method, rel, query string
	header             http.Header
	body               []byte
}

// StartProbe starts the proxy of cfg in front of providerURL on a free
// loopback port. Close stops it.
func StartProbe(cfg *ProbeConfig, providerURL string) (*ConfigProbe, error) {
	u, err := url.Parse(providerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("crashtest: provider URL %q is not an absolute http or https URL", providerURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("crashtest: probe proxy: %w", err)
	}
	p := &ConfigProbe{
		cfg:    cfg,
		base:   strings.TrimSuffix(providerURL, "/"),
		prefix: strings.TrimSuffix(u.Path, "/"),
		client: &http.Client{
			Timeout:   2 * time.Minute,
			Transport: &http.Transport{DisableCompression: true, Proxy: nil, MaxIdleConnsPerHost: 8},
			// The connector sees the provider's redirects, as it would
			// without the proxy.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		ln:      ln,
		closed:  make(chan struct{}),
		release: make(chan struct{}),
		answers: map[string]int{},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL returns the proxy's URL: the provider URL's path on the proxy's
// origin. The connector is handed it in place of the provider's.
func (p *ConfigProbe) URL() string { return "http://" + p.ln.Addr().String() + p.prefix }

// Close stops the proxy. A request still held is answered 503 without
// reaching the provider.
func (p *ConfigProbe) Close() error {
	p.once.Do(func() { close(p.closed) })
	return p.srv.Close()
}

// hopHeaders are not forwarded (RFC 9110, 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *ConfigProbe) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "crashtest probe proxy: read the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	rel := strings.TrimPrefix(r.URL.Path, p.prefix)
	if rel == "" {
		rel = "/"
	}
	var answered chan int
	p.mu.Lock()
	if p.armed.Match(r.Method, rel) {
		p.armed = nil
		p.held++
		answered = make(chan int, 1)
		p.answer = answered
	}
	release := p.release
	p.mu.Unlock()
	if answered != nil {
		// Received in full, not yet at the provider: it goes on when
		// released, whatever its client does meanwhile.
		select {
		case <-release:
		case <-p.closed:
			http.Error(w, "crashtest probe proxy: closed while holding the request", http.StatusServiceUnavailable)
			answered <- 0
			return
		}
		p.mu.Lock()
		p.held--
		p.mu.Unlock()
	}
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.base+rel+querySuffix(r.URL.RawQuery), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "crashtest probe proxy: "+err.Error(), http.StatusBadGateway)
		if answered != nil {
			answered <- 0
		}
		return
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, "crashtest probe proxy: the provider did not answer: "+err.Error(), http.StatusBadGateway)
		if answered != nil {
			answered <- 0
		}
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, "crashtest probe proxy: the provider's answer broke off: "+err.Error(), http.StatusBadGateway)
		if answered != nil {
			answered <- 0
		}
		return
	}
	p.count(r.Method, rel, resp)
	p.record(r.Method, rel, resp, answer)
	p.capture(r, rel, body, resp.StatusCode)
	if answered != nil {
		answered <- resp.StatusCode
	}
	for k, vs := range resp.Header {
		if !containsFold(hopHeaders, k) {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

func querySuffix(q string) string {
	if q == "" {
		return ""
	}
	return "?" + q
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// count adds a 2xx answer to the operations that count it.
func (p *ConfigProbe) count(method, rel string, resp *http.Response) {
	if resp.StatusCode/100 != 2 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, op := range p.cfg.Operations {
		e := op.Effects
		if !e.Answers.Match(method, rel) {
			continue
		}
		if e.UnlessHeader != "" && strings.EqualFold(strings.TrimSpace(resp.Header.Get(e.UnlessHeader)), e.UnlessValue) {
			continue
		}
		p.answers[name]++
	}
}

// effectRequest is the request that takes op's effect: its hold pattern,
// else the requests its effects' answers count; nil when the config names
// neither.
func (op *ProbeOperation) effectRequest() *RequestPattern {
	if op.Hold != nil {
		return op.Hold
	}
	return op.Effects.Answers
}

// record notes what a request of the cell's operation that takes its
// effect names: the segments of its path (a delete's object), and, when
// the provider answered 2xx, every string and number of its JSON answer
// and the path of its Location header (a created object's id).
func (p *ConfigProbe) record(method, rel string, resp *http.Response, answer []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	op := p.cfg.Operations[p.cellOp]
	if op == nil || p.named == nil || !op.effectRequest().Match(method, rel) {
		return
	}
	segments := func(path string) {
		for _, seg := range strings.Split(path, "/") {
			if v, err := url.PathUnescape(seg); err == nil && v != "" {
				p.named[v] = true
			}
		}
	}
	segments(rel)
	if resp.StatusCode/100 != 2 {
		return
	}
	if loc, err := url.Parse(resp.Header.Get("Location")); err == nil {
		segments(loc.Path)
	}
	if len(answer) > 8<<20 {
		return
	}
	if strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		// Forwarded as the provider sent it (the connector asked for
		// gzip); read here unzipped.
		zr, err := gzip.NewReader(bytes.NewReader(answer))
		if err != nil {
			return
		}
		if answer, err = io.ReadAll(io.LimitReader(zr, 8<<20)); err != nil {
			return
		}
	}
	if v, err := decodeJSON(answer); err == nil {
		leaves(v, func(s string) { p.named[s] = true })
	}
}

// leaves calls f with every string and number in a decoded JSON value.
func leaves(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case json.Number:
		f(x.String())
	case []any:
		for _, e := range x {
			leaves(e, f)
		}
	case map[string]any:
		for _, e := range x {
			leaves(e, f)
		}
	}
}

// capture keeps the request when CaptureNext asked for one like it.
func (p *ConfigProbe) capture(r *http.Request, rel string, body []byte, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	op := p.cfg.Operations[p.captureOp]
	if op == nil || status/100 != 2 || !op.effectRequest().Match(r.Method, rel) {
		return
	}
	p.captureOp = ""
	p.captured = &capturedRequest{method: r.Method, rel: rel, query: r.URL.RawQuery, header: r.Header.Clone(), body: body}
}

// CaptureNext implements KeyProver: the next request of operation that
// its config's hold (else effects' answers) pattern names and that the
// provider answers 2xx is kept.
func (p *ConfigProbe) CaptureNext(operation string) error {
	op := p.cfg.Operations[operation]
	if op == nil || op.effectRequest() == nil {
		return fmt.Errorf("crashtest: the probe config names no request of %s that takes its effect (hold = \"METHOD /path\")", operation)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.captureOp, p.captured = operation, nil
	return nil
}

// ProveKey implements KeyProver: it sends the captured request through
// the proxy twice more — as it was, then with the key pv declares (a
// header, or a field of a JSON or form body) set to a new value — and
// counts the operation's effects after each. The second request makes a
// real effect at the provider: a test instance's.
func (p *ConfigProbe) ProveKey(ctx context.Context, operation string, pv manifests.Provider) (string, error) {
	p.mu.Lock()
	c := p.captured
	p.mu.Unlock()
	if c == nil {
		return "no request of the call that takes its effect was answered 2xx: nothing to repeat", nil
	}
	value, ok := keyOf(c, pv)
	if !ok {
		return fmt.Sprintf("the connector's request (%s %s) carries no %s: the provider cannot deduplicate by it", c.method, c.rel, pv.IdempotencyKey()), nil
	}
	n0, err := p.Effects(ctx, operation)
	if err != nil {
		return "", err
	}
	st, err := p.resend(ctx, c)
	if err != nil {
		return "", err
	}
	n1, err := p.Effects(ctx, operation)
	if err != nil {
		return "", err
	}
	if n1 != n0 {
		return fmt.Sprintf("the request repeated with the same %s (%q) was answered %d and made %d more effect(s): the provider does not deduplicate by it", pv.IdempotencyKey(), value, st, n1-n0), nil
	}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	other, err := withKey(c, pv, fmt.Sprintf("crashtest-%x", tok))
	if err != nil {
		return fmt.Sprintf("the connector's request: %v", err), nil
	}
	st, err = p.resend(ctx, other)
	if err != nil {
		return "", err
	}
	n2, err := p.Effects(ctx, operation)
	if err != nil {
		return "", err
	}
	if n2 != n1+1 {
		return fmt.Sprintf("the request repeated with another %s and the same everything else was answered %d and made %d effect(s), want 1: the provider deduplicates by something else (the arguments?), which merges two genuine calls, not by the key declared", pv.IdempotencyKey(), st, n2-n1), nil
	}
	return "", nil
}

// resend sends a captured request through the proxy (so that it is
// counted like the connector's) and returns the provider's status.
func (p *ConfigProbe) resend(ctx context.Context, c *capturedRequest) (int, error) {
	req, err := http.NewRequestWithContext(ctx, c.method, p.URL()+c.rel+querySuffix(c.query), bytes.NewReader(c.body))
	if err != nil {
		return 0, err
	}
	req.Header = c.header.Clone()
	for _, h := range append(slices.Clone(hopHeaders), "Content-Length") {
		req.Header.Del(h)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("repeat %s %s: %w", c.method, c.rel, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, nil
}

// keyOf returns the key the request carries where pv says.
func keyOf(c *capturedRequest, pv manifests.Provider) (string, bool) {
	if pv.IdempotencyHeader != "" {
		v := c.header.Get(pv.IdempotencyHeader)
		return v, v != ""
	}
	if form, ok := formBody(c); ok {
		v := form.Get(pv.IdempotencyField)
		return v, v != ""
	}
	v, err := decodeJSON(c.body)
	if err != nil {
		return "", false
	}
	at, err := lookupJSON(v, pv.IdempotencyField)
	switch x := at.(type) {
	case string:
		return x, err == nil && x != ""
	case json.Number:
		return x.String(), err == nil
	}
	return "", false
}

// withKey returns a copy of c whose key (where pv says) is value.
func withKey(c *capturedRequest, pv manifests.Provider, value string) (*capturedRequest, error) {
	out := *c
	out.header = c.header.Clone()
	if pv.IdempotencyHeader != "" {
		out.header.Set(pv.IdempotencyHeader, value)
		return &out, nil
	}
	if form, ok := formBody(c); ok {
		form.Set(pv.IdempotencyField, value)
		out.body = []byte(form.Encode())
		return &out, nil
	}
	var v any
	if err := json.Unmarshal(c.body, &v); err != nil {
		return nil, fmt.Errorf("its body is neither a form nor JSON: %v", err)
	}
	steps := strings.Split(pv.IdempotencyField, ".")
	obj, ok := v.(map[string]any)
	for _, st := range steps[:len(steps)-1] {
		if !ok {
			break
		}
		obj, ok = obj[st].(map[string]any)
	}
	if !ok {
		return nil, fmt.Errorf("its JSON body has no object holding %s", pv.IdempotencyField)
	}
	obj[steps[len(steps)-1]] = value
	b, err := json.Marshal(v)
	out.body = b
	return &out, err
}

// formBody parses a form-encoded body.
func formBody(c *capturedRequest) (url.Values, bool) {
	mt, _, _ := strings.Cut(c.header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(mt), "application/x-www-form-urlencoded") {
		return nil, false
	}
	v, err := url.ParseQuery(string(c.body))
	return v, err == nil
}

// StartCell implements ReceiptOwner: a cell of operation begins, and what
// earlier cells' requests named is forgotten.
func (p *ConfigProbe) StartCell(_ context.Context, operation string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cellOp, p.named = operation, map[string]bool{}
	return nil
}

// OwnReceipt implements ReceiptOwner for an operation whose receipts the
// config looks up (receipt) and whose effect's request it names (hold,
// else effects' answers): the receipt must be named by such a request of
// the cell, in its path or in the provider's 2xx answer to it. Other
// operations' receipts pass.
func (p *ConfigProbe) OwnReceipt(_ context.Context, operation, receipt string) (string, error) {
	op := p.cfg.Operations[operation]
	if op == nil || op.NoReceipt || op.Receipt == "" || op.effectRequest() == nil {
		return "", nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if operation != p.cellOp || p.named[receipt] {
		return "", nil
	}
	return fmt.Sprintf("receipt %s names an object that exists but is not this call's effect: no %s request of the cell named it, in its path or in the provider's answer (a reconcile that found another object, or an answer naming another call's)",
		receipt, op.effectRequest()), nil
}

// Arm implements Holder: the next request matching the operation's hold
// pattern is held.
func (p *ConfigProbe) Arm(_ context.Context, operation string) error {
	op := p.cfg.Operations[operation]
	if op == nil || op.Hold == nil {
		return fmt.Errorf("%w: the probe config names no request of %s to hold (hold = \"METHOD /path\")", ErrCannotHold, operation)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = op.Hold
	p.release = make(chan struct{})
	p.answer = nil
	return nil
}

// WaitHeld implements Holder.
func (p *ConfigProbe) WaitHeld(ctx context.Context) error {
	for {
		p.mu.Lock()
		n := p.held
		p.mu.Unlock()
		if n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Release implements Holder: held requests go on to the provider, and an
// armed hold that caught nothing is disarmed.
func (p *ConfigProbe) Release(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = nil
	select {
	case <-p.release:
	default:
		close(p.release)
	}
	return nil
}

// HeldAnswer implements HeldAnswerer: the status the provider answered
// the last held request, once it did (0 when it did not answer).
func (p *ConfigProbe) HeldAnswer(ctx context.Context) (int, error) {
	p.mu.Lock()
	ch := p.answer
	p.mu.Unlock()
	if ch == nil {
		return 0, errors.New("crashtest: no request was held")
	}
	select {
	case st := <-ch:
		ch <- st // for a second look
		return st, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("the provider has not answered the released request: %w", ctx.Err())
	}
}

// Effects implements Options.Effects as the operation's effects rule
// says: a count the provider answers, or the answers the proxy counted.
// A removes count runs downwards (only differences matter). An operation
// without a rule has none.
func (p *ConfigProbe) Effects(ctx context.Context, operation string) (int, error) {
	op := p.cfg.Operations[operation]
	if op == nil {
		return 0, nil
	}
	e := op.Effects
	switch {
	case e.Answers != nil:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.answers[operation], nil
	case e.Count == "":
		return 0, nil
	}
	u, err := p.fillURL(e.Count, nil, "")
	if err != nil {
		return 0, err
	}
	_, b, err := p.do(ctx, http.MethodGet, u, "", "", nil, true)
	if err != nil {
		return 0, fmt.Errorf("count the effects of %s: %w", operation, err)
	}
	v, err := decodeJSON(b)
	if err != nil {
		return 0, fmt.Errorf("count the effects of %s: GET %s: %w", operation, u, err)
	}
	at, err := lookupJSON(v, e.JSON)
	if err != nil {
		return 0, fmt.Errorf("count the effects of %s: GET %s: %s: %w", operation, u, e.JSON, err)
	}
	where := e.JSON
	if where == "" {
		where = "the answer"
	}
	var n int
	switch x := at.(type) {
	case []any:
		n = len(x)
	case json.Number:
		i, err := strconv.Atoi(x.String())
		if err != nil || i < 0 {
			return 0, fmt.Errorf("count the effects of %s: GET %s: %s is %s, not a count", operation, u, where, x)
		}
		n = i
	default:
		return 0, fmt.Errorf("count the effects of %s: GET %s: %s is %s, want a number or an array: name the count in it with json = \"PATH\" (dotted names and indexes), or count the 2xx answers the proxy sees instead with answers = \"METHOD /path\"",
			operation, u, where, jsonKind(at))
	}
	if e.Removes {
		n = -n
	}
	return n, nil
}

// CheckReceipt implements Options.CheckReceipt as the operation's receipt
// rule says.
func (p *ConfigProbe) CheckReceipt(ctx context.Context, operation, receipt string) (string, error) {
	op := p.cfg.Operations[operation]
	switch {
	case op == nil || op.NoReceipt:
		return "", nil
	case op.Receipt == "":
		return "", nil
	case receipt == "":
		return fmt.Sprintf("%s succeeded without a receipt, and the probe config looks receipts up (receipt = \"none\" says its calls name nothing)", operation), nil
	}
	u, err := p.fillURL(op.Receipt, nil, receipt)
	if err != nil {
		return "", err
	}
	st, _, err := p.do(ctx, http.MethodGet, u, "", "", nil, false)
	if err != nil {
		return "", err
	}
	exists := st/100 == 2
	switch {
	case st != http.StatusNotFound && st != http.StatusGone && !exists:
		return "", fmt.Errorf("GET %s: status %d, want 2xx (exists) or 404 (does not)", u, st)
	case op.Effects.Removes && exists:
		return fmt.Sprintf("receipt %s still names an object at the provider (GET %s: %d) after the delete succeeded", receipt, u, st), nil
	case !op.Effects.Removes && !exists:
		return fmt.Sprintf("receipt %s names no object at the provider (GET %s: %d)", receipt, u, st), nil
	}
	return "", nil
}

// Args implements Options.Args: the operation's args, after its setup
// request when it has one. Every call is a new cell, with a {unique} of
// its own.
func (p *ConfigProbe) Args(ctx context.Context, operation string) (json.RawMessage, error) {
	op := p.cfg.Operations[operation]
	if op == nil || op.Args == "" {
		return nil, fmt.Errorf("%w (%s)", ErrNoArgs, operation)
	}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	unique := fmt.Sprintf("%x", tok)
	p.mu.Lock()
	p.unique = unique
	p.mu.Unlock()
	var setup any
	if s := op.Setup; s != nil {
		u, err := p.fillURL(s.URL, nil, "")
		if err != nil {
			return nil, err
		}
		esc := url.QueryEscape
		if isJSON(s.ContentType) {
			esc = jsonStringContent
		}
		body, err := p.fill(s.Body, esc, nil, "")
		if err != nil {
			return nil, err
		}
		hdr := map[string]string{}
		for k, v := range s.Headers {
			if hdr[k], err = p.fill(v, func(s string) string { return s }, nil, ""); err != nil {
				return nil, err
			}
		}
		ct := ""
		if body != "" {
			ct = s.ContentType
		}
		_, b, err := p.do(ctx, s.Method, u, ct, body, hdr, true)
		if err != nil {
			return nil, fmt.Errorf("setup of %s: %w", operation, err)
		}
		if setup, err = decodeJSON(b); err != nil {
			return nil, fmt.Errorf("setup of %s: %s %s: %w", operation, s.Method, u, err)
		}
	}
	args, err := p.fill(op.Args, jsonStringContent, setup, "")
	if err != nil {
		return nil, fmt.Errorf("args of %s: %w", operation, err)
	}
	if !json.Valid([]byte(args)) {
		return nil, fmt.Errorf("args of %s are not JSON once filled in: %s", operation, clip(args))
	}
	return json.RawMessage(args), nil
}

// do sends one of the probe's own requests to the provider, with the
// config's headers. With want2xx another status is an error.
func (p *ConfigProbe) do(ctx context.Context, method, rel, contentType, body string, extra map[string]string, want2xx bool) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.base+rel, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range p.cfg.Headers {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, rel, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, rel, err)
	}
	if want2xx && resp.StatusCode/100 != 2 {
		return 0, nil, fmt.Errorf("%s %s: %s: %s", method, rel, resp.Status, clip(string(b)))
	}
	return resp.StatusCode, b, nil
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %v: %s", err, clip(string(b)))
	}
	return v, nil
}

// fill replaces the placeholders of a template (see ProbeConfig), each
// value escaped by esc.
func (p *ConfigProbe) fill(tmpl string, esc func(string) string, setup any, receipt string) (string, error) {
	p.mu.Lock()
	unique := p.unique
	p.mu.Unlock()
	var errs []error
	out := placeholderRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		sub := placeholderRE.FindStringSubmatch(m)
		switch sub[1] {
		case "unique":
			return esc(unique)
		case "receipt":
			return esc(receipt)
		case "setup":
			v, err := lookupJSON(setup, sub[2])
			if err != nil {
				errs = append(errs, fmt.Errorf("{setup.%s}: %w", sub[2], err))
				return m
			}
			switch x := v.(type) {
			case string:
				return esc(x)
			case json.Number:
				return x.String()
			case bool:
				return strconv.FormatBool(x)
			}
			errs = append(errs, fmt.Errorf("{setup.%s} is %s, want a string, number or boolean", sub[2], jsonKind(v)))
		}
		return m
	})
	return out, errors.Join(errs...)
}

// fillURL fills a URL template: values are path-escaped before its
// query and query-escaped in it.
func (p *ConfigProbe) fillURL(tmpl string, setup any, receipt string) (string, error) {
	path, query, hasQuery := strings.Cut(tmpl, "?")
	out, err := p.fill(path, url.PathEscape, setup, receipt)
	if err != nil || !hasQuery {
		return out, err
	}
	q, err := p.fill(query, url.QueryEscape, setup, receipt)
	return out + "?" + q, err
}

// jsonStringContent escapes s for the inside of a JSON string.
func jsonStringContent(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
