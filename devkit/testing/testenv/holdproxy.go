package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/connhost/connhost/devkit/sandbox/fault"
)

// HoldingProxy serves a reverse proxy to target (e.g. a real Mailpit) with
// the sandbox's fault control API (/_sandbox/faults, /held, /release),
// understanding "hold" rules only: a request hit by one is received in
// full and then parked until released, after which it is forwarded to the
// target whether or not its client is still connected - a provider that
// goes on processing a request its client gave up on. It returns the
// proxy's base URL and closes it (releasing held requests) in t.Cleanup.
func HoldingProxy(tb testing.TB, target string) string {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	in := fault.New()
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		http.Error(w, "holding proxy: "+err.Error(), http.StatusBadGateway)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if rule, hit := in.Take(r.Method, r.URL.Path); hit && rule.Kind == fault.Hold {
			// The provider has the whole request: from here on it is
			// processed to the end, whatever its client does.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "holding proxy: read body: "+err.Error(), http.StatusBadRequest)
				return
			}
			r = r.WithContext(context.WithoutCancel(r.Context()))
			r.Body = io.NopCloser(bytes.NewReader(body))
			in.Checkpoint(fault.WithRule(r.Context(), rule))
			// A context that cannot be cancelled makes ReverseProxy fall
			// back to http.CloseNotifier, which would cancel the upstream
			// request when the client's connection closes; hide it.
			w = struct{ http.ResponseWriter }{w}
		}
		rp.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(func() {
		in.Close()
		srv.Close()
	})
	return srv.URL
}
