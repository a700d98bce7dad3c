// Package console is the reviewer and operator console that `connhost
// serve` and `connhost dev` serve under /ui/ (httpapi.Options.Console):
// server-rendered pages (html/template, assets embedded in the binary)
// for the approvals inbox, the recovery queue, the executions and the
// loaded connectors.
//
// It holds no logic of its own about executions: every page reads through
// the executor the HTTP API reads through (Get, ApprovalView, the ledger's
// List under the principal's scope), shows executions as the API's one
// view (httpapi.Execution) and the approval view (host.ApprovalView), and
// every action calls the executor's Approve, Reject and Resolve as the
// API's routes do, recorded under the signed-in principal's name.
//
// A browser signs in with a principal's token; the console hands it a
// session cookie (HttpOnly, SameSite=Strict) that names the principal and
// is signed with a key derived from the principal's token, so that
// rotating the token ends it, and records the session in the ledger
// (Options.Sessions) under a hash of its id, so that every process reading
// the ledger (a restart, a fleet's nodes) knows it, and a sign-out, or a
// "sign out everywhere", ends it on all of them. On a
// server without credentials no sign-in
// happens and nothing is kept per browser: the cookie's random id and an
// HMAC of it are the session and its CSRF token. Every form carries the
// session's CSRF token, and
// a POST that a browser marks as cross-site (Sec-Fetch-Site, Origin) is
// refused before it is read. A principal's roles decide what it may do,
// in the handlers: a runtime principal reads, never decides.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// DefaultPoll is how often an open inbox asks whether new calls wait.
const DefaultPoll = 5 * time.Second

// DefaultSessionTTL is how long a sign-in lasts.
const DefaultSessionTTL = 8 * time.Hour

// Cookie names: the session's id, and the sign-in form's token (which
// keeps another site from signing a browser in under its own token).
const (
	sessionCookie = "connhost_console"
	signinCookie  = "connhost_console_signin"
)

// Options configures the console returned by [New].
type Options struct {
	// Executor is the executor the HTTP API serves. Required.
	Executor *host.Executor
	// Principals are the API's credentials (httpapi.Options.Principals):
	// the tokens the sign-in form accepts.
	Principals []httpapi.Principal
	// Anonymous is the principal of a server without credentials
	// (httpapi.Options.Anonymous): with no Principals, every browser is
	// signed in as it without a form. The default value is
	// &httpapi.LoopbackRuntime, which reads and decides nothing.
	Anonymous *httpapi.Principal
	// Dev marks `connhost dev`: every page says so, and who decides.
	Dev bool
	// Secure says browsers reach the console over https, whether the
	// server terminates TLS itself or a proxy in front does: every cookie
	// is then marked Secure, so a browser never sends the session over
	// plain http, and every answer carries Strict-Transport-Security. The
	// default value (false) marks a cookie Secure only when the request
	// came over TLS to this process, and sends no HSTS.
	Secure bool
	// Audit returns the audit of the loaded connectors (the Connectors
	// page, and its HTML report); it is called once, on the first visit.
	// The default value (nil) shows the connectors without an audit.
	Audit func(context.Context) audit.Report
	// SessionTTL is how long a sign-in lasts. The default value is
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// Sessions keeps the signed-in sessions, shared by every process
	// that reads it. The default value is the executor's ledger
	// (Executor.Ledger()), which both backends make a
	// ledger.ConsoleSessions; New fails when the server has Principals
	// and neither keeps sessions.
	Sessions ledger.ConsoleSessions
	// Throttle limits failed sign-ins per source; pass the API's
	// (httpapi.Options.Throttle) so that a source's failures count alike
	// wherever it guesses. The default value is a Throttle of its own.
	Throttle *httpapi.Throttle
	// Logger receives the causes of internal errors. The default value is
	// slog.Default().
	Logger *slog.Logger
	// Poll is how often an open inbox page's script asks whether new
	// calls wait. The default value is DefaultPoll.
	Poll time.Duration
	// Now is the console's clock (sessions, ages). The default value is
	// time.Now.
	Now func() time.Time
	// OIDC, when set, offers sign-in with an OpenID Connect provider
	// beside the token form (see OIDC). The default value (nil) offers
	// the token form only.
	OIDC *OIDC
}

type console struct {
	opts  Options
	creds []credential
	// oidc is the OpenID Connect sign-in (nil without Options.OIDC).
	oidc *oidcSignin
	// key derives the CSRF tokens of anonymous sessions
	// (anonymousSession); it lives as long as the process.
	key   []byte
	pages map[string]*template.Template

	handler http.Handler

	auditOnce sync.Once
	report    *audit.Report
}

// credential is a principal with its token's digest and the key that
// signs its sessions (sessionKey).
type credential struct {
	p   httpapi.Principal
	sum [sha256.Size]byte
	key []byte
}

// New returns the console's handler, to be served at Prefix.
func New(o Options) (http.Handler, error) {
	c, err := newConsole(o)
	if err != nil {
		return nil, err
	}
	return c.handler, nil
}

func newConsole(o Options) (*console, error) {
	if o.Executor == nil {
		return nil, errors.New("console: no executor")
	}
	if o.Anonymous == nil {
		anon := httpapi.LoopbackRuntime
		o.Anonymous = &anon
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Throttle == nil {
		o.Throttle = httpapi.NewThrottle(httpapi.ThrottleOptions{Logger: o.Logger, Now: o.Now})
	}
	if o.Sessions == nil {
		o.Sessions, _ = o.Executor.Ledger().(ledger.ConsoleSessions)
	}
	if o.Sessions == nil && len(o.Principals) > 0 {
		return nil, fmt.Errorf("console: the ledger (%T) keeps no console sessions (ledger.ConsoleSessions)", o.Executor.Ledger())
	}
	c := &console{opts: o, key: []byte(randomToken())}
	for _, p := range o.Principals {
		c.creds = append(c.creds, credential{p: p, sum: sha256.Sum256([]byte(p.Token)), key: sessionKey(p.Token)})
	}
	if o.OIDC != nil {
		names := map[string]bool{}
		for _, p := range o.Principals {
			names[p.Name] = true
		}
		var err error
		if c.oidc, err = newOIDCSignin(*o.OIDC, names); err != nil {
			return nil, err
		}
	}
	pages, err := parsePages(o.Now)
	if err != nil {
		return nil, err
	}
	c.pages = pages
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Prefix+"signin", c.signinForm)
	mux.HandleFunc("POST "+Prefix+"signin", c.signin)
	if c.oidc != nil {
		mux.HandleFunc("GET "+Prefix+"oidc/start", c.oidcStart)
		mux.HandleFunc("GET "+Prefix+"oidc/callback", c.oidcCallback)
	}
	mux.HandleFunc("GET "+Prefix+"{$}", c.page(c.home))
	mux.HandleFunc("POST "+Prefix+"signout", c.action(nil, c.signout))
	mux.HandleFunc("POST "+Prefix+"signout/everywhere", c.action(nil, c.signoutEverywhere))
	mux.HandleFunc("GET "+Prefix+"approvals", c.page(c.approvals))
	mux.HandleFunc("POST "+Prefix+"approvals/{id}/approve", c.action(deciders(httpapi.RoleApprover), c.approve))
	mux.HandleFunc("POST "+Prefix+"approvals/{id}/reject", c.action(deciders(httpapi.RoleApprover), c.reject))
	mux.HandleFunc("POST "+Prefix+"approvals/reject", c.action(deciders(httpapi.RoleApprover), c.rejectMany))
	mux.HandleFunc("GET "+Prefix+"recovery", c.page(c.recovery))
	mux.HandleFunc("GET "+Prefix+"find", c.find)
	mux.HandleFunc("GET "+Prefix+"approvals/new", c.newCalls)
	mux.HandleFunc("GET "+Prefix+"approvals/new/cards", c.newCards)
	mux.HandleFunc("POST "+Prefix+"executions/{id}/resolve", c.action(deciders(httpapi.RoleApprover, httpapi.RoleOperator), c.resolve))
	mux.HandleFunc("GET "+Prefix+"executions", c.page(c.executions))
	mux.HandleFunc("GET "+Prefix+"executions/{id}", c.page(c.execution))
	mux.HandleFunc("GET "+Prefix+"connectors", c.page(c.connectors))
	mux.HandleFunc("GET "+Prefix+"connectors/audit", c.auditHTML)
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page: "+r.URL.Path, http.StatusNotFound)
	})
	c.handler = securityHeaders(mux, o.Secure)
	return c, nil
}

// csp allows the console's own stylesheet and scripts (static/live.js,
// which polls the console, announces and shows new calls; static/keys.js,
// the keyboard shortcuts, which submit only the page's own forms) and
// nothing else: no inline script, no frame, no form posting elsewhere.
const csp = "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every console answer carries; secure
// adds HSTS (Options.Secure).
func securityHeaders(next http.Handler, secure bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if secure {
			h.Set("Strict-Transport-Security", httpapi.HSTS)
		}
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// lookup returns the credential whose token is token. Every candidate is
// compared, in constant time, as the API does.
func (c *console) lookup(token string) (credential, bool) {
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i := range c.creds {
		if subtle.ConstantTimeCompare(sum[:], c.creds[i].sum[:]) == 1 {
			match = i
		}
	}
	if token == "" || match < 0 {
		return credential{}, false
	}
	return c.creds[match], true
}

// anonymous reports whether the server has no credentials: every
// browser then acts as Options.Anonymous.
func (c *console) anonymous() bool { return len(c.creds) == 0 }

// current returns the request's session: the cookie's, when the ledger
// holds it live (checkSession), or, on a server without credentials, the
// anonymous principal's (anonymousSession). It returns errSignedOut when
// the request has no such session, or the error that kept it from
// reading the ledger.
func (c *console) current(w http.ResponseWriter, r *http.Request) (session, error) {
	if c.anonymous() {
		return c.anonymousSession(w, r), nil
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, errSignedOut
	}
	s, ok := verify(c.creds, ck.Value, c.opts.Now())
	if !ok {
		return session{}, errSignedOut
	}
	if err := c.checkSession(r.Context(), s); err != nil {
		return session{}, err
	}
	return s, nil
}

// unavailable answers a request whose session could not be read from the
// ledger: nothing is shown or done, and the browser stays signed in.
func (c *console) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	c.opts.Logger.ErrorContext(r.Context(), "console: session not checked", "path", r.URL.Path, "err", err)
	w.Header().Set("Retry-After", "5")
	c.render(w, "refused", http.StatusServiceUnavailable, &view{Title: "Unavailable",
		Notes: []note{{Error: true, Text: "the console could not check this session in the ledger (" + err.Error() + "); nothing was shown or done: try again in a moment"}}})
}

// anonymousSession returns the session of a browser on a server without
// credentials, which the server keeps no state for: its id is the
// cookie's random value (a new one, set on w, when the request has none
// of the right form), and its CSRF token is an HMAC of that id under a key
// of this process, which a page of another site can neither read nor
// compute. An action's outcome travels in a cookie too (addNote). So a
// request without a cookie, however many, costs nothing to keep.
func (c *console) anonymousSession(w http.ResponseWriter, r *http.Request) session {
	id := ""
	if ck, err := r.Cookie(sessionCookie); err == nil && validToken(ck.Value) {
		id = ck.Value
	} else {
		id = randomToken()
		c.setCookie(w, r, sessionCookie, id, c.opts.SessionTTL)
	}
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("connhost console csrf v1\x00" + id))
	return session{id: anonymousPrefix + id, principal: *c.opts.Anonymous, csrf: base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
}

func (c *console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: Prefix, MaxAge: int(ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r),
	})
}

func (c *console) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
}

// secure reports whether r's browser reached the console over https
// (Options.Secure, or TLS to this process).
func (c *console) secure(r *http.Request) bool { return c.opts.Secure || r.TLS != nil }

// crossSite reports why a browser's POST did not come from the console's
// own pages ("" when nothing says so). Sec-Fetch-Site, which no page can
// set, decides when the browser sends it: same-origin only. Without it,
// an Origin must name the server; "null" is refused, since the console's
// own pages send it only alongside Sec-Fetch-Site (their Referrer-Policy
// is no-referrer, under which Chromium's form posts say Origin: null).
// Clients that send neither, such as curl, still need the session's CSRF
// token.
func crossSite(r *http.Request) string {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		if s != "same-origin" {
			return "the browser says the form came from another site (Sec-Fetch-Site: " + s + ")"
		}
		return ""
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return "the form came from another origin (Origin: " + o + ")"
		}
	}
	return ""
}

// scoped returns ctx acting within p's namespaces, as the API's requests
// of p do (host.Scope): executions of other namespaces are unknown ids.
func scoped(ctx context.Context, p httpapi.Principal) context.Context {
	return host.WithScope(ctx, host.Scope{Principal: p.Name, Namespaces: p.Namespaces})
}

// deciders returns the roles an action needs.
func deciders(roles ...httpapi.Role) []httpapi.Role { return roles }

// view is what every page template receives.
type view struct {
	Title     string
	Nav       string
	Principal httpapi.Principal
	// Anonymous: signed in without a token (a server without
	// credentials); Dev: by `connhost dev`.
	Anonymous bool
	Dev       bool
	CanDecide bool
	CanSettle bool
	// EndsOthers: the principal may end another principal's sessions
	// (role operator, signoutEverywhere).
	EndsOthers bool
	CSRF       string
	// PollMillis is Options.Poll, for the page's script.
	PollMillis int64
	// Back is the page a decision made here returns to (the list as
	// filtered and paged).
	Back  string
	Notes []note
	// Refresh, when above 0, reloads the page every Refresh seconds.
	Refresh int
	// Goto, when set, is the console page the browser goes on to at once.
	Goto string
	Data any
	// start is when the page's request began to be answered, for its
	// Server-Timing header (zero: none).
	start time.Time
}

// page wraps a GET handler: the session (else the sign-in form), then the
// page the handler fills.
func (c *console) page(fill func(r *http.Request, s session, v *view) (string, int)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.current(w, r)
		if errors.Is(err, errSignedOut) {
			http.Redirect(w, r, Prefix+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if err != nil {
			c.unavailable(w, r, err)
			return
		}
		c.noteAccess(r, s)
		v := &view{Principal: s.principal, Anonymous: c.anonymous(), Dev: c.opts.Dev,
			CanDecide:  s.principal.Has(httpapi.RoleApprover),
			CanSettle:  s.principal.Has(httpapi.RoleApprover, httpapi.RoleOperator),
			EndsOthers: s.principal.Has(httpapi.RoleOperator),
			CSRF:       s.csrf, PollMillis: c.opts.Poll.Milliseconds(), start: time.Now()}
		name, status := fill(r, s, v)
		v.Notes = append(c.takeNotes(w, r, s), v.Notes...)
		c.render(w, name, status, v)
	}
}

func (c *console) render(w http.ResponseWriter, name string, status int, v *view) {
	t, ok := c.pages[name]
	if !ok {
		http.Error(w, "console: no template "+name, http.StatusInternalServerError)
		return
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		c.opts.Logger.Error("console: render", "page", name, "err", err)
		http.Error(w, "console: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if !v.start.IsZero() {
		// What the page cost the server, ledger reads and rendering
		// included, for the browser's devtools and
		// PerformanceNavigationTiming.serverTiming.
		w.Header().Set("Server-Timing", fmt.Sprintf("page;dur=%.1f;desc=%q", float64(time.Since(v.start).Microseconds())/1000, name))
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// errRefused is an action refused before the executor was asked.
type refusal struct {
	status int
	text   string
}

// action wraps a POST handler: refused when cross-site, without a
// session, without the session's CSRF token, or when the principal holds
// none of roles (nil: any); otherwise the handler acts and the browser is
// sent back (303) to where it returns to, with the outcome as a note.
func (c *console) action(roles []httpapi.Role, act func(w http.ResponseWriter, r *http.Request, s session) (back string, n note)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if why := crossSite(r); why != "" {
			c.refuse(w, r, session{}, refusal{http.StatusForbidden, "refused: " + why + "; act from the console's own pages"})
			return
		}
		s, err := c.current(w, r)
		if errors.Is(err, errSignedOut) {
			c.refuse(w, r, session{}, refusal{http.StatusUnauthorized, "refused: sign in first"})
			return
		}
		if err != nil {
			c.unavailable(w, r, err)
			return
		}
		c.noteAccess(r, s)
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			c.refuse(w, r, s, refusal{http.StatusBadRequest, "refused: the form could not be read: " + err.Error()})
			return
		}
		if !sameToken(r.PostForm.Get("csrf"), s.csrf) {
			c.refuse(w, r, s, refusal{http.StatusForbidden, "refused: the form lacks this session's CSRF token (it came from elsewhere, or from a page older than the sign-in); reload the page and try again"})
			return
		}
		if roles != nil && !s.principal.Has(roles...) {
			c.refuse(w, r, s, refusal{http.StatusForbidden, fmt.Sprintf("refused: this needs role %s; principal %q has %s",
				rolesText(roles), s.principal.Name, rolesText(s.principal.Roles))})
			return
		}
		back, n := act(w, r, s)
		if back == "" {
			return // the handler answered
		}
		c.addNote(w, r, s, n)
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}

// addNote keeps n for the session's next page (sealNotes), after the
// notes not shown yet.
func (c *console) addNote(w http.ResponseWriter, r *http.Request, s session, n note) {
	var ns []note
	if ck, err := r.Cookie(noteCookie); err == nil {
		ns = openNotes(s, ck.Value)
	}
	c.setCookie(w, r, noteCookie, sealNotes(s, append(ns, n)), 5*time.Minute)
}

// takeNotes returns the notes the request's cookie carries for s, and
// clears the cookie.
func (c *console) takeNotes(w http.ResponseWriter, r *http.Request, s session) []note {
	ck, err := r.Cookie(noteCookie)
	if err != nil {
		return nil
	}
	c.clearCookie(w, r, noteCookie)
	return openNotes(s, ck.Value)
}

// noteAccess names the session's principal and the page's execution or
// approval in the request's access log line.
func (c *console) noteAccess(r *http.Request, s session) {
	id := r.PathValue("id")
	exec, approval := id, ""
	if strings.HasPrefix(r.URL.Path, Prefix+"approvals/") {
		exec, approval = "", id
	}
	httpapi.NoteAccess(r.Context(), s.principal.Name, exec, approval)
}

// refuse answers a refused action with a page saying why.
func (c *console) refuse(w http.ResponseWriter, r *http.Request, s session, f refusal) {
	c.opts.Logger.WarnContext(r.Context(), "console: refused", "method", r.Method, "path", r.URL.Path, "principal", s.principal.Name, "why", f.text)
	v := &view{Title: "Refused", Principal: s.principal, Anonymous: c.anonymous(), Dev: c.opts.Dev, CSRF: s.csrf,
		Notes: []note{{Error: true, Text: f.text}}}
	c.render(w, "refused", f.status, v)
}

func rolesText(roles []httpapi.Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	if len(s) == 0 {
		return "no role"
	}
	return strings.Join(s, " or ")
}

// safeNext returns next when it is a console page, else the inbox: the
// sign-in form sends nobody to another site.
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix) && !strings.HasPrefix(next, "//") && !strings.Contains(next, "\\") && !strings.HasPrefix(next, Prefix+"signin") {
		return next
	}
	return Prefix
}

// signinData is what the sign-in page shows: where it returns to, and
// the OpenID Connect provider it offers ("": none).
type signinData struct {
	Next, OIDC string
}

func (c *console) oidcName() string {
	if c.oidc == nil {
		return ""
	}
	return c.oidc.cfg.Name
}

func (c *console) signinForm(w http.ResponseWriter, r *http.Request) {
	if c.anonymous() {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	tok := randomToken()
	c.setCookie(w, r, signinCookie, tok, 15*time.Minute)
	v := &view{Title: "Sign in", CSRF: tok, Data: signinData{Next: safeNext(r.URL.Query().Get("next")), OIDC: c.oidcName()}}
	c.render(w, "signin", http.StatusOK, v)
}

func (c *console) signin(w http.ResponseWriter, r *http.Request) {
	if c.anonymous() {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	form := func(status int, text string) {
		tok := randomToken()
		c.setCookie(w, r, signinCookie, tok, 15*time.Minute)
		c.render(w, "signin", status, &view{Title: "Sign in", CSRF: tok, Data: signinData{Next: safeNext(r.PostFormValue("next")), OIDC: c.oidcName()},
			Notes: []note{{Error: true, Text: text}}})
	}
	fail := func(status int, text string) {
		c.opts.Logger.WarnContext(r.Context(), "console: sign-in refused", "why", text)
		form(status, text)
	}
	if why := crossSite(r); why != "" {
		c.refuse(w, r, session{}, refusal{http.StatusForbidden, "refused: " + why + "; sign in from the console's own page"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	ck, err := r.Cookie(signinCookie)
	if err != nil || !sameToken(r.PostForm.Get("csrf"), ck.Value) {
		fail(http.StatusForbidden, "the sign-in form has expired or came from elsewhere; sign in again")
		return
	}
	if wait, ok := c.opts.Throttle.Allow(r); !ok {
		// The throttle's summary line stands for this request.
		httpapi.NoteThrottled(r.Context())
		w.Header().Set("Retry-After", fmt.Sprint(max(1, int(math.Ceil(wait.Seconds())))))
		form(http.StatusTooManyRequests, fmt.Sprintf("too many sign-ins with a wrong token came from here; try again in %s", wait.Round(time.Second)))
		return
	}
	cr, ok := c.lookup(strings.TrimSpace(r.PostForm.Get("token")))
	p := cr.p
	if !ok {
		c.opts.Throttle.Failed(r)
		fail(http.StatusUnauthorized, "no principal has this token")
		return
	}
	if !p.Has(httpapi.RoleRuntime, httpapi.RoleApprover, httpapi.RoleOperator) {
		fail(http.StatusForbidden, fmt.Sprintf("principal %q has role %s only, which reads /metrics and nothing else", p.Name, rolesText(p.Roles)))
		return
	}
	value, err := c.startSession(r.Context(), cr)
	if err != nil {
		c.opts.Logger.ErrorContext(r.Context(), "console: sign-in not recorded", "principal", p.Name, "err", err)
		form(http.StatusServiceUnavailable, "the sign-in could not be recorded ("+err.Error()+"); try again in a moment")
		return
	}
	c.clearCookie(w, r, signinCookie)
	c.setCookie(w, r, sessionCookie, value, c.opts.SessionTTL)
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

func (c *console) signout(w http.ResponseWriter, r *http.Request, s session) (string, note) {
	c.clearCookie(w, r, sessionCookie)
	if c.anonymous() {
		return Prefix, note{Text: "signed out"}
	}
	err := c.opts.Sessions.RevokeConsoleSession(r.Context(), ledger.ConsoleSessionKey(s.id), c.opts.Now())
	if err != nil && !errors.Is(err, ledger.ErrNotFound) { // not found: pruned since, so signed out
		c.signoutNotRecorded(w, r, s, err, "")
		return "", note{}
	}
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
	return "", note{}
}

// signoutNotRecorded answers a sign-out the ledger did not record: the
// browser's cookie is cleared, but a copy of it would still open the
// console until it expires.
func (c *console) signoutNotRecorded(w http.ResponseWriter, r *http.Request, s session, err error, what string) {
	c.opts.Logger.ErrorContext(r.Context(), "console: sign-out not recorded", "principal", s.principal.Name, "err", err)
	if what == "" {
		what = "a copy of this session's cookie would still open the console until " + when(s.expires)
	}
	v := &view{Title: "Sign-out", Notes: []note{{Error: true, Text: "signed out in this browser, but the ledger did not record the sign-out (" + err.Error() +
		"): " + what + ", or until principal " + s.principal.Name + "'s token is changed; sign in and try again"}}}
	c.render(w, "refused", http.StatusServiceUnavailable, v)
}

// signoutEverywhere ends every session of a principal, on every node: the
// signed-in principal's own (the form names none, or names it), after
// which this browser signs in again; or, for a principal with role
// operator, the sessions of the principal the form names (a lost laptop,
// a reviewer leaving), which leaves the operator signed in.
func (c *console) signoutEverywhere(w http.ResponseWriter, r *http.Request, s session) (string, note) {
	if c.anonymous() {
		c.clearCookie(w, r, sessionCookie)
		return Prefix, note{Text: "signed out: this server has no credentials, so it keeps no sessions to end elsewhere"}
	}
	name := strings.TrimSpace(r.PostForm.Get("principal"))
	own := name == "" || name == s.principal.Name
	if own {
		name = s.principal.Name
	} else if !s.principal.Has(httpapi.RoleOperator) {
		c.refuse(w, r, s, refusal{http.StatusForbidden, fmt.Sprintf("refused: ending another principal's sessions needs role operator; principal %q has %s",
			s.principal.Name, rolesText(s.principal.Roles))})
		return "", note{}
	} else if !slices.ContainsFunc(c.creds, func(cr credential) bool { return cr.p.Name == name }) {
		return Prefix, note{Error: true, Text: fmt.Sprintf("no principal of this server is named %q: no session was ended", name)}
	}
	n, err := c.opts.Sessions.RevokeConsoleSessions(r.Context(), name, c.opts.Now())
	if err != nil {
		if own {
			c.clearCookie(w, r, sessionCookie)
			c.signoutNotRecorded(w, r, s, err, "the other sessions of "+name+" stay signed in until they expire")
			return "", note{}
		}
		c.opts.Logger.ErrorContext(r.Context(), "console: sessions not ended", "principal", name, "by", s.principal.Name, "err", err)
		return Prefix, note{Error: true, Text: fmt.Sprintf("the sessions of %s could not be ended (%v): they stay signed in; try again", name, err)}
	}
	c.opts.Logger.InfoContext(r.Context(), "console: signed out everywhere", "principal", name, "by", s.principal.Name, "sessions", n)
	if own {
		c.clearCookie(w, r, sessionCookie)
		http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
		return "", note{}
	}
	return Prefix, note{Text: fmt.Sprintf("ended %d session(s) of %s, on every node; %s signs in again to go on", n, name, name)}
}
