package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A held request reaches the target after its client has gone: the proxy
// plays a provider that goes on processing a request whose client was
// killed, which is what the crash matrix's in_flight rows rely on.
func TestHoldingProxyForwardsAfterTheClientLeft(t *testing.T) {
	var got atomic.Int32
	reached := make(chan struct{}, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "effect" {
			got.Add(1)
			reached <- struct{}{}
		}
	}))
	t.Cleanup(target.Close)
	proxy := HoldingProxy(t, target.URL)

	post := func(ctx context.Context, path, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		return http.DefaultClient.Do(req)
	}
	resp, err := post(context.Background(), "/_sandbox/faults", `{"kind":"hold","method":"POST","path":"/send"}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("adding the hold rule: %s", resp.Status)
	}

	// The client sends, is held, and goes away.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		resp, err := post(ctx, "/send", "effect")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for held := 0; held != 1; {
		resp, err := http.Get(proxy + "/_sandbox/held")
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Held int }
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		held = v.Held
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want it cancelled while held", err)
	}
	// Give the proxy's server time to see the closed connection; a proxy
	// that tied the upstream request to it would now cancel it. (This
	// wait only makes such a proxy fail surely; the assertion below does
	// not depend on it.)
	time.Sleep(100 * time.Millisecond)
	resp, err = post(context.Background(), "/_sandbox/release", "")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the held request never reached the target after its client left (%d effects)", got.Load())
	}
}
