package wasmrt

// Review tests (not part of the repo). Run:
//   rm -rf /tmp/rv && mkdir /tmp/rv && cp -r /work/main /tmp/rv/main &&
//   cp /tmp/review_iface_test.go /tmp/rv/main/host/ &&
//   cd /tmp/rv/main && go test ./host -run 'TestReview' -v

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/connhost/connhost/abi"
)

type recResolver struct {
	mu    sync.Mutex
	names []string
}

func (r *recResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.names = append(r.names, host)
	r.mu.Unlock()
	return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil // a public (non-internal) address
}

// An allowlist entry "https://api.stripe.com:443" must not admit a URL whose
// host is "apİ.stripe.com" (U+0130): strings.ToLower maps İ to ASCII 'i',
// but net/http converts the host with IDNA (İ -> "i̇" -> punycode) and would
// resolve and dial a different, registrable name.
func TestHTTPRefusesUnicodeHostsThatDialAnotherName(t *testing.T) {
	res := &recResolver{}
	var dialled []string
	opts := Options{Resolver: res, Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
		dialled = append(dialled, addr)
		return nil, errors.New("test: not connecting")
	}}
	opts.EnsureDefaults()
	h, err := newHTTPCap("payments", []string{"https://api.stripe.com:443"}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"https://ap\u0130.str\u0130pe.com/v1/payment_intents", "https://ap%C4%B0.stripe.com/v1/x"} {
		resp := h.do(context.Background(), abi.HTTPRequest{Method: "GET", URL: u})
		if resp.Err != abi.HTTPDenied {
			t.Errorf("%s: err=%v %q, want denied", u, resp.Err, resp.Message)
		}
	}
	t.Logf("resolver looked up %q; dialled %q", res.names, dialled)
	for _, n := range res.names {
		if n != "api.stripe.com" {
			t.Errorf("BYPASS: allowlist is api.stripe.com:443 but the capability resolved %q", n)
		}
	}
}

// A redirect between two allowlisted origins that share a host name (here
// two loopback ports; equally https -> http on one name) must not carry the
// guest's Authorization header along: net/http strips it only when the
// host *name* changes.
func TestHTTPRedirectToAnotherOriginDropsCredentials(t *testing.T) {
	var got atomic.Value
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
	}))
	defer b.Close()
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, b.URL+"/steal", http.StatusFound)
	}))
	defer a.Close()
	opts := Options{}
	opts.EnsureDefaults()
	h, err := newHTTPCap("payments", []string{a.URL, b.URL}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	resp := h.do(context.Background(), abi.HTTPRequest{Method: "GET", URL: a.URL + "/v1/x",
		Header: []abi.Header{{Name: "Authorization", Value: "Bearer sk_live_SECRET"}}})
	t.Logf("resp err=%v status=%d; origin %s received Authorization %q", resp.Err, resp.Status, b.URL, got.Load())
	if v, _ := got.Load().(string); v != "" {
		t.Errorf("secret forwarded across origins on redirect: %q", v)
	}
}
