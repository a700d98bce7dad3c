package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/connhost/connhost/host"
)

// Role is what a principal may do through the API. A route names the roles
// that may call it; a principal holds one or more roles.
type Role string

// The roles. Every authenticated principal but a metrics-only one may
// read (list and get executions, tool definitions, metrics, the OpenAPI
// document).
const (
	// RoleRuntime executes calls (POST /v1/executions), cancels them and
	// runs recovery: what an agent runtime needs, and no more. It can never
	// approve, reject or resolve.
	RoleRuntime Role = "runtime"
	// RoleApprover decides approval requests (approve, reject) and
	// resolves recovery_required executions.
	RoleApprover Role = "approver"
	// RoleOperator resolves recovery_required executions, cancels
	// executions and runs recovery.
	RoleOperator Role = "operator"
	// RoleMetrics reads GET /metrics and nothing else: a scraper's
	// credential, which shows no execution, argument or tool.
	RoleMetrics Role = "metrics"
)

// Roles lists every role.
var Roles = []Role{RoleRuntime, RoleApprover, RoleOperator, RoleMetrics}

// Principal is an identity the API acts for: an authenticated credential,
// or the anonymous principal of a server without credentials.
type Principal struct {
	// Name identifies the principal in the audit trail: it is recorded as
	// the reviewer of its approvals and rejections and as the actor of its
	// resolutions and cancellations. It must match PrincipalNameRE.
	Name string
	// Roles are what the principal may do; at least one.
	Roles []Role
	// Token is the bearer token that authenticates the principal. It is
	// empty only for Options.Anonymous.
	Token string
	// Namespaces are the namespaces the principal acts in (host.Scope):
	// its calls run in the first unless they name another of these, a
	// call or a listing naming any other is refused (403
	// namespace_forbidden), and an execution or approval of any other
	// answers 404 as an unknown id. Each must be a valid namespace
	// (host.NamespaceProblem). The default value (none) means every
	// namespace, as for every principal before namespaces.
	Namespaces []string
	// Limits bound what the principal may spend. The zero value limits
	// nothing.
	Limits Limits
}

// Limits are a principal's limits (see host.Scope). Zero fields limit
// nothing.
type Limits struct {
	// MaxPendingApprovals refuses a new approval-gated call (429
	// too_many_pending_approvals) while the principal's namespaces hold
	// this many executions awaiting approval.
	MaxPendingApprovals int
	// MaxArgumentBytes refuses a call whose arguments are longer (413
	// arguments_too_large).
	MaxArgumentBytes int
	// CallsPerSecond limits the principal's calls (POST /v1/executions and
	// MCP tools/call) to this average rate, with bursts of Burst (at
	// least 1; 0 means CallsPerSecond rounded up); beyond it a call is
	// refused with 429 rate_limited and a Retry-After header.
	CallsPerSecond float64
	Burst          int
}

// scope returns the host.Scope of p's requests, with a rate limiter of its
// own.
func (p Principal) scope() host.Scope {
	s := host.Scope{Principal: p.Name, Namespaces: slices.Clone(p.Namespaces),
		MaxPendingApprovals: p.Limits.MaxPendingApprovals, MaxArgumentBytes: p.Limits.MaxArgumentBytes}
	if p.Limits.CallsPerSecond > 0 {
		burst := p.Limits.Burst
		if burst <= 0 {
			burst = int(math.Ceil(p.Limits.CallsPerSecond))
		}
		s.Rate = host.NewRate(p.Limits.CallsPerSecond, burst)
	}
	return s
}

// Has reports whether p holds any of roles.
func (p Principal) Has(roles ...Role) bool {
	return slices.ContainsFunc(roles, func(r Role) bool { return slices.Contains(p.Roles, r) })
}

// PrincipalNameRE is the form of a principal's name: letters, digits and
// ". _ @ -", at most 64 characters, starting with a letter or digit. A
// colon is never part of one, so the names the CLI records when it opens
// the ledger directly ("local:<user>") cannot be mistaken for a principal.
var PrincipalNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// The anonymous principals of servers without credentials.
var (
	// LoopbackRuntime is the default Options.Anonymous: requests to a
	// loopback server without credentials may execute and read, not
	// decide approvals or resolve.
	LoopbackRuntime = Principal{Name: "loopback", Roles: []Role{RoleRuntime}}
	// DevLoopback is the anonymous principal of `connhost dev`: anyone on
	// the machine holds every role, and the audit trail says so.
	DevLoopback = Principal{Name: "dev-loopback", Roles: []Role{RoleRuntime, RoleApprover, RoleOperator}}
)

// ErrInvalidOptions is returned by [Options.Validate] (wrapped, once per
// problem).
var ErrInvalidOptions = errors.New("httpapi: invalid options")

// Validate reports every problem of the principals at once: names that
// are malformed or used twice, unknown or missing roles, tokens that are
// empty or shared by two principals.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	names := map[string]bool{}
	tokens := map[[sha256.Size]byte]string{}
	check := func(what string, p Principal, anonymous bool) {
		if !PrincipalNameRE.MatchString(p.Name) {
			bad("%s: name %q must match %s", what, p.Name, PrincipalNameRE)
		}
		if names[p.Name] {
			bad("%s: name %q is used twice", what, p.Name)
		}
		names[p.Name] = true
		if len(p.Roles) == 0 {
			bad("%s %q has no role", what, p.Name)
		}
		for _, r := range p.Roles {
			if !slices.Contains(Roles, r) {
				bad("%s %q: unknown role %q", what, p.Name, r)
			}
		}
		switch {
		case anonymous && p.Token != "":
			bad("%s %q has a token", what, p.Name)
		case !anonymous && p.Token == "":
			bad("%s %q has an empty token", what, p.Name)
		case !anonymous:
			sum := sha256.Sum256([]byte(p.Token))
			if other, dup := tokens[sum]; dup {
				bad("principals %q and %q have the same token", other, p.Name)
			}
			tokens[sum] = p.Name
		}
		for i, ns := range p.Namespaces {
			if msg := host.NamespaceProblem(ns); msg != "" {
				bad("%s %q: namespace %q %s", what, p.Name, ns, msg)
			}
			if slices.Contains(p.Namespaces[:i], ns) {
				bad("%s %q: namespace %q listed twice", what, p.Name, ns)
			}
		}
		l := p.Limits
		if l.MaxPendingApprovals < 0 || l.MaxArgumentBytes < 0 || l.CallsPerSecond < 0 || l.Burst < 0 ||
			math.IsNaN(l.CallsPerSecond) || math.IsInf(l.CallsPerSecond, 0) {
			bad("%s %q: limits must be finite and not negative: %+v", what, p.Name, l)
		}
	}
	for i, p := range o.Principals {
		check(fmt.Sprintf("principal %d", i), p, false)
	}
	if o.Anonymous != nil && len(o.Principals) == 0 {
		check("anonymous principal", *o.Anonymous, true)
	}
	return errors.Join(errs...)
}

// credential is a principal with its token's digest and id (TokenID), and
// the scope of its requests.
type credential struct {
	p     Principal
	sum   [sha256.Size]byte
	id    string
	scope host.Scope
}

type principalKey struct{}

// principalOf returns the principal the request acts for; the
// authenticate middleware put it there.
func principalOf(r *http.Request) Principal {
	p, _ := r.Context().Value(principalKey{}).(Principal)
	return p
}

// PrincipalFromContext returns the principal a request acts for, from
// the context of a request that the API's authentication has let through:
// the handler mounted as Options.MCP reads its caller with it.
func PrincipalFromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// withPrincipal returns r acting for c's principal, within its scope.
func withPrincipal(r *http.Request, c *credential) *http.Request {
	if n := noteOf(r.Context()); n != nil {
		n.principal = c.p.Name
	}
	ctx := context.WithValue(r.Context(), principalKey{}, c.p)
	return r.WithContext(host.WithScope(ctx, c.scope))
}

// authenticate resolves the request's bearer token to a principal and puts
// it, and the host.Scope of its requests, in the request's context.
// Without credentials every request acts as the anonymous principal
// (checkHost keeps such a server to loopback Host names).
func (a *api) authenticate(next http.Handler) http.Handler {
	if len(a.creds) == 0 {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, withPrincipal(r, &a.anon))
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearerToken(r.Header.Get("Authorization"))
		if ok && !a.admit(w, r) {
			return
		}
		sum := sha256.Sum256([]byte(got))
		// Comparing fixed-size digests keeps each comparison constant-time
		// regardless of the presented token's length, and every candidate
		// is compared, so the time does not tell which one matched.
		match := -1
		for i := range a.creds {
			if subtle.ConstantTimeCompare(sum[:], a.creds[i].sum[:]) == 1 {
				match = i
			}
		}
		if !ok || match < 0 {
			if ok {
				a.opts.Throttle.Failed(r)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="connhost"`)
			writeProblem(w, NewProblem(CodeUnauthorized, "this endpoint requires Authorization: Bearer <token>"))
			return
		}
		next.ServeHTTP(w, withPrincipal(r, &a.creds[match]))
	})
}

// admit refuses, with 429 rate_limited, a request whose source has
// failed to authenticate too often (Options.Throttle), before its
// credential is looked at; its access log line is then at DEBUG, the
// throttle's summary line standing for it.
func (a *api) admit(w http.ResponseWriter, r *http.Request) bool {
	wait, ok := a.opts.Throttle.Allow(r)
	if ok {
		return true
	}
	NoteThrottled(r.Context())
	p := NewProblem(CodeRateLimited, fmt.Sprintf("too many credentials no principal has came from this source; retry after %s", wait.Round(time.Second)))
	p.RetryAfter = max(1, int(math.Ceil(wait.Seconds())))
	writeProblem(w, p)
	return false
}

// authorize refuses a principal that holds none of the route's roles:
// approval_not_configured for a human decision that no principal of this
// server may make (a deployment without approvers), forbidden_role
// otherwise.
func (a *api) authorize(rt route, next http.Handler) http.Handler {
	if rt.roles == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		if p.Has(rt.roles...) {
			next.ServeHTTP(w, r)
			return
		}
		needed := rolesText(rt.roles)
		var prob *Problem
		if rt.decision && !a.configured(rt.roles...) {
			prob = NewProblem(CodeApprovalNotConfigured, fmt.Sprintf(
				"%s %s needs role %s, and no principal of this server has it; add a [[principals]] entry with role %s to the server's config",
				rt.method, rt.path, needed, needed))
		} else {
			prob = NewProblem(CodeForbiddenRole, fmt.Sprintf("%s %s needs role %s; principal %q has %s",
				rt.method, rt.path, needed, p.Name, rolesText(p.Roles)))
		}
		prob.RequiredRoles = rt.roles
		writeProblem(w, prob)
	})
}

// configured reports whether some principal of the server holds one of
// roles.
func (a *api) configured(roles ...Role) bool {
	if len(a.creds) == 0 {
		return a.opts.Anonymous.Has(roles...)
	}
	for _, c := range a.creds {
		if c.p.Has(roles...) {
			return true
		}
	}
	return false
}

func rolesText(roles []Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}

// actor returns the identity a human decision is recorded under: the
// authenticated principal's name. claimed is the request body's "by". A
// principal with a token cannot sign as someone else: a claimed name other
// than its own is refused (ok false, the problem written). The anonymous
// principal cannot prove any name, so a claimed name is kept only as
// text in the reason, never as the actor.
func (a *api) actor(w http.ResponseWriter, r *http.Request, claimed, reason string) (by, why string, ok bool) {
	p := principalOf(r)
	if claimed == "" || claimed == p.Name {
		return p.Name, reason, true
	}
	if p.Token != "" {
		writeProblem(w, NewProblem(CodeIdentityMismatch, fmt.Sprintf(
			"the body's by %q is not the authenticated principal %q: a decision is recorded under the credential's name; omit by or send %q",
			claimed, p.Name, p.Name)))
		return "", "", false
	}
	why = "claimed by " + claimed
	if reason != "" {
		why += ": " + reason
	}
	return p.Name, why, true
}
