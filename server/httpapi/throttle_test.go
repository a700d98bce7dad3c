package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log sink safe to read while the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestThrottleGuesses: a source that keeps presenting tokens no principal
// has is answered 401 for its first AuthFailureBurst guesses and then 429
// rate_limited with Retry-After, before its token is looked at (a right
// one included), while another source is not slowed; a token id guessed
// at the server proof counts alike. The log holds one WARN line per 401
// and one summary line, not a line per guess. Before, 580 guesses a second
// were all looked at, each with its WARN line.
func TestThrottleGuesses(t *testing.T) {
	env := newTestExecutor(t)
	clock := &testClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	log := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	srv := env.serve(t, Options{Principals: testPrincipals(), Logger: logger,
		Throttle: NewThrottle(ThrottleOptions{ForwardedFor: true, Logger: logger, Now: clock.Now})})
	send := func(source, token string) response {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/executions", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Forwarded-For", "203.0.113.9, "+source)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return response{status: resp.StatusCode, header: resp.Header, body: b.Bytes()}
	}
	const attacker, bystander = "198.51.100.7", "192.0.2.44"
	var got []int
	for i := 0; i < 200; i++ {
		got = append(got, send(attacker, "guess-"+strings.Repeat("x", i%7)).status)
	}
	for i, status := range got {
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < AuthFailureBurst]; status != want {
			t.Fatalf("guess %d: %d, want %d (all: %v)", i+1, status, want, got)
		}
	}
	r := send(attacker, "tok-rita")
	p := r.problem(t, CodeRateLimited)
	if r.header.Get("Retry-After") == "" || p.RetryAfter < 1 {
		t.Errorf("a throttled request without Retry-After: %v %+v", r.header, p)
	}
	if r := send(bystander, "tok-rita"); r.status != http.StatusOK {
		t.Errorf("another source, a right token: %d %s", r.status, r.body)
	}
	// The server proof takes token ids, which stand for tokens.
	proof := func(source string) int {
		body, _ := json.Marshal(ProofRequest{Nonce: strings.Repeat("ab", 32), TokenID: strings.Repeat("0", 32)})
		req, _ := http.NewRequest("POST", srv.URL+"/v1/auth/proof", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", source)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := proof(attacker); s != http.StatusTooManyRequests {
		t.Errorf("a throttled source's proof request: %d, want 429", s)
	}
	// The bystander's unknown token ids count against it too.
	var proofs []int
	for i := 0; i < AuthFailureBurst+1; i++ {
		proofs = append(proofs, proof(bystander))
	}
	if proofs[AuthFailureBurst-1] != http.StatusUnauthorized || proofs[AuthFailureBurst] != http.StatusTooManyRequests {
		t.Errorf("unknown token ids: %v, want %d 401s then 429", proofs, AuthFailureBurst)
	}

	// A failure's worth of time later the attacker may try once more,
	// and a right token goes through.
	clock.Advance(AuthFailureInterval)
	if r := send(attacker, "tok-rita"); r.status != http.StatusOK {
		t.Errorf("after %s, a right token: %d", AuthFailureInterval, r.status)
	}

	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	warn, summary := 0, 0
	for _, l := range lines {
		if strings.Contains(l, "level=WARN") {
			warn++
		}
		if strings.Contains(l, "authentication throttled") && strings.Contains(l, "source="+attacker) {
			summary++
		}
	}
	if summary != 1 || warn != 2*AuthFailureBurst+2 {
		t.Errorf("%d WARN lines (want %d: one per 401, one summary per source), %d summaries of the attacker:\n%s",
			warn, 2*AuthFailureBurst+2, summary, log.String())
	}
}

// TestThrottleSource: the source of a request is its connection's
// address, an IPv6 address by its /64, and behind a proxy the last
// address of X-Forwarded-For.
func TestThrottleSource(t *testing.T) {
	direct, proxied := NewThrottle(ThrottleOptions{}), NewThrottle(ThrottleOptions{ForwardedFor: true})
	for _, tc := range []struct {
		remote string
		xff    []string
		direct string
		behind string
	}{
		{"203.0.113.9:4711", nil, "203.0.113.9", "203.0.113.9"},
		{"[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
		{"127.0.0.1:5000", []string{"198.51.100.1, 192.0.2.7"}, "127.0.0.1", "192.0.2.7"},
		{"127.0.0.1:5000", []string{"10.0.0.1", "2001:db8::1"}, "127.0.0.1", "2001:db8::/64"},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := direct.Source(r); got != tc.direct {
			t.Errorf("%s %v: source %q, want %q", tc.remote, tc.xff, got, tc.direct)
		}
		if got := proxied.Source(r); got != tc.behind {
			t.Errorf("%s %v behind a proxy: source %q, want %q", tc.remote, tc.xff, got, tc.behind)
		}
	}
}
