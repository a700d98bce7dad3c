package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
)

const (
	ritaTok    = "tok-rita-0123456789abcdef"
	olgaTok    = "tok-olga-0123456789abcdef"
	runTok     = "tok-runtime-0123456789abcdef"
	acmeTok    = "tok-acme-rita-0123456789abcdef"
	scraperTok = "tok-scraper-0123456789abcdef"
)

var principals = []httpapi.Principal{
	{Name: "rita", Roles: []httpapi.Role{httpapi.RoleApprover}, Token: ritaTok},
	{Name: "olga", Roles: []httpapi.Role{httpapi.RoleOperator}, Token: olgaTok},
	{Name: "agent", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: runTok},
	{Name: "acme-rita", Roles: []httpapi.Role{httpapi.RoleApprover, httpapi.RoleOperator}, Token: acmeTok, Namespaces: []string{"acme"}},
	{Name: "scraper", Roles: []httpapi.Role{httpapi.RoleMetrics}, Token: scraperTok},
}

// cacheDir is a wasm compilation cache shared by the package's tests, so
// that each executor does not compile the noop module again.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "connhost-console-cache-")
	if err != nil {
		panic(err)
	}
	cacheDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type env struct {
	ex  *host.Executor
	srv *httptest.Server
	log *syncBuffer // the server's log (access lines included)
	ui  *console
}

// syncBuffer is a log sink safe to read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newEnv serves the console, mounted by the HTTP API as serve mounts it,
// over a real executor (Pebble ledger on disk, the noop wasm module) with
// testdata/manifests. With no principals it is a server without
// credentials whose anonymous principal is anon.
func newEnv(t testing.TB, ps []httpapi.Principal, anon *httpapi.Principal, dev bool) *env {
	t.Helper()
	return newEnvWith(t, ps, anon, dev, nil)
}

// newEnvWith is newEnv with the console's and the API's options changed
// by set before they are used.
func newEnvWith(t testing.TB, ps []httpapi.Principal, anon *httpapi.Principal, dev bool, set func(*Options, *httpapi.Options)) *env {
	t.Helper()
	return newEnvOn(t, nil, ps, anon, dev, set)
}

// newEnvOn is newEnvWith serving on ln (nil: a listener of its own), for
// a test that must know the server's URL before the console is made.
func newEnvOn(t testing.TB, ln net.Listener, ps []httpapi.Principal, anon *httpapi.Principal, dev bool, set func(*Options, *httpapi.Options)) *env {
	t.Helper()
	return newEnvHost(t, ln, ps, anon, dev, set, nil)
}

// newEnvHost is newEnvOn with the executor's options changed by setHost
// (nil: none) before it opens.
func newEnvHost(t testing.TB, ln net.Listener, ps []httpapi.Principal, anon *httpapi.Principal, dev bool, set func(*Options, *httpapi.Options), setHost func(*host.Options)) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	wasm, _, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/noop")
	if err != nil {
		t.Fatalf("build noop connector: %v", err)
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "noop.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := manifests.LoadDir("testdata/manifests")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ho := host.Options{DataDir: filepath.Join(dir, "data"), CacheDir: cacheDir, Manifests: ms, ModuleDir: dir, AllowUnpinned: true, Logger: quiet}
	if setHost != nil {
		setHost(&ho)
	}
	ex, err := host.Open(ctx, ho)
	if err != nil {
		t.Fatalf("open executor: %v", err)
	}
	t.Cleanup(func() { _ = ex.Close(context.Background()) })
	log := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	co, ao := Options{Executor: ex, Principals: ps, Anonymous: anon, Dev: dev, Logger: logger}, httpapi.Options{Principals: ps, Anonymous: anon, Logger: logger}
	if set != nil {
		set(&co, &ao)
	}
	ui, err := newConsole(co)
	if err != nil {
		t.Fatal(err)
	}
	ao.Console = ui.handler
	h, err := httpapi.New(ex, ao)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{ex: ex, srv: srv, log: log, ui: ui}
}

// browser is a client with a cookie jar that does not follow redirects.
func (e *env) browser(t testing.TB) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *env) get(t testing.TB, c *http.Client, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(e.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// post sends form to path as the console's own page would (Origin the
// server's, Sec-Fetch-Site same-origin), with extra headers set over it.
func (e *env) post(t testing.TB, c *http.Client, path string, form url.Values, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t testing.TB, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return html.UnescapeString(m[1])
}

// signIn signs c in with token through the sign-in form and returns the
// session's CSRF token.
func (e *env) signIn(t testing.TB, c *http.Client, token string) string {
	t.Helper()
	_, form, _ := e.get(t, c, "/ui/signin")
	code, body, hdr := e.post(t, c, "/ui/signin", url.Values{"csrf": {csrfOf(t, form)}, "token": {token}, "next": {"/ui/approvals"}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != "/ui/approvals" {
		t.Fatalf("sign-in: %d %s\n%s", code, hdr.Get("Location"), body)
	}
	_, page, _ := e.get(t, c, "/ui/approvals")
	return csrfOf(t, page)
}

// gatedCall records a call awaiting approval in namespace ns.
func (e *env) gatedCall(t testing.TB, ns, id, args string) host.Result {
	t.Helper()
	res, err := e.ex.Execute(context.Background(), host.ToolCall{Namespace: ns, SessionID: "s1", ToolCallID: id, Tool: "gated.echo", Arguments: json.RawMessage(args)})
	if err != nil || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated call: %+v %v", res, err)
	}
	return res
}

// uncertainCall records a recovery_required call that fences session.
func (e *env) uncertainCall(t *testing.T, session string) host.Result {
	t.Helper()
	res, err := e.ex.Execute(context.Background(), host.ToolCall{SessionID: session, ToolCallID: "c1", Tool: "noop.echo", Arguments: json.RawMessage(`{"msg":"x"}`), Resumed: true})
	if err != nil || res.Status != host.StatusRecoveryRequired {
		t.Fatalf("resumed call: %+v %v", res, err)
	}
	return res
}

func (e *env) decision(t *testing.T, approvalID string) string {
	t.Helper()
	v, err := e.ex.ApprovalView(context.Background(), approvalID)
	if err != nil {
		t.Fatal(err)
	}
	return v.Decision
}

func (e *env) state(t *testing.T, id string) ledger.State {
	t.Helper()
	rec, _, err := e.ex.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec.State
}

func TestSignIn(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	c := e.browser(t)
	if code, _, hdr := e.get(t, c, "/ui/approvals"); code != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/ui/signin") {
		t.Fatalf("unsigned GET: %d %s, want the sign-in form", code, hdr.Get("Location"))
	}
	_, form, hdr := e.get(t, c, "/ui/signin")
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options", "Referrer-Policy", "Cache-Control"} {
		if hdr.Get(h) == "" {
			t.Errorf("the sign-in page lacks %s", h)
		}
	}
	tok := csrfOf(t, form)
	for _, bad := range []struct {
		token string
		code  int
	}{{"nope", http.StatusUnauthorized}, {"", http.StatusUnauthorized}, {scraperTok, http.StatusForbidden}} {
		code, body, hdr := e.post(t, c, "/ui/signin", url.Values{"csrf": {tok}, "token": {bad.token}}, nil)
		if code != bad.code || hdr.Get("Set-Cookie") != "" && strings.Contains(hdr.Get("Set-Cookie"), sessionCookie+"=") && !strings.Contains(hdr.Values("Set-Cookie")[0], signinCookie) {
			t.Errorf("sign-in with %q: %d (want %d), cookies %v", bad.token, code, bad.code, hdr.Values("Set-Cookie"))
		}
		for _, ck := range hdr.Values("Set-Cookie") {
			if strings.HasPrefix(ck, sessionCookie+"=") {
				t.Errorf("a refused sign-in set a session cookie: %s", ck)
			}
		}
		tok = csrfOf(t, body)
	}
	code, _, hdr := e.post(t, c, "/ui/signin", url.Values{"csrf": {tok}, "token": {ritaTok}, "next": {"https://evil.example/"}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != "/ui/" {
		t.Fatalf("sign-in: %d → %q, want /ui/ (never another site)", code, hdr.Get("Location"))
	}
	var session string
	for _, ck := range hdr.Values("Set-Cookie") {
		if strings.HasPrefix(ck, sessionCookie+"=") {
			session = ck
		}
	}
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(session, attr) {
			t.Errorf("session cookie %q lacks %s", session, attr)
		}
	}
	if strings.Contains(session, ritaTok) {
		t.Errorf("the cookie holds the token: %s", session)
	}
	_, page, _ := e.get(t, c, "/ui/approvals")
	if !strings.Contains(page, `<span id="principal">rita</span>`) {
		t.Fatalf("the inbox does not name the signed-in principal:\n%s", page)
	}
	// Sign-out ends the session on the server: the old cookie is refused.
	old := c.Jar.Cookies(mustURL(t, e.srv.URL+"/ui/"))
	if code, _, _ := e.post(t, c, "/ui/signout", url.Values{"csrf": {csrfOf(t, page)}}, nil); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", code)
	}
	replay := e.browser(t)
	replay.Jar.SetCookies(mustURL(t, e.srv.URL+"/ui/"), old)
	if code, _, _ := e.get(t, replay, "/ui/approvals"); code != http.StatusSeeOther {
		t.Errorf("the signed-out session's cookie still opens the inbox: %d", code)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestSignInNeedsItsForm(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	c := e.browser(t)
	// A form posted without the sign-in page's cookie (another site
	// signing the browser in under its own token) is refused.
	code, _, hdr := e.post(t, c, "/ui/signin", url.Values{"csrf": {"made-up"}, "token": {ritaTok}}, nil)
	if code != http.StatusForbidden || hdr.Get("Location") != "" {
		t.Fatalf("sign-in without the form's token: %d %s", code, hdr.Get("Location"))
	}
}

// TestApproveFromInbox: the inbox shows the whole call (review fields
// first, money with its currency), the approval is recorded under the
// signed-in reviewer, and the call then runs.
func TestApproveFromInbox(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	later := e.gatedCall(t, "", "c-later", `{"note":"second","amount":1,"currency":"usd"}`)
	res := e.gatedCall(t, "", "c1", `{"note":"rent","currency":"usd","amount":99999999}`)
	// c1 expires after c-later (recorded later, same TTL): the inbox lists c-later first.
	c := e.browser(t)
	csrf := e.signIn(t, c, ritaTok)
	_, page, _ := e.get(t, c, "/ui/approvals")
	if i, j := strings.Index(page, later.Approval.ID), strings.Index(page, res.Approval.ID); i < 0 || j < 0 || i > j {
		t.Errorf("inbox order: %s at %d, %s at %d; want the soonest expiry first", later.Approval.ID, i, res.Approval.ID, j)
	}
	sec := page[strings.Index(page, `id="`+res.Approval.ID+`"`):]
	for _, want := range []string{"999,999.99 USD", `<code>&#34;rent&#34;</code>`, res.Approval.ArgsDigest, "/approve", "waits for an operator"} {
		if !strings.Contains(sec, want) {
			t.Errorf("the inbox's call lacks %q", want)
		}
	}
	if a, n := strings.Index(sec, ">amount<"), strings.Index(sec, ">note<"); a < 0 || n < 0 || a > n {
		t.Errorf("review field amount is not before note (%d, %d)", a, n)
	}
	code, _, hdr := e.post(t, c, "/ui/approvals/"+res.Approval.ID+"/approve", url.Values{"csrf": {csrf}, "digest": {res.Approval.ArgsDigest}, "reason": {"invoice 42"}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != "/ui/approvals" {
		t.Fatalf("approve: %d %s, want back to the inbox", code, hdr.Get("Location"))
	}
	_, page, _ = e.get(t, c, hdr.Get("Location"))
	if !strings.Contains(page, "approved "+res.Approval.ID) || !strings.Contains(page, "as rita") || !strings.Contains(page, `<a href="/ui/executions/`+res.ExecutionID+`">`) {
		t.Errorf("the inbox after the approval does not say so, or does not link to the call:\n%s", page)
	}
	again, err := e.ex.Execute(context.Background(), host.ToolCall{SessionID: "s1", ToolCallID: "c1", Tool: "gated.echo", Arguments: json.RawMessage(`{"note":"rent","currency":"usd","amount":99999999}`)})
	if err != nil || again.Status != host.StatusSucceeded || again.Approval.By != "rita" || again.Approval.Reason != "invoice 42" {
		t.Fatalf("the approved call: %+v %v", again, err)
	}
	if _, page, _ = e.get(t, c, "/ui/executions/"+res.ExecutionID); !strings.Contains(page, `id="status">succeeded<`) {
		t.Errorf("the execution page does not show it succeeded")
	}
	// A digest other than the one shown is refused by the executor, and
	// the page says why.
	code, _, hdr = e.post(t, c, "/ui/approvals/"+later.Approval.ID+"/approve", url.Values{"csrf": {csrf}, "digest": {strings.Repeat("0", 64)}}, nil)
	if _, page, _ = e.get(t, c, hdr.Get("Location")); code != http.StatusSeeOther || !strings.Contains(page, "note error") || e.decision(t, later.Approval.ID) != "pending" {
		t.Errorf("approve with another digest: %d, decision %s", code, e.decision(t, later.Approval.ID))
	}
}

// TestPostRefused: a decision POST without the session's CSRF token, with
// another session's, or marked cross-site by the browser is refused
// before anything is decided.
func TestPostRefused(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	res := e.gatedCall(t, "", "c1", `{"amount":500,"currency":"usd"}`)
	c := e.browser(t)
	csrf := e.signIn(t, c, ritaTok)
	otherCSRF := e.signIn(t, e.browser(t), olgaTok)
	path := "/ui/approvals/" + res.Approval.ID + "/approve"
	form := func(tok string) url.Values {
		return url.Values{"csrf": {tok}, "digest": {res.Approval.ArgsDigest}}
	}
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
		want int
	}{
		{"no CSRF token", form(""), nil, http.StatusForbidden},
		{"another session's CSRF token", form(otherCSRF), nil, http.StatusForbidden},
		{"Origin of another site", form(csrf), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""}, http.StatusForbidden},
		{"Origin null", form(csrf), map[string]string{"Origin": "null", "Sec-Fetch-Site": ""}, http.StatusForbidden},
		{"Sec-Fetch-Site cross-site", form(csrf), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": ""}, http.StatusForbidden},
		{"Sec-Fetch-Site same-site", form(csrf), map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"Origin of another site, same-origin claimed by no browser", form(csrf), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"no session", form(csrf), map[string]string{"Cookie": ""}, http.StatusUnauthorized},
	} {
		cl := c
		if tc.name == "no session" {
			cl = e.browser(t)
		}
		if code, body, _ := e.post(t, cl, path, tc.form, tc.hdr); code != tc.want || !strings.Contains(body, "refused") {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
	if d := e.decision(t, res.Approval.ID); d != "pending" {
		t.Fatalf("a refused POST decided: %s", d)
	}
	// What Chromium sends from the console's page (its Referrer-Policy
	// no-referrer makes the Origin null).
	if code, _, _ := e.post(t, c, path, form(csrf), map[string]string{"Origin": "null"}); code != http.StatusSeeOther || e.decision(t, res.Approval.ID) != "approved" {
		t.Fatalf("the same POST from the console's page: %d, %s", code, e.decision(t, res.Approval.ID))
	}
}

// TestRuntimeCannotDecide: a runtime principal reads the inbox and the
// recovery queue without any action form, and its POSTs are refused (403)
// by the handlers.
func TestRuntimeCannotDecide(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	res := e.gatedCall(t, "", "c1", `{"amount":500,"currency":"usd"}`)
	unc := e.uncertainCall(t, "s-old")
	c := e.browser(t)
	csrf := e.signIn(t, c, runTok)
	for _, p := range []string{"/ui/approvals", "/ui/recovery", "/ui/executions/" + unc.ExecutionID} {
		code, page, _ := e.get(t, c, p)
		if code != http.StatusOK || !strings.Contains(page, `id="readonly"`) {
			t.Errorf("%s: %d, no read-only banner", p, code)
		}
		for _, bad := range []string{"/approve", "/reject", "/resolve"} {
			if strings.Contains(page, bad) {
				t.Errorf("%s shows the runtime principal an action (%s)", p, bad)
			}
		}
	}
	if _, page, _ := e.get(t, c, "/ui/approvals"); !strings.Contains(page, res.Approval.ID) {
		t.Errorf("the runtime principal does not see the call it may read")
	}
	if code, _, _ := e.post(t, c, "/ui/approvals/"+res.Approval.ID+"/approve", url.Values{"csrf": {csrf}, "digest": {res.Approval.ArgsDigest}}, nil); code != http.StatusForbidden {
		t.Errorf("runtime approve: %d, want 403", code)
	}
	if code, _, _ := e.post(t, c, "/ui/approvals/"+res.Approval.ID+"/reject", url.Values{"csrf": {csrf}}, nil); code != http.StatusForbidden {
		t.Errorf("runtime reject: %d, want 403", code)
	}
	if code, _, _ := e.post(t, c, "/ui/executions/"+unc.ExecutionID+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"abandon"}, "reason": {"x"}}, nil); code != http.StatusForbidden {
		t.Errorf("runtime resolve: %d, want 403", code)
	}
	// An operator may resolve but not approve, as in the API.
	oc := e.browser(t)
	ocsrf := e.signIn(t, oc, olgaTok)
	if code, _, _ := e.post(t, oc, "/ui/approvals/"+res.Approval.ID+"/approve", url.Values{"csrf": {ocsrf}, "digest": {res.Approval.ArgsDigest}}, nil); code != http.StatusForbidden {
		t.Errorf("operator approve: %d, want 403", code)
	}
	if d, s := e.decision(t, res.Approval.ID), e.state(t, unc.ExecutionID); d != "pending" || s != ledger.StateRecoveryRequired {
		t.Fatalf("refused POSTs changed something: %s, %s", d, s)
	}
}

// TestResolveUnfences: an operator resolves a recovery_required call from
// the queue (its trail and key shown), and the page then shows the
// session unfenced; the session takes new calls again.
func TestResolveUnfences(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	unc := e.uncertainCall(t, "s-old")
	c := e.browser(t)
	csrf := e.signIn(t, c, olgaTok)
	_, page, _ := e.get(t, c, "/ui/recovery")
	for _, want := range []string{unc.ExecutionID, unc.IdempotencyKey, "resumed_without_record", "/resolve", "session <a href=\"/ui/executions?session=s-old&amp;exact=1\">s-old</a>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the recovery queue lacks %q", want)
		}
	}
	path := "/ui/executions/" + unc.ExecutionID + "/resolve"
	if code, _, hdr := e.post(t, c, path, url.Values{"csrf": {csrf}, "outcome": {"abandon"}}, nil); code != http.StatusSeeOther || hdr.Get("Location") != "/ui/recovery" {
		t.Fatalf("resolve without a reason: %d %s", code, hdr.Get("Location"))
	}
	if e.state(t, unc.ExecutionID) != ledger.StateRecoveryRequired {
		t.Fatal("a resolve without a reason was recorded")
	}
	code, _, hdr := e.post(t, c, path, url.Values{"csrf": {csrf}, "outcome": {"abandon"}, "reason": {"no trace at the provider"}}, nil)
	if code != http.StatusSeeOther {
		t.Fatalf("resolve: %d", code)
	}
	_, page, _ = e.get(t, c, hdr.Get("Location"))
	if !strings.Contains(page, `id="unfenced"`) || !strings.Contains(page, "is no longer fenced") || !strings.Contains(page, "abandoned by olga") {
		t.Errorf("after the resolve the page does not show the session unfenced:\n%s", page)
	}
	if !strings.Contains(page, `<th scope="row">msg</th><td><code>&#34;x&#34;</code>`) {
		t.Errorf("the execution page does not show the arguments one field a line")
	}
	if _, page, _ = e.get(t, c, "/ui/recovery"); !strings.Contains(page, `id="recovery-empty"`) {
		t.Errorf("the queue still lists the resolved call")
	}
	if res, err := e.ex.Execute(context.Background(), host.ToolCall{SessionID: "s-old", ToolCallID: "c2", Tool: "noop.echo", Arguments: json.RawMessage(`{}`)}); err != nil || res.Status != host.StatusSucceeded {
		t.Errorf("a new call of the freed session: %+v %v", res, err)
	}
}

// TestNamespaces: a principal of namespace acme sees nothing of globex's
// calls, and cannot decide them.
func TestNamespaces(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	other := e.gatedCall(t, "globex", "c1", `{"amount":500,"currency":"usd"}`)
	mine := e.gatedCall(t, "acme", "c1", `{"amount":700,"currency":"usd"}`)
	c := e.browser(t)
	csrf := e.signIn(t, c, acmeTok)
	_, page, _ := e.get(t, c, "/ui/approvals")
	if strings.Contains(page, other.Approval.ID) || !strings.Contains(page, mine.Approval.ID) {
		t.Errorf("acme's inbox: shows globex's %v, its own %v", strings.Contains(page, other.Approval.ID), strings.Contains(page, mine.Approval.ID))
	}
	if _, page, _ = e.get(t, c, "/ui/executions"); strings.Contains(page, other.ExecutionID) {
		t.Errorf("acme's executions list globex's call")
	}
	if code, _, _ := e.get(t, c, "/ui/executions/"+other.ExecutionID); code != http.StatusNotFound {
		t.Errorf("globex's execution for acme: %d, want 404", code)
	}
	e.post(t, c, "/ui/approvals/"+other.Approval.ID+"/approve", url.Values{"csrf": {csrf}, "digest": {other.Approval.ArgsDigest}}, nil)
	if d := e.decision(t, other.Approval.ID); d != "pending" {
		t.Fatalf("acme's reviewer decided globex's call: %s", d)
	}
}

// TestSearchInAnotherNamespace: a search naming a namespace the
// principal does not act in is answered as the API answers it, 403
// namespace_forbidden, logged at WARN and never as an internal error, and
// the page lists nothing of that namespace.
func TestSearchInAnotherNamespace(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	other := e.gatedCall(t, "globex", "c1", `{"amount":500,"currency":"usd"}`)
	c := e.browser(t)
	e.signIn(t, c, acmeTok)
	code, page, _ := e.get(t, c, "/ui/executions?namespace=globex")
	if code != http.StatusForbidden || !strings.Contains(page, "namespace_forbidden") || strings.Contains(page, "internal error") {
		t.Errorf("search in another namespace: %d, want 403 namespace_forbidden:\n%s", code, page)
	}
	if strings.Contains(page, other.ExecutionID) {
		t.Errorf("the page lists globex's call")
	}
	log := e.log.String()
	if strings.Contains(log, "level=ERROR") || !strings.Contains(log, `level=WARN msg="console: refused" method=GET path=/ui/executions code=namespace_forbidden`) {
		t.Errorf("want one WARN line and no ERROR:\n%s", log)
	}
}

// TestHostileArgumentEscaped: markup, a terminal escape and a
// bidirectional override in an argument reach the page as text and
// escapes, never as markup or raw characters.
func TestHostileArgumentEscaped(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	res := e.gatedCall(t, "", "c1", `{"amount":500,"currency":"usd","note":"<script>alert(1)</script><img src=x onerror=alert(2)>\u001b[2J\u202egnp.exe"}`)
	c := e.browser(t)
	e.signIn(t, c, ritaTok)
	for _, p := range []string{"/ui/approvals", "/ui/executions/" + res.ExecutionID} {
		_, page, _ := e.get(t, c, p)
		for _, bad := range []string{"<script>", "<img", "\x1b", "\u202e"} {
			if strings.Contains(page, bad) {
				t.Errorf("%s holds %q raw", p, bad)
			}
		}
		for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `\u001B[2J`, `\u202E`} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %q", p, want)
			}
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	c := e.browser(t)
	e.signIn(t, c, ritaTok)
	for _, p := range []string{"/ui/approvals", "/ui/recovery", "/ui/executions", "/ui/connectors", "/ui/static/style.css", "/ui/nonexistent"} {
		_, _, h := e.get(t, c, p)
		// Script only from the console's own files: no inline script, no
		// eval, nothing from elsewhere.
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-") || !strings.Contains(csp, "script-src 'self';") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", p, h)
		}
	}
}

// TestSecureBehindAProxy: a console that browsers reach over https
// through a TLS-terminating proxy (the request reaching the server is
// plain http) marks the sign-in and session cookies Secure, so a browser
// never sends them over plain http, and every answer, the console's pages
// and the API's alike, carries Strict-Transport-Security.
func TestSecureBehindAProxy(t *testing.T) {
	e := newEnvWith(t, principals, nil, false, func(co *Options, ao *httpapi.Options) { co.Secure, ao.Secure = true, true })
	c := e.browser(t)
	_, form, hdr := e.get(t, c, "/ui/signin")
	cookies := hdr.Values("Set-Cookie")
	req, _ := http.NewRequest("POST", e.srv.URL+"/ui/signin", strings.NewReader(url.Values{"csrf": {csrfOf(t, form)}, "token": {ritaTok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	// The jar keeps Secure cookies from plain http, as a browser does:
	// the sign-in cookie is sent by hand, as the browser at the proxy's
	// https URL would send it.
	for _, ck := range (&http.Response{Header: hdr}).Cookies() {
		req.AddCookie(ck)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	cookies = append(cookies, resp.Header.Values("Set-Cookie")...)
	if len(cookies) < 2 {
		t.Fatalf("cookies %q, want the sign-in form's and the session's", cookies)
	}
	for _, ck := range cookies {
		if !strings.Contains(ck, "; Secure") || !strings.Contains(ck, "HttpOnly") {
			t.Errorf("cookie without Secure: %s", ck)
		}
	}
	for _, p := range []string{"/ui/signin", "/ui/approvals", "/ui/static/style.css", "/", "/healthz", "/v1/executions"} {
		if _, _, h := e.get(t, c, p); h.Get("Strict-Transport-Security") != httpapi.HSTS {
			t.Errorf("%s: Strict-Transport-Security %q, want %q", p, h.Get("Strict-Transport-Security"), httpapi.HSTS)
		}
	}
}

// TestDev: without credentials, `connhost dev`'s console signs every
// browser in as its loopback reviewer and says so on every page; its
// forms still need the session's CSRF token and a same-origin POST.
func TestDev(t *testing.T) {
	dev := httpapi.DevLoopback
	e := newEnv(t, nil, &dev, true)
	res := e.gatedCall(t, "", "c1", `{"amount":500,"currency":"usd"}`)
	c := e.browser(t)
	for _, p := range []string{"/ui/approvals", "/ui/recovery", "/ui/executions", "/ui/connectors", "/ui/executions/" + res.ExecutionID} {
		code, page, _ := e.get(t, c, p)
		if code != http.StatusOK || !strings.Contains(page, `id="banner"`) || !strings.Contains(page, "connhost dev: you are signed in as <b>dev-loopback</b>") {
			t.Errorf("%s: %d, no dev banner", p, code)
		}
	}
	_, page, _ := e.get(t, c, "/ui/approvals")
	csrf := csrfOf(t, page)
	path := "/ui/approvals/" + res.Approval.ID + "/approve"
	if code, _, _ := e.post(t, e.browser(t), path, url.Values{"digest": {res.Approval.ArgsDigest}}, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("cross-site POST to dev: %d", code)
	}
	if code, _, _ := e.post(t, e.browser(t), path, url.Values{"digest": {res.Approval.ArgsDigest}}, nil); code != http.StatusForbidden {
		t.Errorf("POST to dev without a CSRF token: %d", code)
	}
	if e.decision(t, res.Approval.ID) != "pending" {
		t.Fatal("a refused POST decided")
	}
	if code, _, _ := e.post(t, c, path, url.Values{"csrf": {csrf}, "digest": {res.Approval.ArgsDigest}}, nil); code != http.StatusSeeOther {
		t.Fatalf("approve in dev: %d", code)
	}
	if v, _ := e.ex.ApprovalView(context.Background(), res.Approval.ID); v.By != "dev-loopback" {
		t.Errorf("recorded reviewer %q, want dev-loopback", v.By)
	}
	// The Host check of a server without credentials covers the console.
	req, _ := http.NewRequest("GET", e.srv.URL+"/ui/approvals", nil)
	req.Host = "rebind.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a rebinding Host reached dev's console: %d", resp.StatusCode)
	}
}

// TestAnonymousRequestsKeepNoState: a server without credentials kept a
// session (8 h) for every request without a cookie, and swept them all
// under the lock every page takes: 41,000 GETs cost some 100 MB. Now the
// console keeps nothing per browser (the session and an action's outcome
// travel in cookies), so cookieless requests are served alike however
// many come; a browser that keeps its cookie still gets its forms' CSRF
// token (the same on every page), its action's outcome on the next page
// only, and another browser's token is refused.
func TestAnonymousRequestsKeepNoState(t *testing.T) {
	dev := httpapi.DevLoopback
	e := newEnv(t, nil, &dev, true)
	res := e.gatedCall(t, "", "c1", `{"amount":500,"currency":"usd"}`)
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := 0; i < 2000; i++ {
		if code, _, _ := e.get(t, anon, "/ui/executions"); code != http.StatusOK {
			t.Fatalf("GET %d: %d", i, code)
		}
	}

	c, other := e.browser(t), e.browser(t)
	_, page, _ := e.get(t, c, "/ui/approvals")
	csrf := csrfOf(t, page)
	if _, page, _ = e.get(t, c, "/ui/recovery"); csrfOf(t, page) != csrf {
		t.Errorf("the browser's CSRF token changed between pages")
	}
	_, page, _ = e.get(t, other, "/ui/approvals")
	if csrfOf(t, page) == csrf {
		t.Fatal("two browsers share a CSRF token")
	}
	path := "/ui/approvals/" + res.Approval.ID + "/approve"
	if code, _, _ := e.post(t, other, path, url.Values{"csrf": {csrf}, "digest": {res.Approval.ArgsDigest}}, nil); code != http.StatusForbidden {
		t.Errorf("another browser's CSRF token: %d, want 403", code)
	}
	if code, _, _ := e.post(t, c, path, url.Values{"csrf": {csrf}, "digest": {res.Approval.ArgsDigest}}, nil); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	if _, page, _ = e.get(t, c, "/ui/executions/"+res.ExecutionID); !strings.Contains(page, "approved "+res.Approval.ID) {
		t.Errorf("the next page does not tell the approval's outcome:\n%s", page)
	}
	if _, page, _ = e.get(t, c, "/ui/executions/"+res.ExecutionID); strings.Contains(page, "approved "+res.Approval.ID) {
		t.Errorf("the outcome is shown again on the page after")
	}
}

// TestSignInThrottled: a browser that keeps signing in with wrong tokens
// is refused (429) after httpapi.AuthFailureBurst tries, before its token
// is looked at, a right one included; each refused try is no WARN line of
// its own.
func TestSignInThrottled(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	c := e.browser(t)
	try := func(token string) int {
		t.Helper()
		_, form, _ := e.get(t, c, "/ui/signin")
		code, _, _ := e.post(t, c, "/ui/signin", url.Values{"csrf": {csrfOf(t, form)}, "token": {token}}, nil)
		return code
	}
	var got []int
	for i := 0; i < 3*httpapi.AuthFailureBurst; i++ {
		got = append(got, try(fmt.Sprint("guess-", i)))
	}
	for i, code := range got {
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < httpapi.AuthFailureBurst]; code != want {
			t.Fatalf("sign-in %d: %d, want %d (all: %v)", i+1, code, want, got)
		}
	}
	if code := try(ritaTok); code != http.StatusTooManyRequests {
		t.Errorf("a right token from a throttled browser: %d, want 429", code)
	}
	if n := strings.Count(e.log.String(), "level=WARN"); n != 2*httpapi.AuthFailureBurst+1 {
		t.Errorf("%d WARN lines, want %d (a refusal and an access line per 401, one summary):\n%s", n, 2*httpapi.AuthFailureBurst+1, e.log.String())
	}
}

// TestAccessLogNamesThePrincipal: the console's requests are logged by
// the API's access log with the signed-in principal and the approval
// acted on, and a refused one at WARN with why.
func TestAccessLogNamesThePrincipal(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	res := e.gatedCall(t, "", "c1", `{"amount":500,"currency":"usd"}`)
	c := e.browser(t)
	csrf := e.signIn(t, c, runTok)
	e.post(t, c, "/ui/approvals/"+res.Approval.ID+"/approve", url.Values{"csrf": {csrf}, "digest": {res.Approval.ArgsDigest}}, nil)
	want := []string{
		"level=WARN msg=\"console: refused\" method=POST path=/ui/approvals/" + res.Approval.ID + "/approve principal=agent",
		"level=WARN msg=\"http request\" method=POST path=/ui/approvals/" + res.Approval.ID + "/approve status=403",
		"principal=agent approval_id=" + res.Approval.ID,
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, w := range want {
		for !strings.Contains(e.log.String(), w) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !strings.Contains(e.log.String(), w) {
			t.Errorf("the log lacks %q:\n%s", w, e.log.String())
		}
	}
}
