package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scope is what one caller of the executor may reach and spend: the
// namespaces it acts in and its limits. A server puts the scope of each
// authenticated principal into the context of its requests (WithScope);
// a context without one is unscoped, as every call through the Go API was
// before scopes: every namespace, no limits.
//
// Within a scope, Execute runs calls in the scope's namespaces only, and
// every method that names an execution or an approval (Get, Cancel,
// Resolve, Approve, Reject) answers one of another namespace exactly as
// an unknown id (ErrNotFound), so a caller learns nothing of another
// tenant's work; Recover decides only the scope's executions. See
// RATIONALE.md, "Why does the namespace come from the credential?" and
// "Why do limits live in the scope, enforced by the executor?".
type Scope struct {
	// Principal names the caller in refusals and, as the record's
	// RequestedBy, in every execution it creates (reviewers see who
	// asked).
	Principal string
	// Namespaces are the namespaces the caller acts in; a call that names
	// none runs in the first. Empty means every namespace, and a call that
	// names none runs in Options.Namespace.
	Namespaces []string
	// MaxPendingApprovals refuses a new approval-gated call (a
	// *LimitError wrapping ErrPendingApprovalsLimit) while the caller's
	// namespaces (every namespace, for an unscoped caller) hold this many
	// executions awaiting approval; calls already recorded are answered as
	// ever. Concurrent calls may exceed it by their number. 0 means no
	// limit.
	MaxPendingApprovals int
	// MaxArgumentBytes refuses a call whose arguments are longer (a
	// *LimitError wrapping ErrArgumentsTooLarge). 0 means no limit.
	MaxArgumentBytes int
	// Rate limits the caller's Execute calls (a *RateLimitedError beyond
	// it). A Rate is shared by every request of the caller; nil means no
	// limit.
	Rate *Rate
}

// Errors of a caller's scope (see Scope). Nothing was recorded for a call
// refused with any of them: the same call may be sent again later.
var (
	// ErrNamespaceForbidden: the call names a namespace outside the
	// caller's scope.
	ErrNamespaceForbidden = errors.New("host: namespace outside the caller's scope")
	// ErrRateLimited: the caller sent more calls than its rate allows;
	// see *RateLimitedError.
	ErrRateLimited = errors.New("host: call rate limit reached")
	// ErrPendingApprovalsLimit: the caller's namespaces hold as many
	// executions awaiting approval as its scope allows.
	ErrPendingApprovalsLimit = errors.New("host: pending approvals limit reached")
	// ErrArgumentsTooLarge: the arguments are longer than the caller's
	// scope allows.
	ErrArgumentsTooLarge = errors.New("host: arguments too large")
)

type scopeKey struct{}

// WithScope returns a context whose calls the executor confines to s.
func WithScope(ctx context.Context, s Scope) context.Context {
	s.Namespaces = slices.Clone(s.Namespaces)
	return context.WithValue(ctx, scopeKey{}, s)
}

// ScopeFrom returns the scope WithScope put into ctx, if any.
func ScopeFrom(ctx context.Context) (Scope, bool) {
	s, ok := ctx.Value(scopeKey{}).(Scope)
	return s, ok
}

// Allows reports whether the scope reaches namespace ns.
func (s Scope) Allows(ns string) bool {
	return len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, ns)
}

// inScope reports whether ctx's scope (if any) reaches namespace ns.
func inScope(ctx context.Context, ns string) bool {
	s, ok := ScopeFrom(ctx)
	return !ok || s.Allows(ns)
}

// namespaceOf returns the namespace a call runs in under ctx's scope, or
// refuses a namespace the scope does not reach.
func (e *Executor) namespaceOf(ctx context.Context, ns string) (string, error) {
	s, scoped := ScopeFrom(ctx)
	if ns == "" {
		if scoped && len(s.Namespaces) > 0 {
			return s.Namespaces[0], nil
		}
		return e.opts.Namespace, nil
	}
	if scoped && !s.Allows(ns) {
		return "", refuse(ErrNamespaceForbidden, "principal %q acts in namespace %s, not %q; nothing was recorded: leave namespace out (the call then runs in %q) or send the call with a credential of namespace %q",
			s.Principal, quoteList(s.Namespaces), ns, s.Namespaces[0], ns)
	}
	return ns, nil
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// admitCall applies ctx's rate and argument limits to a call.
func (e *Executor) admitCall(ctx context.Context, call ToolCall) error {
	s, ok := ScopeFrom(ctx)
	if !ok {
		return nil
	}
	if s.Rate != nil {
		if wait, ok := s.Rate.take(e.now()); !ok {
			return &RateLimitedError{Principal: s.Principal, PerSecond: s.Rate.perSecond, RetryAfter: wait}
		}
	}
	if n := len(call.Arguments); s.MaxArgumentBytes > 0 && n > s.MaxArgumentBytes {
		return &LimitError{err: ErrArgumentsTooLarge, detail: fmt.Sprintf(
			"the arguments are %d bytes, more than the %d principal %q may send in one call; nothing was recorded", n, s.MaxArgumentBytes, s.Principal)}
	}
	return nil
}

// admitApproval applies ctx's pending approvals limit to a new
// approval-gated call.
func (e *Executor) admitApproval(ctx context.Context) error {
	s, ok := ScopeFrom(ctx)
	if !ok || s.MaxPendingApprovals <= 0 {
		return nil
	}
	n := 0
	for _, ns := range cmpOr(s.Namespaces, []string{""}) {
		c, err := e.led.AwaitingApproval(ctx, ns)
		if err != nil {
			return err
		}
		n += c
	}
	if n < s.MaxPendingApprovals {
		return nil
	}
	where := "in every namespace"
	if len(s.Namespaces) > 0 {
		where = "in namespace " + quoteList(s.Namespaces)
	}
	return &LimitError{err: ErrPendingApprovalsLimit, detail: fmt.Sprintf(
		"%d executions await approval %s, the limit of principal %q; nothing was recorded: send the call again once reviewers have decided some (or they expired)",
		n, where, s.Principal)}
}

func cmpOr(ss, def []string) []string {
	if len(ss) == 0 {
		return def
	}
	return ss
}

// LimitError refuses a call that exceeds a limit of its caller's scope
// (ErrPendingApprovalsLimit, ErrArgumentsTooLarge). Nothing was recorded.
type LimitError struct {
	err    error
	detail string
}

func (e *LimitError) Error() string { return e.err.Error() + ": " + e.detail }

// Unwrap returns the limit's sentinel.
func (e *LimitError) Unwrap() error { return e.err }

// Detail says which limit and what to do.
func (e *LimitError) Detail() string { return e.detail }

// RateLimitedError refuses a call beyond its caller's rate (Scope.Rate).
// Nothing was recorded; the same call may be sent again after RetryAfter.
type RateLimitedError struct {
	Principal  string
	PerSecond  float64
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return "host: " + e.Detail() }

// Unwrap returns ErrRateLimited.
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }

// Detail names the rate and when to call again.
func (e *RateLimitedError) Detail() string {
	return fmt.Sprintf("principal %q may make %g calls per second; nothing was recorded: send the call again (same ids) in %s",
		e.Principal, e.PerSecond, e.RetryAfter.Round(time.Millisecond))
}

// Rate is a token bucket: calls at perSecond on average, and up to burst
// at once. It is safe for concurrent use.
type Rate struct {
	perSecond, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewRate returns a full bucket of burst calls (at least one) refilled at
// perSecond, which must be positive.
func NewRate(perSecond float64, burst int) *Rate {
	b := math.Max(1, float64(burst))
	return &Rate{perSecond: perSecond, burst: b, tokens: b}
}

// take takes one call at now, or says how long until one is available.
func (r *Rate) take(now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() && now.After(r.last) {
		r.tokens = math.Min(r.burst, r.tokens+now.Sub(r.last).Seconds()*r.perSecond)
	}
	if r.last.IsZero() || now.After(r.last) {
		r.last = now
	}
	if r.tokens >= 1 {
		r.tokens--
		return 0, true
	}
	return time.Duration(math.Ceil((1 - r.tokens) / r.perSecond * float64(time.Second))), false
}

// NamespaceProblem says what is wrong with ns as the namespace of a scope
// or a call, or "" when nothing is: it must be non-empty, valid UTF-8
// without control characters and at most MaxIdentityBytes long.
func NamespaceProblem(ns string) string {
	if ns == "" {
		return "is empty"
	}
	return identityProblem(ns)
}
