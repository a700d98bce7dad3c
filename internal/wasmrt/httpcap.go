package wasmrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/ipclass"
	"github.com/connhost/connhost/internal/telemetry"
)

// The http capability. A connector reaches the network only through it,
// and only the origins its manifest lists in capabilities.http, each
// "scheme://host:port" (scheme http or https, explicit port). The check
// runs three times:
//
//  1. on the request URL: scheme, host and port must equal an entry
//     (a URL without a port uses the scheme's default port);
//  2. on every redirect (http.Client.CheckRedirect), the same way;
//  3. on the addresses dialled: the host name is resolved by the host and
//     every address is checked before connecting. A loopback, private,
//     link-local, unspecified or otherwise internal address is allowed only
//     when an entry with the request's scheme and port names that literal
//     IP, or names "localhost" and the address is loopback. So a name that
//     resolves (or is rebound) to 127.0.0.1 is denied unless the allowlist
//     says 127.0.0.1 or localhost itself, for that scheme.
//
// There is no cookie jar, no proxy from the environment, and no Host header
// override. Bodies are capped both ways; a request never outlives the
// call's deadline.

// origin is one allowlist entry.
type origin struct {
	scheme, host, port string
}

func (o origin) String() string { return o.scheme + "://" + net.JoinHostPort(o.host, o.port) }

// schemeKey is the context key under which schemeTransport passes a
// request's scheme to the dialler: an allowlist entry is a scheme as well as
// an address, and the dialler sees only "host:port".
type schemeKey struct{}

// schemeTransport puts each request's scheme, redirects included, into the
// context the transport dials with. Connections are pooled per scheme, so a
// connection dialled for one scheme never serves another.
type schemeTransport struct{ *http.Transport }

func (t schemeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := context.WithValue(req.Context(), schemeKey{}, asciiLower(req.URL.Scheme))
	return t.Transport.RoundTrip(req.WithContext(ctx))
}

// schemeOf returns the scheme schemeTransport recorded in ctx, or "" (which
// no allowlist entry matches) when there is none.
func schemeOf(ctx context.Context) string {
	s, _ := ctx.Value(schemeKey{}).(string)
	return s
}

// deniedError is a request the allowlist refused.
type deniedError struct{ msg string }

func (e *deniedError) Error() string { return e.msg }

// httpCap is one connector's http capability. It is safe for concurrent use.
type httpCap struct {
	connector string
	allow     []origin
	allowText string
	client    *http.Client
	transport *http.Transport
	resolver  Resolver
	dial      DialFunc
	timeout   time.Duration
	maxReq    int64
	maxResp   int64
}

// parseOrigin parses an allowlist entry.
func parseOrigin(entry string) (origin, error) {
	u, err := url.Parse(entry)
	if err != nil {
		return origin{}, fmt.Errorf("%w: capabilities.http entry %q: %v", ErrBadCapability, entry, err)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return origin{}, fmt.Errorf("%w: capabilities.http entry %q: want scheme://host:port with scheme http or https", ErrBadCapability, entry)
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return origin{}, fmt.Errorf("%w: capabilities.http entry %q: want scheme://host:port only", ErrBadCapability, entry)
	case u.Hostname() == "":
		return origin{}, fmt.Errorf("%w: capabilities.http entry %q: no host", ErrBadCapability, entry)
	}
	port := u.Port()
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return origin{}, fmt.Errorf("%w: capabilities.http entry %q: want an explicit port", ErrBadCapability, entry)
	}
	return origin{scheme: scheme, host: strings.ToLower(u.Hostname()), port: port}, nil
}

func newHTTPCap(connector string, entries []string, opts *Options) (*httpCap, error) {
	h := &httpCap{
		connector: connector,
		resolver:  opts.Resolver,
		dial:      opts.Dial,
		timeout:   opts.HTTPTimeout,
		maxReq:    opts.MaxHTTPRequestBytes,
		maxResp:   opts.MaxHTTPResponseBytes,
	}
	var errs []error
	var names []string
	for _, e := range entries {
		o, err := parseOrigin(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		h.allow = append(h.allow, o)
		names = append(names, o.String())
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	h.allowText = "[" + strings.Join(names, " ") + "]"
	if h.dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second, ControlContext: h.control}
		h.dial = d.DialContext
	}
	var tlsConf = opts.TLSClientConfig
	if tlsConf != nil {
		tlsConf = tlsConf.Clone()
	}
	h.transport = &http.Transport{
		Proxy:                  nil,
		DialContext:            h.dialContext,
		TLSClientConfig:        tlsConf,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	h.client = &http.Client{Transport: schemeTransport{h.transport}, CheckRedirect: h.checkRedirect, Jar: nil}
	return h, nil
}

func (h *httpCap) close() {
	if h != nil && h.transport != nil {
		h.transport.CloseIdleConnections()
	}
}

// asciiLower lowercases ASCII letters only: strings.ToLower maps some
// non-ASCII letters to ASCII ones (U+0130 "İ" becomes "i"), which would
// let a Unicode host name compare equal to an allowlisted ASCII one.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// isASCII reports whether s holds only ASCII bytes.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// checkURL reports whether u's origin is allowlisted. Host names must be
// ASCII (internationalized names in their punycode form): net/http would
// dial the IDNA form of a Unicode name, which is another host than the one
// compared here.
func (h *httpCap) checkURL(u *url.URL) error {
	if !isASCII(u.Host) {
		return &deniedError{fmt.Sprintf("host %q is not ASCII (write internationalized names in punycode); connector[%s] capabilities.http %s",
			u.Host, h.connector, h.allowText)}
	}
	scheme := asciiLower(u.Scheme)
	host := asciiLower(u.Hostname())
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	for _, o := range h.allow {
		if o.scheme == scheme && o.host == host && o.port == port {
			return nil
		}
	}
	return &deniedError{fmt.Sprintf("%s://%s is not in connector[%s] capabilities.http %s",
		scheme, net.JoinHostPort(host, port), h.connector, h.allowText)}
}

func (h *httpCap) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if err := h.checkURL(req.URL); err != nil {
		return &deniedError{"redirect: " + err.Error()}
	}
	// net/http keeps credentials on a redirect to the same host name even
	// on another port or scheme; another origin must not get them.
	first := via[0].URL
	if asciiLower(req.URL.Scheme) != asciiLower(first.Scheme) || asciiLower(req.URL.Host) != asciiLower(first.Host) {
		for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
			req.Header.Del(k)
		}
	}
	return nil
}

// internal reports whether ip is an address a connector must not reach
// unless its allowlist names it literally (ipclass.Internal: loopback,
// private, link-local, unspecified, multicast, reserved ranges and cloud
// metadata services). The audit judges allowlist entries by the same table.
func internal(ip netip.Addr) bool { return ipclass.Internal(ip) }

// checkAddr reports whether connecting to ip:port for a request with the
// given scheme is allowed. An entry admits an internal address for its own
// scheme only, as checkURL matches host name entries: "http://127.0.0.1:8025"
// must not let an https request (say, from a name rebound to 127.0.0.1)
// reach that port.
func (h *httpCap) checkAddr(scheme string, ip netip.Addr, port string) error {
	ip = ip.Unmap()
	if !internal(ip) {
		return nil
	}
	for _, o := range h.allow {
		if o.scheme != scheme || o.port != port {
			continue
		}
		if lit, err := netip.ParseAddr(o.host); err == nil && lit.Unmap() == ip {
			return nil
		}
		if o.host == "localhost" && ip.IsLoopback() {
			return nil
		}
	}
	return &deniedError{fmt.Sprintf("address %s is internal and not named for %s in connector[%s] capabilities.http %s",
		net.JoinHostPort(ip.String(), port), scheme, h.connector, h.allowText)}
}

// dialContext resolves addr's host itself, checks every address, and dials
// a checked literal address.
func (h *httpCap) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	// Defence in depth: the name actually dialled must be an allowlisted
	// host on this port for the request's scheme, whatever checkURL saw.
	scheme := schemeOf(ctx)
	named := false
	for _, o := range h.allow {
		named = named || (o.scheme == scheme && o.port == port && o.host == asciiLower(strings.Trim(host, "[]")))
	}
	if !named {
		return nil, &deniedError{fmt.Sprintf("dial %s: not an allowlisted host of connector[%s] capabilities.http %s", addr, h.connector, h.allowText)}
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = h.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("no addresses for %s", host)
		}
	}
	// One internal address among the answers is enough to refuse: a
	// rebinding name must not get a second chance.
	for _, ip := range ips {
		if err := h.checkAddr(scheme, ip, port); err != nil {
			return nil, &deniedError{fmt.Sprintf("%s resolves to %v: %v", host, ip, err)}
		}
	}
	var lastErr error
	for _, ip := range ips {
		conn, err := h.dial(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// control re-checks the address the default dialer actually connects to;
// ctx is dialContext's, so it carries the request's scheme.
func (h *httpCap) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &deniedError{fmt.Sprintf("cannot check dialled address %q: %v", address, err)}
	}
	return h.checkAddr(schemeOf(ctx), ap.Addr(), strconv.Itoa(int(ap.Port())))
}

// originOf returns scheme://host:port of a URL for logs (never its path or
// query, which may carry secrets).
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Scheme + "://" + u.Host
}

// do performs one guest request and always answers with an envelope.
func (h *httpCap) do(ctx context.Context, q abi.HTTPRequest) abi.HTTPResponse {
	fail := func(code abi.HTTPErrorCode, format string, a ...any) abi.HTTPResponse {
		return abi.HTTPResponse{Err: code, Message: fmt.Sprintf(format, a...)}
	}
	if !validToken(q.Method) {
		return fail(abi.HTTPInvalid, "invalid method %q", q.Method)
	}
	u, err := url.Parse(q.URL)
	if err != nil {
		return fail(abi.HTTPInvalid, "invalid url: %v", err)
	}
	if !u.IsAbs() || u.Host == "" || u.User != nil {
		return fail(abi.HTTPInvalid, "url must be absolute, with a host and without user info")
	}
	if err := h.checkURL(u); err != nil {
		return fail(abi.HTTPDenied, "%v", err)
	}
	if int64(len(q.Body)) > h.maxReq {
		return fail(abi.HTTPTooLarge, "request body of %d bytes exceeds the cap of %d", len(q.Body), h.maxReq)
	}
	timeout := h.timeout
	if q.TimeoutMillis > 0 {
		timeout = min(timeout, time.Duration(q.TimeoutMillis)*time.Millisecond)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The provider request's span (a client span, named by its method as
	// the HTTP conventions name one without a route template); the
	// request carries its traceparent, so that the provider's own tracing
	// joins the trace.
	rctx, span := telemetry.Start(rctx, q.Method, trace.SpanKindClient)
	resp := h.send(rctx, q, u)
	endRequest(span, q.Method, u, resp)
	return resp
}

// send performs the checked request q to u within ctx.
func (h *httpCap) send(rctx context.Context, q abi.HTTPRequest, u *url.URL) abi.HTTPResponse {
	fail := func(code abi.HTTPErrorCode, format string, a ...any) abi.HTTPResponse {
		return abi.HTTPResponse{Err: code, Message: fmt.Sprintf(format, a...)}
	}
	var body io.Reader
	if len(q.Body) > 0 {
		body = bytes.NewReader(q.Body)
	}
	req, err := http.NewRequestWithContext(rctx, q.Method, u.String(), body)
	if err != nil {
		return fail(abi.HTTPInvalid, "%v", err)
	}
	for _, f := range q.Header {
		if !validToken(f.Name) || !validHeaderValue(f.Value) {
			return fail(abi.HTTPInvalid, "invalid header field %q", f.Name)
		}
		if strings.EqualFold(f.Name, "Host") {
			continue // the Host is the URL's; a guest cannot override it
		}
		req.Header.Add(f.Name, f.Value)
	}
	telemetry.Inject(rctx, req.Header)
	resp, err := h.client.Do(req)
	if err != nil {
		return h.failure(rctx, err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > h.maxResp {
		return fail(abi.HTTPTooLarge, "response body of %d bytes exceeds the cap of %d", resp.ContentLength, h.maxResp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, h.maxResp+1))
	if err != nil {
		return h.failure(rctx, err)
	}
	if int64(len(b)) > h.maxResp {
		return fail(abi.HTTPTooLarge, "response body exceeds the cap of %d bytes", h.maxResp)
	}
	return abi.HTTPResponse{Status: resp.StatusCode, Header: headerList(resp.Header), Body: b}
}

func (h *httpCap) failure(ctx context.Context, err error) abi.HTTPResponse {
	var denied *deniedError
	var nerr net.Error
	switch {
	case errors.As(err, &denied):
		return abi.HTTPResponse{Err: abi.HTTPDenied, Message: denied.msg}
	case errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil, errors.As(err, &nerr) && nerr.Timeout():
		return abi.HTTPResponse{Err: abi.HTTPTimeout, Message: err.Error()}
	default:
		return abi.HTTPResponse{Err: abi.HTTPNetwork, Message: err.Error()}
	}
}

// maxHeaderFields matches the envelope's limit on header fields.
const maxHeaderFields = 256

// headerList flattens a response header in a stable order, keeping at most
// maxHeaderFields fields so the envelope always decodes.
func headerList(h http.Header) []abi.Header {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]abi.Header, 0, len(h))
	for _, k := range names {
		for _, v := range h[k] {
			if len(out) == maxHeaderFields {
				return out
			}
			out = append(out, abi.Header{Name: k, Value: v})
		}
	}
	return out
}

// validToken reports whether s is an RFC 9110 token (method, field name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}
