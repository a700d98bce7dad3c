package httpapi

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Throttle limits failed authentications per source: a bearer token no
// principal has, a token id the server proof does not know, a console
// sign-in with a wrong token. Each source may fail AuthFailureBurst times
// at once and then once every AuthFailureInterval; beyond that, its
// requests that need a credential are refused (429 rate_limited with
// Retry-After) before their credential is looked at, a correct one
// included, so that guessing goes no faster. A request with a valid
// credential never counts. Refusals are logged as one summary line per
// source and minute, not one line each.
//
// The source is the connection's address (an IPv6 address by its /64);
// behind a proxy (ThrottleOptions.ForwardedFor) it is the address the
// proxy appended to X-Forwarded-For. A Throttle is safe for concurrent
// use; the API and the console share one.
type Throttle struct {
	opts ThrottleOptions

	mu sync.Mutex
	m  map[string]*failures
}

// ThrottleOptions configures a Throttle.
type ThrottleOptions struct {
	// ForwardedFor takes a request's source from the last address of its
	// X-Forwarded-For header, which a proxy in front appends, instead of
	// the connection's (the proxy's own) address. Only for a listener
	// that nothing but the proxy can reach: a client that reaches it
	// directly names any source it likes. The default value is false.
	ForwardedFor bool
	// Logger receives the summary lines. The default value is
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock. The default value is time.Now.
	Now func() time.Time
}

// The throttle's pace.
const (
	// AuthFailureBurst is how many failures a source may make at once.
	AuthFailureBurst = 10
	// AuthFailureInterval is how often a source may fail once its burst
	// is spent.
	AuthFailureInterval = 6 * time.Second
	// maxThrottled bounds the sources a Throttle remembers; beyond it
	// the ones that have earned their whole burst back are forgotten,
	// and new sources share one entry until there is room.
	maxThrottled = 10000
	// summaryInterval is how often a throttled source is logged.
	summaryInterval = time.Minute
)

// failures is one source's bucket of allowed failures.
type failures struct {
	allowance float64 // failures it may make now, at most AuthFailureBurst
	at        time.Time
	// Counted since the last summary line.
	failed, refused int
	logged          time.Time
}

// NewThrottle returns a Throttle with o's options.
func NewThrottle(o ThrottleOptions) *Throttle {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Throttle{opts: o, m: map[string]*failures{}}
}

// Source returns the source r's failures count against.
func (t *Throttle) Source(r *http.Request) string {
	addr := r.RemoteAddr
	if t.opts.ForwardedFor {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			hops := strings.Split(xff[len(xff)-1], ",")
			addr = strings.TrimSpace(hops[len(hops)-1])
		}
	}
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	default:
		// One host of IPv6 holds a /64: counting its addresses apart
		// would let it fail 2^64 times as often.
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
}

// entry returns source's bucket, refilled to now. t.mu is held.
func (t *Throttle) entry(source string, now time.Time) *failures {
	f, ok := t.m[source]
	if !ok {
		if len(t.m) >= maxThrottled {
			for s, g := range t.m {
				if g.refill(now) >= AuthFailureBurst && g.failed == 0 && g.refused == 0 {
					delete(t.m, s)
				}
			}
		}
		if len(t.m) >= maxThrottled {
			source = "(others)"
			if f, ok = t.m[source]; ok {
				f.refill(now)
				return f
			}
		}
		f = &failures{allowance: AuthFailureBurst, at: now}
		t.m[source] = f
		return f
	}
	f.refill(now)
	return f
}

func (f *failures) refill(now time.Time) float64 {
	if d := now.Sub(f.at); d > 0 {
		f.allowance = math.Min(AuthFailureBurst, f.allowance+d.Seconds()/AuthFailureInterval.Seconds())
		f.at = now
	}
	return f.allowance
}

// Allow reports whether a request of r's source may have its credential
// looked at; when not, retryAfter says when it may, and the refusal is
// counted for the summary line.
func (t *Throttle) Allow(r *http.Request) (retryAfter time.Duration, ok bool) {
	source := t.Source(r)
	now := t.opts.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.entry(source, now)
	if f.allowance >= 1 {
		return 0, true
	}
	f.refused++
	t.summarise(r, source, f, now)
	return time.Duration((1 - f.allowance) * float64(AuthFailureInterval)), false
}

// Failed counts a failed authentication of r's source.
func (t *Throttle) Failed(r *http.Request) {
	source := t.Source(r)
	now := t.opts.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.entry(source, now)
	f.allowance = math.Max(0, f.allowance-1)
	f.failed++
	if f.allowance < 1 {
		t.summarise(r, source, f, now)
	}
}

// summarise logs f's counts, at most once per summaryInterval. t.mu is
// held.
func (t *Throttle) summarise(r *http.Request, source string, f *failures, now time.Time) {
	if !f.logged.IsZero() && now.Sub(f.logged) < summaryInterval {
		return
	}
	attrs := []any{"source", source, "failed", f.failed, "refused", f.refused,
		"pace", fmt.Sprintf("%d failures, then one every %s", AuthFailureBurst, AuthFailureInterval)}
	if !f.logged.IsZero() {
		attrs = append(attrs, "over", now.Sub(f.logged).Round(time.Second).String())
	}
	t.opts.Logger.WarnContext(r.Context(), "authentication throttled: too many credentials no principal has from one source; its requests are refused until it slows down", attrs...)
	f.failed, f.refused, f.logged = 0, 0, now
}
