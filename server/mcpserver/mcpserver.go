// Package mcpserver serves connhost's executor to MCP clients, with the
// official Go SDK (github.com/modelcontextprotocol/go-sdk): over stdio
// (`connhost mcp`) and over streamable HTTP at /mcp of the HTTP API
// (`connhost serve`, `connhost dev`).
//
// Every tool call keeps the executor's promises. Its identity (namespace,
// session, tool-call id) comes from the request's _meta (see MetaSessionID
// and MetaToolCallID, and the runtimes' own keys in RuntimeKeys), never
// from the arguments, and the audit trail says which keys it came from. A
// call without it gets an identity of its own request only: a
// side-effecting one is refused (PerRequestRefuse, what serve does unless
// configured otherwise) or runs with a warning in the log and the result
// (PerRequestWarn, PerRequestAllow); a gated one is then held open until a
// reviewer decides (Options.ApprovalWait), since no retry could find its
// approval again. Tools are listed by their model names
// ("payments_create_payment", see package tooldefs); a call by the dotted
// name still works. Statuses are answers, not protocol errors: awaiting_approval
// is an ordinary result that tells the model a human has to decide;
// intent mismatch, a fenced session and recovery_required are results with
// isError set and the stable problem code of the HTTP API. Protocol errors
// are left to protocol problems (an unknown tool, malformed params).
//
// A client that declares the elicitation capability is asked to approve
// or reject a gated call in its own dialog, when the connection's user may
// approve (Options.Approver for stdio, the approver role over HTTP); the
// answer is recorded as that user's decision. A client that declares
// URL-mode elicitation, and is not asked so, is sent a link to the
// console's page of the call instead (Options.ConsoleURL, console.go),
// where a reviewer signed in decides. From protocol 2026-07-28
// (stateless over HTTP, see streamableHandler) the dialog is an input
// request whose requestState is single-use (see state.go), and a client
// that declares the tasks extension gets a task for a call that waits
// (see tasks.go). docs/mcp-2026-07-28.md describes both for users. A client that cancels a call
// (notifications/cancelled) cancels the execution as Executor.Cancel does;
// a client that gave a progress token hears of every retry.
package mcpserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/tooldefs"
)

// The _meta keys of a tools/call request through which a runtime passes
// the identity it already has (the session it runs and the model's
// tool-call id). Values are strings (MetaResumed a boolean) under the same
// rules as the HTTP API's fields: valid UTF-8, no control characters, at
// most host.MaxIdentityBytes. MetaSessionID and MetaToolCallID come
// together or not at all.
const (
	// MetaSessionID is the call's session id (host.ToolCall.SessionID).
	MetaSessionID = "io.connhost/session_id"
	// MetaToolCallID is the call's tool-call id (host.ToolCall.ToolCallID):
	// the model's id of the call, stable across the runtime's retries.
	MetaToolCallID = "io.connhost/tool_call_id"
	// MetaNamespace is the call's namespace (optional; the executor's
	// default namespace otherwise).
	MetaNamespace = "io.connhost/namespace"
	// MetaResumed marks a call replayed from history that may predate the
	// ledger (host.ToolCall.Resumed); it needs MetaToolCallID.
	MetaResumed = "io.connhost/resumed"
)

// Identity says where a call's identity came from; it is the "identity"
// member of every result's structuredContent.
type Identity string

const (
	// IdentityClient: the runtime passed MetaSessionID and
	// MetaToolCallID. A retry with the same ids is the same call.
	IdentityClient Identity = "client"
	// IdentityRuntime: the tool-call id came from a runtime's own _meta
	// key (RuntimeKeys), the session from MetaSessionID or, without it,
	// from the runtime's conversation (ConversationSession) or the MCP
	// connection (DefaultSession). A retry with the same id in the same
	// session is the same call.
	IdentityRuntime Identity = "runtime"
	// IdentityPerRequest: the request had no ids, so connhost made them
	// up for this request alone ("mcp:<connection>", "mcp-req:<random>").
	// A retry after a disconnect is a new call and is not deduplicated.
	IdentityPerRequest Identity = "per_request"
)

// PerRequestPolicy says what happens to a side-effecting call (an
// operation whose effect is not read) that arrives without a stable
// identity.
type PerRequestPolicy string

const (
	// PerRequestWarn runs it with an identity of its request only; the
	// first such call is logged as a warning, and every such result says
	// that a retry would not be recognised. What dev and connhost mcp
	// without a config do.
	PerRequestWarn PerRequestPolicy = "warn"
	// PerRequestAllow runs it as PerRequestWarn does, without the log
	// warning: the deployment chose it. Every such result still says so.
	PerRequestAllow PerRequestPolicy = "allow"
	// PerRequestRefuse refuses it (isError, code identity_required),
	// naming what the integrator must pass; nothing is recorded. What
	// serve does unless its config allows per-request identity.
	PerRequestRefuse PerRequestPolicy = "refuse"
)

// DefaultApprovalWait is the default Options.ApprovalWait.
const DefaultApprovalWait = 10 * time.Minute

// DefaultMaxWait is the default Options.MaxWait.
const DefaultMaxWait = 30 * time.Second

// DefaultStartWait is the default Options.StartWait.
const DefaultStartWait = 30 * time.Second

// The default limits of the approval dialog (Options.MaxDialogBytes and
// MaxDialogLines): a call whose whole view does not fit is not shown in
// the client's dialog at all, but left for a reviewer out of band.
const (
	DefaultMaxDialogBytes = 8 << 10
	DefaultMaxDialogLines = 80
)

// DefaultStdioActor is the default Options.Actor.
const DefaultStdioActor = "mcp:stdio"

// Options configures a [Server].
type Options struct {
	// Approver is the name recorded as the reviewer of approvals given in
	// the client's dialog (elicitation) on a connection without an
	// authenticated principal: stdio, where whoever launched the process
	// is the user. It must match httpapi.PrincipalNameRE. The default
	// value ("") means such connections never approve: a gated call
	// answers awaiting_approval and waits for a reviewer elsewhere. Over
	// HTTP the authenticated principal decides, and only if it holds
	// httpapi.RoleApprover; Approver is not used there.
	Approver string
	// Actor is recorded as the requester of cancellations on connections
	// without an authenticated principal. The default value is
	// DefaultStdioActor.
	Actor string
	// StdioEnv looks up the environment of the process serving stdio
	// (connhost mcp passes os.LookupEnv): a runtime that launched it may
	// name its conversation there (RuntimeKey.SessionEnv). It is never
	// read for HTTP connections, whose server was not launched by their
	// runtime. The default value looks nothing up.
	StdioEnv func(key string) (string, bool)
	// MaxWait bounds how long one tools/call waits, beyond the executor's
	// own inline wait, for an execution that is pending (a retry scheduled
	// later, an attempt that has to settle) before it answers status
	// pending. The client is sent progress meanwhile, if it asked for it.
	// The default value is DefaultMaxWait; a negative value never waits.
	MaxWait time.Duration
	// MaxDialogBytes and MaxDialogLines bound the message of the approval
	// dialog (elicitation), which shows the call whole: every argument,
	// decoded, one per line (host.ApprovalView). A call whose message is
	// longer is never shown in part: the client's user is not asked, and
	// the call answers awaiting_approval for a reviewer out of band (the
	// CLI, the HTTP API), saying so. The default values are
	// DefaultMaxDialogBytes (8 KiB) and DefaultMaxDialogLines (80).
	MaxDialogBytes int
	MaxDialogLines int
	// StartWait bounds how long a tools/call that arrives while the
	// server is still starting (see NewStarting: the ledger opening,
	// connectors compiling, recovery running) waits for the start to
	// finish. A call still waiting then answers isError with code
	// CodeStarting; nothing is recorded for it, and the same call sent
	// again later runs. The default value is DefaultStartWait; a negative
	// value does not wait.
	StartWait time.Duration
	// PerRequest is what happens to a side-effecting call without a
	// stable identity. The default value ("") is PerRequestWarn.
	PerRequest PerRequestPolicy
	// ApprovalWait bounds how long a gated call with per-request identity
	// is held open while its approval is pending: the call finishes when
	// a reviewer decides, and answers awaiting_approval only after this
	// long (a retry could not find the approval again). The client is
	// sent progress meanwhile, if it asked for it. Calls with a stable
	// identity answer awaiting_approval at once (the runtime's retry with
	// the same ids finds the decision) unless they ask for a hold with
	// MetaWait, which ApprovalWait caps. The default value is
	// DefaultApprovalWait; a negative value never holds.
	ApprovalWait time.Duration
	// TrustedOrigins are the origins ("scheme://host[:port]") besides the
	// server's own from which a browser may reach /mcp; a request with
	// any other Origin (or a cross-site Sec-Fetch-Site) is refused with
	// 403, as the MCP specification requires. Clients that are not
	// browsers send no Origin and are not affected. The default value is
	// none.
	TrustedOrigins []string
	// SessionTimeout closes an HTTP session after this long without a
	// request. The default value is 30 minutes.
	SessionTimeout time.Duration
	// MaxBodyBytes caps an HTTP request body. The default value is
	// httpapi.DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ConsoleURL is the URL humans reach connhost's console at (the
	// server's public URL, without a trailing slash; see SetConsoleURL).
	// When set, a gated call whose client declared URL-mode elicitation,
	// and that is not asked in the client's own dialog, sends the
	// client's user to the console's page of the call
	// (ConsolePage): a link with no token in it, where a reviewer signed
	// in to the console decides. The client's answer decides nothing. The
	// default value ("") sends no links (stdio: no console).
	ConsoleURL string
	// Version is the server version reported to clients. The default
	// value is "dev".
	Version string
	// Logger receives the server's log records. The default value is
	// slog.Default(). Over stdio it must not write to stdout.
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their default values.
func (o *Options) EnsureDefaults() {
	if o.Actor == "" {
		o.Actor = DefaultStdioActor
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.StartWait == 0 {
		o.StartWait = DefaultStartWait
	}
	if o.PerRequest == "" {
		o.PerRequest = PerRequestWarn
	}
	if o.ApprovalWait == 0 {
		o.ApprovalWait = DefaultApprovalWait
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.MaxDialogBytes <= 0 {
		o.MaxDialogBytes = DefaultMaxDialogBytes
	}
	if o.MaxDialogLines <= 0 {
		o.MaxDialogLines = DefaultMaxDialogLines
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = httpapi.DefaultMaxBodyBytes
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// ErrInvalidOptions is returned by [Options.Validate] (wrapped, once per
// problem).
var ErrInvalidOptions = errors.New("mcpserver: invalid options")

// Validate reports every problem of the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.ConsoleURL != "" {
		if u, err := url.Parse(o.ConsoleURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("%w: console URL %q must be an http or https URL without user, query or fragment", ErrInvalidOptions, o.ConsoleURL))
		}
	}
	if o.Approver != "" && !httpapi.PrincipalNameRE.MatchString(o.Approver) {
		errs = append(errs, fmt.Errorf("%w: approver %q must match %s", ErrInvalidOptions, o.Approver, httpapi.PrincipalNameRE))
	}
	if o.SessionTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: session timeout %v is negative", ErrInvalidOptions, o.SessionTimeout))
	}
	switch o.PerRequest {
	case "", PerRequestWarn, PerRequestAllow, PerRequestRefuse:
	default:
		errs = append(errs, fmt.Errorf("%w: per-request policy %q (want warn, allow or refuse)", ErrInvalidOptions, o.PerRequest))
	}
	for _, origin := range o.TrustedOrigins {
		if err := http.NewCrossOriginProtection().AddTrustedOrigin(origin); err != nil {
			errs = append(errs, fmt.Errorf("%w: trusted origin %q: %v", ErrInvalidOptions, origin, err))
		}
	}
	return errors.Join(errs...)
}

// Server is an MCP server over one executor. It is safe for concurrent
// use; it does not own the executor.
type Server struct {
	// ex is the executor, set before ready is closed (see Started); read
	// it only after waitStarted.
	ex   *host.Executor
	opts Options
	srv  *mcp.Server
	// ready is closed once the start has ended (Started), startErr then
	// says why it failed, or is nil.
	ready     chan struct{}
	startErr  error
	startOnce sync.Once
	// key signs the request states issued on connections without a
	// principal's token (stdio; see state.go).
	key []byte
	// conn names this server's connections without an MCP session id
	// (stdio) in derived session ids.
	conn string
	// tools maps every name a call may use (model name, dotted name, the
	// older "__" form) to its tool.
	tools map[string]toolInfo
	// warned is set once the per-request warning has been logged.
	warned sync.Once
	// consoleURL is Options.ConsoleURL, or what SetConsoleURL set.
	consoleURL atomic.Pointer[string]
}

// toolInfo is what a tools/call needs to know of its tool.
type toolInfo struct {
	// name is the listed (model) name; canon the "connector.operation".
	name, canon string
	// effects: the operation's effect is not read.
	effects bool
}

// New returns an MCP server offering the tools of ex's manifests.
func New(ex *host.Executor, opts Options) (*Server, error) {
	s, err := NewStarting(ex.Manifests(), opts)
	if err != nil {
		return nil, err
	}
	s.Started(ex, nil)
	return s, nil
}

// NewStarting returns an MCP server offering the tools of ms whose
// executor is still being opened: it answers initialize, server/discover
// and tools/list at once, from the manifests, and a tools/call waits for
// Started (up to Options.StartWait). This is how `connhost mcp` answers a
// client that launched it within its first second, while the ledger opens
// and the connectors compile. ms may be empty when the start failed
// before the manifests could be read.
func NewStarting(ms []*manifests.Manifest, opts Options) (*Server, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	tools, err := tooldefs.MCPTools(ms)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s := &Server{opts: opts, conn: rand.Text()[:12], tools: map[string]toolInfo{}, ready: make(chan struct{})}
	s.SetConsoleURL(opts.ConsoleURL)
	for _, t := range tools {
		canon, _ := t.Meta[tooldefs.MetaTool].(string)
		info := toolInfo{name: t.Name, canon: canon, effects: !t.Annotations.ReadOnlyHint}
		s.tools[t.Name] = info
		s.tools[canon] = info
		if c, op, ok := strings.Cut(canon, "."); ok {
			if _, taken := s.tools[c+"__"+op]; !taken {
				s.tools[c+"__"+op] = info
			}
		}
	}
	s.key = make([]byte, 32)
	_, _ = rand.Read(s.key)
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "connhost", Title: "connhost", Version: opts.Version}, &mcp.ServerOptions{
		Logger:       opts.Logger,
		Instructions: instructions,
		Capabilities: capabilities(),
	})
	for _, t := range tools {
		s.srv.AddTool(&mcp.Tool{
			Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema,
			Annotations: &mcp.ToolAnnotations{
				ReadOnlyHint: t.Annotations.ReadOnlyHint, DestructiveHint: &t.Annotations.DestructiveHint,
				IdempotentHint: t.Annotations.IdempotentHint, OpenWorldHint: &t.Annotations.OpenWorldHint,
			},
			Meta: t.Meta,
		}, s.callTool)
	}
	s.srv.AddReceivingMiddleware(s.aliases, s.lifecycle)
	if telemetry.Enabled() {
		s.srv.AddReceivingMiddleware(traced)
	}
	s.registerTasks()
	return s, nil
}

// Started ends the start of a server made by NewStarting: ex serves the
// tool calls from now on, or, when err is not nil, every tool call
// answers that the server could not start, and why (isError, code
// CodeStartFailed). Only the first call counts. The server does not own
// ex.
func (s *Server) Started(ex *host.Executor, err error) {
	s.startOnce.Do(func() {
		if err == nil && ex == nil {
			err = errors.New("mcpserver: started without an executor")
		}
		if err != nil {
			ex = nil
		}
		s.ex, s.startErr = ex, err
		close(s.ready)
	})
}

// instructions are the server's instructions to clients and models.
const instructions = "Tools run durably: pass the model's tool-call id as _meta \"" + MetaToolCallID + "\" and your session as \"" +
	MetaSessionID + "\", and send a call again with the same ids after a disconnect; connhost returns the recorded outcome instead of acting twice."

// capabilities are the server's capabilities, as initialize and
// server/discover announce them.
func capabilities() *mcp.ServerCapabilities {
	return &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Extensions: map[string]any{ExtensionTasks: map[string]any{}}}
}

// aliases lets a tools/call name its tool by the dotted name (or the
// older "__" form): the SDK dispatches on the listed name, so the call is
// renamed to it before.
func (s *Server) aliases(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ct, ok := req.(*mcp.CallToolRequest); ok && ct.Params != nil {
			if t, ok := s.tools[ct.Params.Name]; ok {
				ct.Params.Name = t.name
			}
		}
		return next(ctx, method, req)
	}
}

// MCP returns the SDK server, for transports this package does not wrap.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Run serves one connection over t until the client disconnects or ctx
// is done. RunStdio is Run for a stream transport with the wire checks.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	return s.srv.Run(ctx, t)
}

// RunStdio serves one connection over newline-delimited JSON on in and
// out (for `connhost mcp`, the process's stdin and stdout) until the
// client closes in or ctx is done. A tools/call that does not parse
// strictly (a key named twice, invalid UTF-8, an unpaired surrogate) is
// answered with a JSON-RPC error before the SDK decodes it. out is not
// closed.
func (s *Server) RunStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &lockedWriter{w: out}
	// The connection's requests carry the mark (the SDK derives their
	// contexts from this one): see lifecycle.
	ctx = context.WithValue(ctx, stdioKey{}, true)
	return s.srv.Run(ctx, &mcp.IOTransport{Reader: newStrictStdio(in, w), Writer: w})
}

// principalKey and scopeKey are the TokenInfo.Extra keys of the HTTP
// principal and of the host.Scope of its requests.
const (
	principalKey = "connhost.principal"
	scopeKey     = "connhost.scope"
	// stateKeyKey is the TokenInfo.Extra key of the key of the request
	// states issued to the principal (stateKey of its token).
	stateKeyKey = "connhost.state_key"
)

// HTTPHandler returns the streamable HTTP handler that httpapi mounts at
// /mcp (httpapi.Options.MCP). It serves requests that httpapi has
// authenticated: the principal in the request's context (see
// httpapi.PrincipalFromContext) is the connection's user, and each MCP
// session is bound to it (another principal's request for the session is
// refused with 403). Its tool calls run within the principal's scope
// (host.Scope: its namespaces and limits), as its API requests do. Clients
// of protocol 2026-07-28 are served statelessly, those of earlier
// revisions in stateful sessions (see streamableHandler).
func (s *Server) HTTPHandler() http.Handler {
	h := s.streamableHandler()
	// The SDK hands a request's identity to tool handlers (and binds
	// sessions to it) only through a TokenInfo that its bearer middleware
	// puts into the context. httpapi has authenticated the request
	// already, so the verifier ignores the token and reads the principal.
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := httpapi.PrincipalFromContext(r.Context())
		if !ok {
			return nil, fmt.Errorf("%w: no authenticated principal", auth.ErrInvalidToken)
		}
		extra := map[string]any{}
		if p.Token != "" {
			extra[stateKeyKey] = stateKey(p.Token)
		}
		p.Token = ""
		extra[principalKey] = p
		if sc, ok := host.ScopeFrom(r.Context()); ok {
			extra[scopeKey] = sc
		}
		return &auth.TokenInfo{UserID: p.Name, Extra: extra}, nil
	}
	withInfo := strictHTTP(s.opts.MaxBodyBytes, auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h))
	cop := http.NewCrossOriginProtection()
	for _, o := range s.opts.TrustedOrigins {
		_ = cop.AddTrustedOrigin(o) // validated in New
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// CrossOriginProtection lets safe methods through; /mcp's GET
		// opens the server's event stream, so every method is checked
		// as a POST would be.
		probe := *r
		probe.Method = http.MethodPost
		if err := cop.Check(&probe); err != nil {
			http.Error(w, fmt.Sprintf("mcp: cross-origin request refused (Origin %q): %v", r.Header.Get("Origin"), err), http.StatusForbidden)
			return
		}
		if r.Header.Get("Authorization") == "" {
			// A server without credentials (dev): every request acts as
			// the anonymous principal, which the SDK's middleware cannot
			// see without a bearer header.
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer anonymous")
		}
		withInfo.ServeHTTP(w, r)
	})
}

// caller is who a tools/call acts for.
type caller struct {
	// actor is recorded as the requester of a cancellation.
	actor string
	// approver is recorded as the reviewer of an approval given in the
	// client's dialog; "" when this caller may not approve.
	approver string
	// stateKey signs and verifies the request states issued to this
	// caller (see state.go).
	stateKey []byte
	// env is the environment in which the runtime that launched this
	// process names its conversation (stdio only; nil over HTTP).
	env func(string) (string, bool)
	// stdio: the connection has no principal (stdio, in-process).
	stdio bool
}

// conversation returns the conversation the runtime of key k named in
// the environment of a stdio server it launched, if it named one.
func (c caller) conversation(k RuntimeKey) (string, bool) {
	if c.env == nil || k.SessionEnv == "" {
		return "", false
	}
	v, ok := c.env(k.SessionEnv)
	return v, ok && v != ""
}

func (s *Server) callerOf(req *mcp.CallToolRequest) caller { return s.callerFrom(req.Extra) }

// callerFrom is who a request with extra acts for.
func (s *Server) callerFrom(extra *mcp.RequestExtra) caller {
	if extra != nil && extra.TokenInfo != nil {
		if p, ok := extra.TokenInfo.Extra[principalKey].(httpapi.Principal); ok {
			c := caller{actor: p.Name, stateKey: s.key}
			if k, ok := extra.TokenInfo.Extra[stateKeyKey].([]byte); ok {
				c.stateKey = k
			}
			if p.Has(httpapi.RoleApprover) {
				c.approver = p.Name
			}
			return c
		}
	}
	return caller{actor: s.opts.Actor, approver: s.opts.Approver, stateKey: s.key, env: s.opts.StdioEnv, stdio: true}
}

// scopeOf returns the host.Scope of the HTTP principal a tools/call acts
// for; a connection without one (stdio) is unscoped.
func scopeOf(req *mcp.CallToolRequest) (host.Scope, bool) { return scopeFromExtra(req.Extra) }

// scopeFromExtra is the host.Scope of the HTTP principal of a request
// with extra.
func scopeFromExtra(extra *mcp.RequestExtra) (host.Scope, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return host.Scope{}, false
	}
	sc, ok := extra.TokenInfo.Extra[scopeKey].(host.Scope)
	return sc, ok
}

// Result is the structuredContent of every tools/call result.
type Result struct {
	// Status is the execution's status (host.Status), or "refused" when
	// the executor refused the call (Code says why).
	Status string `json:"status"`
	// Code is the stable problem code of an isError result that has one
	// (intent_mismatch, session_fenced, recovery_required,
	// invalid_arguments, bad_request, …): the codes of the HTTP API.
	Code httpapi.Code `json:"code,omitempty"`
	// Identity says whether the ids came from the client, from a
	// runtime's own key, or were made up for this request (see Identity);
	// IdentitySource names the _meta keys (as the audit trail does).
	Identity       Identity `json:"identity"`
	IdentitySource string   `json:"identity_source,omitempty"`
	Namespace      string   `json:"namespace,omitempty"`
	SessionID      string   `json:"session_id"`
	ToolCallID     string   `json:"tool_call_id"`
	ExecutionID    string   `json:"execution_id,omitempty"`
	// Result is the execution the call ran as, in its one shape (its
	// members inline, as the HTTP API answers them); nil for a refused
	// call, which ran as none.
	*host.Result
	// Problem is the HTTP API's problem document of a refused call.
	Problem *httpapi.Problem `json:"problem,omitempty"`
	// Next says what the model may do now, for runtimes that show the
	// model only the structured content (Mastra): see Next. Message says
	// the same as the result's text, on one line (without a succeeded
	// call's result, which is above).
	Next    Next   `json:"next"`
	Message string `json:"message"`
}
