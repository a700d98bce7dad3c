package wasmrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
)

// fakeResolver answers from a table, so tests can make a name resolve to
// loopback without DNS.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var loopback = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

// countingServer is an httptest server that counts the requests it sees.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

type probeResult struct {
	Err, Message, Body, Location string
	Status                       int
}

// probe loads httpprobe with the allowlist and returns a function doing
// one GET through it.
func probe(t *testing.T, opts Options, allow ...string) (*Connector, func(url string) probeResult) {
	t.Helper()
	rt, _ := newTestRuntime(t, opts)
	m, lo := testManifest(t, "probe", "httpprobe", ops("get", "now"))
	m.Capabilities.HTTP = allow
	c := mustLoad(t, rt, m, lo)
	return c, func(url string) probeResult {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"url": url})
		out, err := c.Call(context.Background(), CallRequest{Export: abi.ExportExecute, Operation: "get", ExecutionID: "e1", Args: args})
		if err != nil {
			t.Fatalf("get %s: %v", url, err)
		}
		var r probeResult
		if err := json.Unmarshal(out.Result, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func TestHTTPAllowed(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello "+r.URL.Path) })
	_, get := probe(t, Options{}, "http://127.0.0.1:"+s.port())
	r := get(s.URL + "/v1/x")
	if r.Err != "ok" || r.Status != 200 || r.Body != "hello /v1/x" {
		t.Fatalf("got %+v", r)
	}
}

// TestHTTPNotAllowlisted: host, port and scheme must each match an entry;
// the denial names the target and the allowlist, and nothing is sent.
func TestHTTPNotAllowlisted(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	other := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	allow := "http://127.0.0.1:" + s.port()
	c, get := probe(t, Options{Resolver: fakeResolver{"localhost": loopback}}, allow)
	tests := []struct{ name, url, target string }{
		{"other port", other.URL + "/", "127.0.0.1:" + other.port()},
		{"other scheme", "https://127.0.0.1:" + s.port() + "/", "https://127.0.0.1:" + s.port()},
		{"other host", "http://localhost:" + s.port() + "/", "localhost:" + s.port()},
		{"default port", "http://127.0.0.1/", "127.0.0.1:80"},
		{"public host", "https://example.com/", "example.com:443"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := get(tc.url)
			if r.Err != "denied" {
				t.Fatalf("got %+v, want denied", r)
			}
			contains(t, r.Message, tc.target)
			contains(t, r.Message, allow)
			contains(t, r.Message, "connector[probe]")
		})
	}
	if s.hits.Load() != 0 || other.hits.Load() != 0 {
		t.Fatalf("denied requests reached a server: %d, %d", s.hits.Load(), other.hits.Load())
	}
	if st := c.Stats(); st.Discarded != 0 {
		t.Fatalf("a denial discarded an instance: %+v", st)
	}
	if r := get(s.URL + "/"); r.Err != "ok" {
		t.Fatalf("allowed request after denials: %+v", r)
	}
}

func TestHTTPRedirect(t *testing.T) {
	elsewhere := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "leaked") })
	var s *countingServer
	s = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusFound)
		case "/home":
			http.Redirect(w, r, s.URL+"/final", http.StatusFound)
		default:
			fmt.Fprint(w, "final")
		}
	})
	_, get := probe(t, Options{}, "http://127.0.0.1:"+s.port())
	r := get(s.URL + "/away")
	if r.Err != "denied" {
		t.Fatalf("redirect to a non-allowlisted origin: %+v", r)
	}
	contains(t, r.Message, "redirect")
	contains(t, r.Message, "127.0.0.1:"+elsewhere.port())
	if elsewhere.hits.Load() != 0 {
		t.Fatal("the redirect target was reached")
	}
	if r := get(s.URL + "/home"); r.Err != "ok" || r.Body != "final" {
		t.Fatalf("redirect within the allowlist: %+v", r)
	}
}

// TestHTTPRebinding: an allowlisted name that resolves to loopback is
// refused at dial time unless the allowlist names loopback itself.
func TestHTTPRebinding(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal") })
	res := fakeResolver{
		"rebind.test": loopback,
		"mixed.test":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.7")},
		"localhost":   loopback,
	}
	t.Run("name resolving to loopback", func(t *testing.T) {
		_, get := probe(t, Options{Resolver: res}, "http://rebind.test:"+s.port())
		r := get("http://rebind.test:" + s.port() + "/")
		if r.Err != "denied" {
			t.Fatalf("got %+v, want denied", r)
		}
		contains(t, r.Message, "rebind.test")
		contains(t, r.Message, "127.0.0.1")
	})
	t.Run("one private answer among public ones", func(t *testing.T) {
		_, get := probe(t, Options{Resolver: res}, "http://mixed.test:"+s.port())
		if r := get("http://mixed.test:" + s.port() + "/"); r.Err != "denied" {
			t.Fatalf("got %+v, want denied", r)
		}
	})
	if s.hits.Load() != 0 {
		t.Fatal("a rebound name reached the loopback server")
	}
	t.Run("localhost named explicitly", func(t *testing.T) {
		_, get := probe(t, Options{Resolver: res}, "http://localhost:"+s.port())
		if r := get("http://localhost:" + s.port() + "/"); r.Err != "ok" || r.Body != "internal" {
			t.Fatalf("got %+v", r)
		}
	})
}

// TestHTTPInternalAddressNeedsSameScheme: a literal internal entry admits
// its address for its own scheme only. Here the allowlist names
// https://127.0.0.1:P, and http://rebind.test:P rebinds to 127.0.0.1: the
// plain http request must not reach port P.
func TestHTTPInternalAddressNeedsSameScheme(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal") })
	res := fakeResolver{"rebind.test": loopback}
	t.Run("other scheme", func(t *testing.T) {
		_, get := probe(t, Options{Resolver: res}, "https://127.0.0.1:"+s.port(), "http://rebind.test:"+s.port())
		r := get("http://rebind.test:" + s.port() + "/")
		if r.Err != "denied" {
			t.Fatalf("got %+v, want denied", r)
		}
		contains(t, r.Message, "127.0.0.1:"+s.port())
		if s.hits.Load() != 0 {
			t.Fatal("an http request reached an address allowlisted for https only")
		}
	})
	t.Run("same scheme", func(t *testing.T) {
		_, get := probe(t, Options{Resolver: res}, "http://127.0.0.1:"+s.port(), "http://rebind.test:"+s.port())
		if r := get("http://rebind.test:" + s.port() + "/"); r.Err != "ok" || r.Body != "internal" {
			t.Fatalf("got %+v", r)
		}
	})
}

// TestHTTPSAllowed: the request's scheme reaches the dialler for TLS
// connections too (HTTP/1.1 and HTTP/2), so an https entry naming a
// loopback address admits it, and the http entry on the same port does not.
func TestHTTPSAllowed(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%t", h2), func(t *testing.T) {
			s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Proto) }))
			s.EnableHTTP2 = h2
			s.StartTLS()
			t.Cleanup(s.Close)
			_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
			opts := Options{TLSClientConfig: s.Client().Transport.(*http.Transport).TLSClientConfig,
				Resolver: fakeResolver{"tls.test": loopback}}
			opts.EnsureDefaults()
			h, err := newHTTPCap("c", []string{"https://127.0.0.1:" + port}, &opts)
			if err != nil {
				t.Fatal(err)
			}
			defer h.close()
			resp := h.do(context.Background(), abi.HTTPRequest{Method: "GET", URL: s.URL + "/"})
			want := "HTTP/1.1"
			if h2 {
				want = "HTTP/2.0"
			}
			if resp.Err != abi.HTTPOK || string(resp.Body) != want {
				t.Fatalf("got err=%v %q body %q, want %s", resp.Err, resp.Message, resp.Body, want)
			}
			h, err = newHTTPCap("c", []string{"http://127.0.0.1:" + port, "https://tls.test:" + port}, &opts)
			if err != nil {
				t.Fatal(err)
			}
			defer h.close()
			resp = h.do(context.Background(), abi.HTTPRequest{Method: "GET", URL: "https://tls.test:" + port + "/"})
			if resp.Err != abi.HTTPDenied {
				t.Fatalf("https to a loopback port allowlisted for http only: err=%v %q", resp.Err, resp.Message)
			}
		})
	}
}

func TestHTTPResponseTooLarge(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length
		}
		w.Write([]byte(strings.Repeat("x", 4096)))
	})
	_, get := probe(t, Options{MaxHTTPResponseBytes: 1024}, "http://127.0.0.1:"+s.port())
	for _, path := range []string{"/sized", "/chunked"} {
		if r := get(s.URL + path); r.Err != "too_large" {
			t.Fatalf("%s: got %+v, want too_large", path, r)
		}
	}
}

func TestHTTPTimeout(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	_, get := probe(t, Options{HTTPTimeout: 50 * time.Millisecond}, "http://127.0.0.1:"+s.port())
	if r := get(s.URL + "/"); r.Err != "timeout" {
		t.Fatalf("got %+v, want timeout", r)
	}
}

func TestParseOrigin(t *testing.T) {
	good := map[string]origin{
		"https://api.stripe.com:443": {"https", "api.stripe.com", "443"},
		"HTTP://LocalHost:8025":      {"http", "localhost", "8025"},
		"http://[::1]:80":            {"http", "::1", "80"},
		"http://127.0.0.1:1/":        {"http", "127.0.0.1", "1"},
	}
	for in, want := range good {
		got, err := parseOrigin(in)
		if err != nil || got != want {
			t.Errorf("parseOrigin(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"api.stripe.com:443", "https://api.stripe.com", "ftp://h:21", "https://h:0", "https://h:99999", "https://u:p@h:443", "https://h:443/v1", "https://h:443?q", "https://:443"} {
		if _, err := parseOrigin(in); !errors.Is(err, ErrBadCapability) {
			t.Errorf("parseOrigin(%q) err = %v, want ErrBadCapability", in, err)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	h := &httpCap{connector: "c", allow: []origin{
		{"http", "127.0.0.1", "8025"},
		{"http", "localhost", "9000"},
		{"https", "api.stripe.com", "443"},
	}}
	tests := []struct {
		scheme, addr, port string
		ok                 bool
	}{
		{"https", "93.184.216.34", "443", true},
		{"http", "127.0.0.1", "8025", true},
		{"http", "::ffff:127.0.0.1", "8025", true},
		{"http", "127.0.0.1", "443", false},
		{"http", "127.0.0.2", "8025", false},
		{"http", "127.0.0.5", "9000", true},
		{"http", "::1", "9000", true},
		// An entry admits its internal address for its own scheme only.
		{"https", "127.0.0.1", "8025", false},
		{"https", "::ffff:127.0.0.1", "8025", false},
		{"https", "127.0.0.5", "9000", false},
		{"", "127.0.0.1", "8025", false},
		{"https", "10.1.2.3", "443", false},
		{"https", "192.168.0.1", "443", false},
		{"https", "172.16.0.1", "443", false},
		{"https", "169.254.169.254", "443", false},
		{"https", "0.0.0.0", "443", false},
		{"https", "100.64.0.1", "443", false},
		{"https", "fd00::1", "443", false},
		{"https", "fe80::1", "443", false},
		{"https", "::", "443", false},
		{"https", "64:ff9b::a00:1", "443", false},
	}
	for _, tc := range tests {
		err := h.checkAddr(tc.scheme, netip.MustParseAddr(tc.addr), tc.port)
		if (err == nil) != tc.ok {
			t.Errorf("checkAddr(%s, %s, %s) = %v, want ok=%v", tc.scheme, tc.addr, tc.port, err, tc.ok)
		}
	}
}
