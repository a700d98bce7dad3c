// Package httpapi serves connhost's executor over HTTP: JSON requests and
// responses, RFC 9457 problem documents with stable codes for errors,
// Prometheus metrics, and tool definitions for models. `connhost serve` and
// `connhost dev` mount [New]; openapi.json in this directory documents every
// route, and a test keeps the two in step.
//
// Every execution status (succeeded, failed, awaiting_approval,
// recovery_required, …) is a 200 answer carrying a host.Result: a status is
// an answer, not an error. Problems are reserved for requests the executor
// refused (intent mismatch, fenced session, bad input, …).
package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/buildinfo"
	"github.com/connhost/connhost/internal/strictjson"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/server/tooldefs"
)

// OpenAPI is the OpenAPI 3.1 document of the API, served at
// GET /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// DefaultMaxBodyBytes is the default request body cap (1 MiB).
const DefaultMaxBodyBytes = 1 << 20

// Options configures the handler returned by [New].
type Options struct {
	// Principals are the credentials the API accepts, each a bearer token
	// (`Authorization: Bearer <token>`) standing for a named principal
	// with roles. With at least one, every endpoint except GET /healthz
	// and POST /v1/auth/proof (see proof.go) requires a token of one of
	// them; the token is compared in constant time with every
	// principal's. The default value (none) disables
	// authentication: every request then acts as Anonymous, and the
	// handler accepts only requests whose Host header names a loopback
	// address or localhost, so a web page cannot reach an unauthenticated
	// loopback server through DNS rebinding.
	Principals []Principal
	// Anonymous is the principal of every request when Principals is
	// empty (it is ignored otherwise). The default value is
	// &LoopbackRuntime, which may execute and read but not approve,
	// reject or resolve; `connhost dev` passes &DevLoopback.
	Anonymous *Principal
	// MaxBodyBytes caps request bodies; a larger body is refused with
	// payload_too_large before it reaches the executor. The default value
	// is DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// Logger receives one record per request (method, path, status,
	// duration, principal, execution or approval id, problem code; never
	// bodies or headers; 401 and 403 at WARN) and the causes of internal
	// errors. The default value is slog.Default().
	Logger *slog.Logger
	// MCP, when set, is served at /mcp (POST, GET and DELETE: the MCP
	// streamable HTTP transport) behind the same authentication as every
	// other route, to principals with role runtime; it finds the caller
	// with PrincipalFromContext. The default value (nil) answers /mcp with
	// not_found.
	MCP http.Handler
	// Console, when set, is served at /ui/ (every method), and GET /
	// redirects there: the reviewer and operator console (package
	// console), which authenticates its own requests with a session
	// cookie, so the bearer token check does not apply to it; the access
	// log and, without credentials, the loopback Host check do. The
	// default value (nil) answers /ui/ with not_found.
	Console http.Handler
	// Registry is served at GET /metrics; New registers the connector
	// pool collector on it. Pass the registry given to [NewObserver] so the
	// executor's metrics appear too. The default value is a new registry.
	Registry *prometheus.Registry
	// Build identifies the server's build: /metrics reports it as
	// connhost_build_info and GET /openapi.json as info.x-connhost-version
	// (Build.Short()). The default value (zero) reports neither.
	Build buildinfo.Info
	// URLs are the base URLs clients reach the server at (its public URL,
	// its listener's), which the server proof signs for a client that
	// asks (see proof.go): a client compares them with the URL it
	// dialled, so that a relay at another URL cannot pass the real
	// server's proof on. The default value (none) signs none, and such a
	// client refuses to send its token.
	URLs []string
	// Throttle limits failed authentications per source (bearer tokens
	// and server proofs here; the console's sign-ins when it is given the
	// same one). The default value is a new Throttle that logs to Logger
	// and counts sources by their connection's address.
	Throttle *Throttle
	// Secure says clients reach the server over https, whether it
	// terminates TLS itself or a proxy in front does: every answer then
	// carries Strict-Transport-Security, so a browser that has been
	// there once never sends a request, or the console's cookie, over
	// plain http. The default value (false) sends no HSTS.
	Secure bool
	// Now is the clock of the ages /metrics reports (how long the oldest
	// call has waited). The default value is time.Now.
	Now func() time.Time
	// MaxApprovalWait caps the wait parameter of POST /v1/executions: how
	// long one request may be held while its call awaits a reviewer's
	// decision. The default value is DefaultMaxApprovalWait.
	MaxApprovalWait time.Duration
}

// DefaultMaxApprovalWait is the default Options.MaxApprovalWait.
const DefaultMaxApprovalWait = 10 * time.Minute

// EnsureDefaults fills zero fields with their default values.
func (o *Options) EnsureDefaults() {
	if o.Anonymous == nil {
		anon := LoopbackRuntime
		o.Anonymous = &anon
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Throttle == nil {
		o.Throttle = NewThrottle(ThrottleOptions{Logger: o.Logger})
	}
	if o.MaxApprovalWait <= 0 {
		o.MaxApprovalWait = DefaultMaxApprovalWait
	}
}

// route is one registered endpoint. routes() is the single list New
// registers and the OpenAPI test checks.
type route struct {
	method  string
	path    string
	handler func(*api, http.ResponseWriter, *http.Request)
	// open routes need no bearer token.
	open bool
	// roles may call the route; nil (open routes only) means anyone.
	roles []Role
	// decision routes record a human decision (approve, reject,
	// resolve): refused with approval_not_configured when no principal
	// may make it.
	decision bool
}

// Who may call what. Reading is open to every role but metrics, which
// reads /metrics only; the runtime's credential can never decide an
// approval or resolve a call.
var (
	anyRole      = []Role{RoleRuntime, RoleApprover, RoleOperator}
	scrapers     = []Role{RoleRuntime, RoleApprover, RoleOperator, RoleMetrics}
	runtimeOnly  = []Role{RoleRuntime}
	approverOnly = []Role{RoleApprover}
	deciders     = []Role{RoleApprover, RoleOperator}
	cancellers   = []Role{RoleRuntime, RoleOperator}
	operatorOnly = []Role{RoleOperator}
)

func routes() []route {
	return []route{
		{method: "POST", path: "/v1/executions", handler: (*api).execute, roles: runtimeOnly},
		{method: "GET", path: "/v1/executions", handler: (*api).list, roles: anyRole},
		{method: "GET", path: "/v1/executions/{id}", handler: (*api).get, roles: anyRole},
		{method: "POST", path: "/v1/executions/{id}/resolve", handler: (*api).resolve, roles: deciders, decision: true},
		{method: "POST", path: "/v1/executions/{id}/cancel", handler: (*api).cancel, roles: cancellers},
		{method: "GET", path: "/v1/approvals/{id}", handler: (*api).approvalView, roles: anyRole},
		{method: "POST", path: "/v1/approvals/{id}/approve", handler: (*api).approve, roles: approverOnly, decision: true},
		{method: "POST", path: "/v1/approvals/{id}/reject", handler: (*api).reject, roles: approverOnly, decision: true},
		{method: "POST", path: "/v1/recover", handler: (*api).recoverAll, roles: cancellers},
		{method: "POST", path: "/v1/ledger/backup", handler: (*api).backup, roles: operatorOnly},
		{method: "GET", path: "/v1/tools", handler: (*api).tools, roles: anyRole},
		{method: "GET", path: "/healthz", handler: (*api).healthz, open: true},
		{method: "POST", path: "/v1/auth/proof", handler: (*api).proof, open: true},
		{method: "GET", path: "/metrics", handler: (*api).metrics, roles: scrapers},
		{method: "GET", path: "/openapi.json", handler: (*api).openapi, roles: anyRole},
		{method: "POST", path: "/mcp", handler: (*api).mcp, roles: runtimeOnly},
		{method: "GET", path: "/mcp", handler: (*api).mcp, roles: runtimeOnly},
		{method: "DELETE", path: "/mcp", handler: (*api).mcp, roles: runtimeOnly},
	}
}

type api struct {
	ex    *host.Executor
	opts  Options
	creds []credential
	// anon is the credential of every request when creds is empty.
	anon     credential
	metricsH http.Handler
	// openapiDoc is OpenAPI with the build's version (withVersion).
	openapiDoc []byte
	// names resolves the tool names a call may use (tooldefs.NamesOf).
	names *tooldefs.Names
}

// New returns the HTTP handler of the API over ex, or the problems of
// opts (see [Options.Validate]). The handler is safe for concurrent use;
// it does not own ex (the caller closes it after the server has shut
// down).
func New(ex *host.Executor, opts Options) (http.Handler, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	names, err := tooldefs.NamesOf(ex.Manifests())
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	a := &api{ex: ex, opts: opts, names: names}
	for _, p := range opts.Principals {
		p.Roles, p.Namespaces = slices.Clone(p.Roles), slices.Clone(p.Namespaces)
		a.creds = append(a.creds, credential{p: p, sum: sha256.Sum256([]byte(p.Token)), id: TokenID(p.Token), scope: p.scope()})
	}
	a.anon = credential{p: *opts.Anonymous, scope: opts.Anonymous.scope()}
	for _, c := range []prometheus.Collector{newPoolCollector(ex), newLeaseCollector(ex), newWaitingCollector(ex, opts.Now, opts.Logger)} {
		if err := opts.Registry.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				opts.Logger.Warn("httpapi: register collector", "err", err)
			}
		}
	}
	if opts.Build.Version != "" {
		if err := opts.Registry.Register(newBuildInfoCollector(opts.Build)); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				opts.Logger.Warn("httpapi: register collector", "err", err)
			}
		}
	}
	a.openapiDoc = withVersion(OpenAPI, opts.Build)
	a.metricsH = promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{ErrorLog: slogPromLogger{opts.Logger}, EnableOpenMetrics: true})

	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range routes() {
		h := rt.handler
		var hh http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(a, w, r) })
		if !rt.open {
			hh = a.authenticate(a.authorize(rt, hh))
		}
		hh = notePathID(rt.path, hh)
		hh = telemetry.Route(rt.method+" "+rt.path, hh)
		mux.Handle(rt.method+" "+rt.path, hh)
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	// The same paths without a method answer 405 as a problem (the mux's
	// own 405 is plain text), after authentication so that an anonymous
	// client learns nothing about the routes.
	for path, methods := range allowed {
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		allow := strings.Join(methods, ", ")
		mux.Handle(path, a.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeProblem(w, NewProblem(CodeMethodNotAllowed, fmt.Sprintf("%s %s: allowed methods are %s", r.Method, r.URL.Path, allow)))
		})))
	}
	if opts.Console != nil {
		mux.Handle("/ui/", opts.Console)
		mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusSeeOther))
		// A browser showing the console asks for /favicon.ico on its
		// own: it has no token, and a 401 (a WARN line) per page said
		// nothing to an operator. There is no icon.
		mux.Handle("GET /favicon.ico", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Cache-Control", "max-age=86400")
			w.WriteHeader(http.StatusNoContent)
		}))
	}
	mux.Handle("/", a.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, NewProblem(CodeNotFound, "no route for "+r.URL.Path))
	})))
	var h http.Handler = mux
	if opts.Secure {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Strict-Transport-Security", HSTS)
			mux.ServeHTTP(w, r)
		})
	}
	return a.logRequests(a.checkHost(h)), nil
}

// HSTS is the Strict-Transport-Security header of a server reached over
// https (Options.Secure): a year, this host only (the other hosts of its
// domain are not the server's to decide).
const HSTS = "max-age=31536000"

// bearerToken returns the credentials of an "Authorization: Bearer <token>"
// header. The scheme is matched case-insensitively, as RFC 9110 §11.1
// requires: clients that send "bearer" must not be turned away.
func bearerToken(h string) (string, bool) {
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}

// checkHost refuses, when no credential is configured, requests whose
// Host is not loopback: without a token, the only protection of a loopback
// server against a browser tricked by DNS rebinding is the Host header.
func (a *api) checkHost(next http.Handler) http.Handler {
	if len(a.creds) > 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			writeProblem(w, NewProblem(CodeForbiddenHost, "without a bearer token the API only answers requests addressed to localhost or a loopback IP"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

type statusWriter struct {
	http.ResponseWriter
	status int
	// note is what the access log line names (see logRequests).
	note *accessNote
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// writeJSON writes v as a 200 (or status) application/json answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	noteResult(w, v)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeProblem(w, NewProblem(CodeInternal, "encode response"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// fail writes the problem for an executor error, logging the ones the API
// does not classify.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error, res host.Result) {
	p := ProblemOf(err, res)
	if p.Code == CodeInternal || p.Code == CodeUnavailable {
		a.opts.Logger.ErrorContext(r.Context(), "httpapi: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away; nobody reads the answer
	}
	writeProblem(w, p)
}

// decode reads a JSON request body into v: the body must be
// application/json, at most MaxBodyBytes, one JSON value with no unknown
// fields and nothing after it, that decodes one way only (see checkBody). An empty body is allowed only when
// allowEmpty is set (v is then left untouched). It writes the problem and
// returns false on failure: the executor is never called with such a body.
func (a *api) decode(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeProblem(w, NewProblem(CodePayloadTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)))
			return false
		}
		writeProblem(w, NewProblem(CodeBadRequest, "read request body: "+err.Error()))
		return false
	}
	// Requiring application/json makes a cross-site form or fetch without
	// CORS preflight impossible: a browser cannot send this content type
	// to another origin without asking first, and the API never says yes.
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	isJSON := err == nil && mt == "application/json"
	// An empty body may come without a content type (curl -X POST), but
	// not from a browser page: browsers send Origin with every cross-site
	// POST, and such a request must declare JSON like any other.
	if len(bytes.TrimSpace(body)) == 0 && allowEmpty && (isJSON || r.Header.Get("Origin") == "") {
		return true
	}
	if !isJSON {
		writeProblem(w, NewProblem(CodeUnsupportedMediaType, "Content-Type must be application/json"))
		return false
	}
	if err := checkBody(body, v); err != nil {
		// A key twice inside the model's arguments is a problem of the
		// arguments, answered as the executor answers it through the Go
		// API; everywhere else the envelope itself is ambiguous.
		code := CodeBadRequest
		var dk *strictjson.DuplicateKeyError
		if errors.As(err, &dk) && (dk.Pointer() == "/arguments" || strings.HasPrefix(dk.Pointer(), "/arguments/")) {
			code = CodeInvalidArguments
		}
		writeProblem(w, NewProblem(code, "request body: "+err.Error()))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeProblem(w, NewProblem(CodeBadRequest, "request body: "+err.Error()))
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeProblem(w, NewProblem(CodeBadRequest, "request body: unexpected data after the JSON value"))
		return false
	}
	return true
}

// requireFields writes a bad_request problem naming the missing fields.
func requireFields(w http.ResponseWriter, fields ...[2]string) bool {
	var missing []string
	for _, f := range fields {
		if f[1] == "" {
			missing = append(missing, f[0])
		}
	}
	if len(missing) > 0 {
		writeProblem(w, NewProblem(CodeBadRequest, "missing required field(s): "+strings.Join(missing, ", ")))
		return false
	}
	return true
}

type slogPromLogger struct{ l *slog.Logger }

func (s slogPromLogger) Println(v ...any) { s.l.Error("httpapi: metrics", "err", fmt.Sprint(v...)) }
