// Package guesttest runs connector handlers natively in tests: Host is a
// guest.Host that performs real HTTP with net/http while enforcing an origin
// allowlist, a per-request timeout and a body size cap the way the connhost
// host's http capability does, and records what the connector sent and
// logged.
//
// It is for connector tests only; a connector module never imports it.
package guesttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

// Host is a guest.Host for native tests. Set its exported fields before the
// first call; it is safe for concurrent use afterwards.
type Host struct {
	// ExecID is what ExecutionID returns.
	ExecID string
	// Values are the config values; a key absent from Values is "not
	// declared", a key mapped to "" is "declared but not set".
	Values map[string]string
	// Allow lists the allowed origins, scheme://host:port.
	Allow []string
	// Timeout is the default request timeout.
	Timeout time.Duration
	// MaxBody caps response bodies (HTTPTooLarge beyond it).
	MaxBody int64
	// Mangle, when set, performs the request and then answers HTTPInvalid,
	// as the guest SDK does when the host's response envelope does not
	// decode.
	Mangle bool
	// Handler, when set, serves the requests in-process instead of over
	// the network (so a test also runs where there are no sockets, e.g.
	// compiled to wasip1); timeouts do not apply.
	Handler http.Handler

	mu        sync.Mutex
	requests  []abi.HTTPRequest
	responses []abi.HTTPResponse
	logs      []logRecord
}

type logRecord struct {
	level int32
	msg   string
}

// New returns a Host allowing one origin, with execution id "exec-0001", a
// 2s timeout and a 1 MiB body cap.
func New(origin string, values map[string]string) *Host {
	return &Host{ExecID: "exec-0001", Values: values, Allow: []string{origin}, Timeout: 2 * time.Second, MaxBody: 1 << 20}
}

// ExecutionID implements guest.Host.
func (h *Host) ExecutionID() string { return h.ExecID }

// Config implements guest.Host.
func (h *Host) Config(key string) (string, int32) {
	v, ok := h.Values[key]
	switch {
	case !ok:
		return "", abi.StatusNotDeclared
	case v == "":
		return "", abi.StatusNotSet
	}
	return v, 0
}

// Log implements guest.Host.
func (h *Host) Log(level int32, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, logRecord{level, msg})
}

// Now implements guest.Host.
func (h *Host) Now() time.Time { return time.Now() }

// Sleep implements guest.Host.
func (h *Host) Sleep(d time.Duration) bool { time.Sleep(d); return true }

// Sent returns the requests that passed the allowlist.
func (h *Host) Sent() []abi.HTTPRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]abi.HTTPRequest(nil), h.requests...)
}

// Responses returns the responses of the requests that passed the
// allowlist, in order (for a Canned host to replay).
func (h *Host) Responses() []abi.HTTPResponse {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]abi.HTTPResponse(nil), h.responses...)
}

// ErrorLogs returns the messages logged at error level or above.
func (h *Host) ErrorLogs() []string { return h.Logs(abi.LevelError) }

// Logs returns the messages logged at level or above (abi.LevelDebug,
// LevelInfo, LevelWarn, LevelError).
func (h *Host) Logs(level int32) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.logs {
		if l.level >= level {
			out = append(out, l.msg)
		}
	}
	return out
}

// HTTP implements guest.Host.
func (h *Host) HTTP(req abi.HTTPRequest) abi.HTTPResponse {
	resp, sent := h.do(req)
	if sent {
		h.mu.Lock()
		h.responses = append(h.responses, resp)
		h.mu.Unlock()
	}
	return resp
}

// do performs req; sent says whether it passed the allowlist.
func (h *Host) do(req abi.HTTPRequest) (_ abi.HTTPResponse, sent bool) {
	u, err := url.Parse(req.URL)
	if err != nil || u.Host == "" {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: "bad url"}, false
	}
	allowed := false
	for _, o := range h.Allow {
		allowed = allowed || o == u.Scheme+"://"+u.Host
	}
	if !allowed {
		return abi.HTTPResponse{Err: abi.HTTPDenied, Message: u.Scheme + "://" + u.Host + " not in allowlist"}, false
	}
	h.mu.Lock()
	h.requests = append(h.requests, req)
	h.mu.Unlock()

	timeout := h.Timeout
	if req.TimeoutMillis > 0 {
		timeout = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: err.Error()}, true
	}
	for _, f := range req.Header {
		hr.Header.Add(f.Name, f.Value)
	}
	var resp *http.Response
	if h.Handler != nil {
		rec := httptest.NewRecorder()
		hr.RequestURI = u.RequestURI()
		h.Handler.ServeHTTP(rec, hr)
		resp = rec.Result()
	} else if resp, err = http.DefaultClient.Do(hr); err != nil {
		return netFailure(err), true
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.MaxBody+1))
	if err != nil {
		return netFailure(err), true
	}
	if int64(len(body)) > h.MaxBody {
		return abi.HTTPResponse{Err: abi.HTTPTooLarge, Message: "body over cap"}, true
	}
	if h.Mangle {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: "abi: decode http response: truncated"}, true
	}
	out := abi.HTTPResponse{Status: resp.StatusCode, Body: body}
	for name, vs := range resp.Header {
		for _, v := range vs {
			out.Header = append(out.Header, abi.Header{Name: name, Value: v})
		}
	}
	return out, true
}

func netFailure(err error) abi.HTTPResponse {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return abi.HTTPResponse{Err: abi.HTTPTimeout, Message: err.Error()}
	}
	return abi.HTTPResponse{Err: abi.HTTPNetwork, Message: err.Error()}
}

// Invoke runs one export of one operation against h.
func Invoke(h guest.Host, export, op, key, args string) abi.Outcome {
	return guest.Invoke(h, export, op, key, []byte(args))
}

// WantKind fails the test unless o has kind want and, when errContains is
// not empty, an error message containing it.
func WantKind(t testing.TB, o abi.Outcome, want abi.OutcomeKind, errContains string) {
	t.Helper()
	if o.Kind != want {
		t.Fatalf("outcome = %s (%q, result %s), want %s", o.Kind, o.Error, o.Result, want)
	}
	if errContains != "" && !strings.Contains(o.Error, errContains) {
		t.Fatalf("outcome error %q does not contain %q", o.Error, errContains)
	}
}

// Result decodes o's JSON result into a T, failing the test if it does not
// decode.
func Result[T any](t testing.TB, o abi.Outcome) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(o.Result, &v); err != nil {
		t.Fatalf("result %s: %v", o.Result, err)
	}
	return v
}

// Canned is a guest.Host without a network: it answers the n-th HTTP
// request of each call with Responses[n] (recorded by a Host), so a
// benchmark measures the connector's own work. Call Reset before each
// call. It is not safe for concurrent use.
type Canned struct {
	// ExecID is what ExecutionID returns.
	ExecID string
	// Values are the config values, as for Host.
	Values map[string]string
	// Responses answer the requests of one call, in order.
	Responses []abi.HTTPResponse
	next      int
}

// Reset makes the next request get Responses[0] again.
func (h *Canned) Reset() { h.next = 0 }

// ExecutionID implements guest.Host.
func (h *Canned) ExecutionID() string { return h.ExecID }

// Config implements guest.Host.
func (h *Canned) Config(key string) (string, int32) {
	v, ok := h.Values[key]
	switch {
	case !ok:
		return "", abi.StatusNotDeclared
	case v == "":
		return "", abi.StatusNotSet
	}
	return v, 0
}

// HTTP implements guest.Host. A request beyond the recorded ones is
// answered HTTPNetwork. The response's body is a fresh copy, as the wasm
// host hands each call its own bytes.
func (h *Canned) HTTP(abi.HTTPRequest) abi.HTTPResponse {
	if h.next >= len(h.Responses) {
		return abi.HTTPResponse{Err: abi.HTTPNetwork, Message: "guesttest: no canned response left"}
	}
	r := h.Responses[h.next]
	h.next++
	r.Body = bytes.Clone(r.Body)
	return r
}

// Log implements guest.Host; records are dropped.
func (h *Canned) Log(int32, string) {}

// Now implements guest.Host.
func (h *Canned) Now() time.Time { return time.Now() }

// Sleep implements guest.Host; it returns at once.
func (h *Canned) Sleep(time.Duration) bool { return true }

// CodecDiffers reports JSON on which package codec reads differently from
// encoding/json by design, so a differential test must not compare the
// two: input that is not valid JSON, a name given twice in one object
// (encoding/json merges repeated objects into one value), a name that
// matches one of names only case-insensitively (encoding/json would take
// it for that field, codec does not), invalid UTF-8 or a surrogate escape
// (strict decoding refuses ambiguous text).
func CodecDiffers(b []byte, names ...string) bool {
	if !json.Valid(b) || !utf8.Valid(b) || bytes.Contains(bytes.ToLower(b), []byte(`\ud`)) {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var keys []map[string]bool // per open container; nil for arrays
	var wantKey []bool         // per open container: the next string is a name
	for {
		tok, err := dec.Token()
		if err != nil {
			return err != io.EOF
		}
		n := len(keys)
		if n > 0 && keys[n-1] != nil && wantKey[n-1] {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				keys, wantKey = keys[:n-1], wantKey[:n-1]
				if n > 1 && keys[n-2] != nil {
					wantKey[n-2] = true
				}
				continue
			}
			k := tok.(string)
			if keys[n-1][k] || strings.ContainsAny(k, "\u017f\u212a") {
				return true
			}
			for _, name := range names {
				if k != name && strings.EqualFold(k, name) {
					return true
				}
			}
			keys[n-1][k] = true
			wantKey[n-1] = false
			continue
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			keys, wantKey = append(keys, map[string]bool{}), append(wantKey, true)
			continue
		case '[':
			keys, wantKey = append(keys, nil), append(wantKey, false)
			continue
		case '}', ']':
			keys, wantKey = keys[:n-1], wantKey[:n-1]
		}
		if n := len(keys); n > 0 && keys[n-1] != nil {
			wantKey[n-1] = true
		}
	}
}
