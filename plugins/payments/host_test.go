package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

// testHost is a guest.Host that performs real HTTP with net/http, enforcing
// an origin allowlist, a per-request timeout and a body size cap the way the
// connhost host's http capability does.
type testHost struct {
	execID  string
	config  map[string]string // keys absent from declared are "not declared"
	allow   []string          // allowed origins, scheme://host:port
	timeout time.Duration     // default request timeout
	maxBody int64
	// mangle, when set, performs the request and then answers HTTPInvalid,
	// as the guest SDK does when the host's response envelope does not
	// decode.
	mangle bool

	mu       sync.Mutex
	requests []abi.HTTPRequest
	logs     []logRecord
}

type logRecord struct {
	level int32
	msg   string
}

func newTestHost(origin string, cfg map[string]string) *testHost {
	return &testHost{
		execID:  "exec-0001",
		config:  cfg,
		allow:   []string{origin},
		timeout: 2 * time.Second,
		maxBody: 1 << 20,
	}
}

func (h *testHost) ExecutionID() string { return h.execID }

func (h *testHost) Config(key string) (string, int32) {
	v, ok := h.config[key]
	switch {
	case !ok:
		return "", abi.StatusNotDeclared
	case v == "":
		return "", abi.StatusNotSet
	}
	return v, 0
}

func (h *testHost) Log(level int32, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, logRecord{level, msg})
}

func (h *testHost) Now() time.Time { return time.Now() }

func (h *testHost) Sleep(d time.Duration) bool { time.Sleep(d); return true }

// sent returns the requests that passed the allowlist.
func (h *testHost) sent() []abi.HTTPRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]abi.HTTPRequest(nil), h.requests...)
}

func (h *testHost) errorLogs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.logs {
		if l.level >= abi.LevelError {
			out = append(out, l.msg)
		}
	}
	return out
}

func (h *testHost) HTTP(req abi.HTTPRequest) abi.HTTPResponse {
	u, err := url.Parse(req.URL)
	if err != nil || u.Host == "" {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: "bad url"}
	}
	allowed := false
	for _, o := range h.allow {
		allowed = allowed || o == u.Scheme+"://"+u.Host
	}
	if !allowed {
		return abi.HTTPResponse{Err: abi.HTTPDenied, Message: u.Scheme + "://" + u.Host + " not in allowlist"}
	}
	h.mu.Lock()
	h.requests = append(h.requests, req)
	h.mu.Unlock()

	timeout := h.timeout
	if req.TimeoutMillis > 0 {
		timeout = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: err.Error()}
	}
	for _, f := range req.Header {
		hr.Header.Add(f.Name, f.Value)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return netFailure(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.maxBody+1))
	if err != nil {
		return netFailure(err)
	}
	if int64(len(body)) > h.maxBody {
		return abi.HTTPResponse{Err: abi.HTTPTooLarge, Message: "body over cap"}
	}
	if h.mangle {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: "abi: decode http response: truncated"}
	}
	out := abi.HTTPResponse{Status: resp.StatusCode, Body: body}
	for name, vs := range resp.Header {
		for _, v := range vs {
			out.Header = append(out.Header, abi.Header{Name: name, Value: v})
		}
	}
	return out
}

func netFailure(err error) abi.HTTPResponse {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return abi.HTTPResponse{Err: abi.HTTPTimeout, Message: err.Error()}
	}
	return abi.HTTPResponse{Err: abi.HTTPNetwork, Message: err.Error()}
}

// invoke runs one export of one operation against h.
func invoke(h guest.Host, export, op, key, args string) abi.Outcome {
	return guest.Invoke(h, export, op, key, []byte(args))
}

func wantKind(t *testing.T, o abi.Outcome, want abi.OutcomeKind, errContains string) {
	t.Helper()
	if o.Kind != want {
		t.Fatalf("outcome = %s (%q, result %s), want %s", o.Kind, o.Error, o.Result, want)
	}
	if errContains != "" && !strings.Contains(o.Error, errContains) {
		t.Fatalf("outcome error %q does not contain %q", o.Error, errContains)
	}
}
