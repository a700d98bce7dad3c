package console

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
)

// TestSessionCookie: a session is its signed cookie and its row in the
// ledger, so another console on the same ledger (a restart, another node)
// accepts the cookie, and nothing else does: a cookie naming another
// principal, a changed one, an expired one, one whose principal's token
// was rotated, and, in a console started after the sign-out, one that was
// signed out. Another session of the same principal lives on.
func TestSessionCookie(t *testing.T) {
	var opts Options
	e := newEnvWith(t, principals, nil, false, func(co *Options, _ *httpapi.Options) { opts = *co })
	c, other := e.browser(t), e.browser(t)
	csrf := e.signIn(t, c, ritaTok)
	e.signIn(t, other, ritaTok)
	value, otherValue := sessionValue(t, e, c), sessionValue(t, e, other)
	if p := who(t, opts, value); p != "rita" {
		t.Fatalf("another console with the same principals and ledger: %q, want rita's session", p)
	}
	parts := strings.Split(value, ".")
	forged := append([]string{}, parts...)
	forged[3] = base64.RawURLEncoding.EncodeToString([]byte("olga"))
	later := opts
	later.Now = func() time.Time { return time.Now().Add(DefaultSessionTTL + time.Minute) }
	rotated := opts
	rotated.Principals = append([]httpapi.Principal{}, principals...)
	rotated.Principals[0].Token = "tok-rita-rotated-0123456789abcdef"
	for _, tc := range []struct {
		name  string
		o     Options
		value string
	}{
		{"naming another principal", opts, strings.Join(forged, ".")},
		{"with a changed expiry", opts, strings.Replace(value, "."+parts[2]+".", "."+parts[2]+"9.", 1)},
		{"with a flipped MAC", opts, value[:len(value)-1] + map[bool]string{true: "A", false: "E"}[value[len(value)-1] != 'A']},
		// The MAC's last character holds 4 bits and 2 unused ones: one
		// that differs only there decodes to the same bytes unless the
		// decoding is strict. Refused: there is one spelling of a cookie.
		{"with the MAC's unused bits set", opts, value[:len(value)-1] + string(unusedBitsSet(value[len(value)-1]))},
		{"a random id", opts, randomToken()},
		{"expired", later, value},
		{"of a rotated token", rotated, value},
	} {
		if p := who(t, tc.o, tc.value); p != "" {
			t.Errorf("a cookie %s opened the console as %q", tc.name, p)
		}
	}

	if code, _, _ := e.post(t, c, "/ui/signout", url.Values{"csrf": {csrf}}, nil); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", code)
	}
	if p := who(t, opts, value); p != "" {
		t.Errorf("after the sign-out a console started anew accepts the cookie as %q", p)
	}
	if p := who(t, opts, otherValue); p != "rita" {
		t.Errorf("rita's other session after one sign-out: %q, want rita", p)
	}
	row, err := e.ex.Ledger().(ledger.ConsoleSessions).ConsoleSession(context.Background(), ledger.ConsoleSessionKey(parts[1]))
	if err != nil || row.Revoked.IsZero() || row.Principal != "rita" {
		t.Errorf("the signed-out session in the ledger: %+v, %v; want rita's, revoked", row, err)
	}
}

// sessionValue returns the session cookie c holds.
func sessionValue(t *testing.T, e *env, c *http.Client) string {
	t.Helper()
	for _, ck := range c.Jar.Cookies(mustURL(t, e.srv.URL+"/ui/")) {
		if ck.Name == sessionCookie {
			return ck.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// who returns the principal a console started with o names for the
// session cookie value, "" when it sends the browser to sign in.
func who(t *testing.T, o Options, value string) string {
	t.Helper()
	ui, err := newConsole(o)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/ui/approvals", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: value})
	rec := httptest.NewRecorder()
	ui.handler.ServeHTTP(rec, req)
	if rec.Code == http.StatusSeeOther {
		return ""
	}
	page := rec.Body.String()
	i := strings.Index(page, `<span id="principal">`)
	if rec.Code != http.StatusOK || i < 0 {
		t.Fatalf("GET with a cookie: %d\n%s", rec.Code, page)
	}
	return page[i+len(`<span id="principal">`) : i+strings.Index(page[i:], "</span>")]
}

// TestSignOutEverywhere: "Sign out everywhere" ends every session of the
// signed-in principal, in every console on the ledger, and no other
// principal's; an approver may not end another principal's sessions; an
// operator may, and stays signed in; a name that is no principal ends
// nothing and says so.
func TestSignOutEverywhere(t *testing.T) {
	var opts Options
	e := newEnvWith(t, principals, nil, false, func(co *Options, _ *httpapi.Options) { opts = *co })
	rita1, rita2, olga, agent := e.browser(t), e.browser(t), e.browser(t), e.browser(t)
	csrf := e.signIn(t, rita1, ritaTok)
	e.signIn(t, rita2, ritaTok)
	olgaCSRF := e.signIn(t, olga, olgaTok)
	e.signIn(t, agent, runTok)
	_, page, _ := e.get(t, rita1, "/ui/approvals")
	if !strings.Contains(page, `action="/ui/signout/everywhere"`) || strings.Contains(page, `id="end-principal"`) {
		t.Errorf("an approver's page: want the sign-out-everywhere button without a principal field")
	}
	_, page, _ = e.get(t, olga, "/ui/approvals")
	if !strings.Contains(page, `id="end-principal" name="principal"`) {
		t.Errorf("an operator's page has no field naming whose sessions to end")
	}

	// rita may not end agent's sessions.
	if code, body, _ := e.post(t, rita1, "/ui/signout/everywhere", url.Values{"csrf": {csrf}, "principal": {"agent"}}, nil); code != http.StatusForbidden ||
		!strings.Contains(body, "needs role operator") {
		t.Errorf("an approver ending agent's sessions: %d\n%s", code, body)
	}
	// olga names no principal.
	if code, _, hdr := e.post(t, olga, "/ui/signout/everywhere", url.Values{"csrf": {olgaCSRF}, "principal": {"nobody"}}, nil); code != http.StatusSeeOther || hdr.Get("Location") != Prefix {
		t.Errorf("an operator naming no principal: %d → %q", code, hdr.Get("Location"))
	}
	if _, page, _ := e.get(t, olga, "/ui/"); !strings.Contains(page, `no principal of this server is named &#34;nobody&#34;`) {
		t.Errorf("the page after naming no principal does not say so")
	}

	riteValues := []string{sessionValue(t, e, rita1), sessionValue(t, e, rita2)}
	code, _, hdr := e.post(t, rita1, "/ui/signout/everywhere", url.Values{"csrf": {csrf}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != Prefix+"signin" {
		t.Fatalf("sign out everywhere: %d → %q", code, hdr.Get("Location"))
	}
	for i, v := range riteValues {
		if p := who(t, opts, v); p != "" {
			t.Errorf("rita's session %d after signing out everywhere opens another console as %q", i+1, p)
		}
	}
	if code, _, _ := e.get(t, rita2, "/ui/approvals"); code != http.StatusSeeOther {
		t.Errorf("rita's other browser after signing out everywhere: %d, want the sign-in form", code)
	}
	for name, c := range map[string]*http.Client{"olga": olga, "agent": agent} {
		if code, _, _ := e.get(t, c, "/ui/approvals"); code != http.StatusOK {
			t.Errorf("%s after rita signed out everywhere: %d, want signed in", name, code)
		}
	}

	// olga, an operator, ends agent's sessions and stays signed in.
	agentValue := sessionValue(t, e, agent)
	code, _, hdr = e.post(t, olga, "/ui/signout/everywhere", url.Values{"csrf": {olgaCSRF}, "principal": {"agent"}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != Prefix {
		t.Fatalf("an operator ending agent's sessions: %d → %q", code, hdr.Get("Location"))
	}
	if _, page, _ := e.get(t, olga, "/ui/"); !strings.Contains(page, "ended 1 session(s) of agent") {
		t.Errorf("the operator's page does not say how many sessions it ended")
	}
	if p := who(t, opts, agentValue); p != "" {
		t.Errorf("agent's session after an operator ended it: %q", p)
	}
	if code, _, _ := e.get(t, olga, "/ui/approvals"); code != http.StatusOK {
		t.Errorf("the operator after ending agent's sessions: %d, want signed in", code)
	}
}

// TestSignOutEverywhereRefusedCrossSite: "Sign out everywhere" is a POST
// that ends sessions, so a form from another site, or one without the
// session's CSRF token, is refused like a decision and ends none: the
// operator's own and the sessions of the principal it names stay signed
// in.
func TestSignOutEverywhereRefusedCrossSite(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	olga, rita := e.browser(t), e.browser(t)
	csrf := e.signIn(t, olga, olgaTok)
	e.signIn(t, rita, ritaTok)
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no CSRF token", url.Values{"principal": {"rita"}}, nil},
		{"another site's form", url.Values{"csrf": {csrf}, "principal": {"rita"}}, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
		{"another site's form, the operator's own sessions", url.Values{"csrf": {csrf}}, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
	} {
		if code, body, _ := e.post(t, olga, "/ui/signout/everywhere", tc.form, tc.hdr); code != http.StatusForbidden || !strings.Contains(body, "refused") {
			t.Errorf("%s: %d, want 403 refused", tc.name, code)
		}
	}
	for name, c := range map[string]*http.Client{"olga": olga, "rita": rita} {
		if code, _, _ := e.get(t, c, "/ui/approvals"); code != http.StatusOK {
			t.Errorf("%s after refused sign-outs everywhere: %d, want still signed in", name, code)
		}
	}
}

// TestLedgerRowAloneOpensNothing: the ledger's row and the cookie's MAC
// must both agree. Someone who can write the database but holds no
// principal's token can add a live row for an id of their choosing: with
// a cookie under any key but the principal's it opens nothing. A row
// naming another principal than its cookie opens nothing, and a cookie
// with a right MAC whose row is missing (never recorded, or pruned)
// opens nothing either.
func TestLedgerRowAloneOpensNothing(t *testing.T) {
	var opts Options
	e := newEnvWith(t, principals, nil, false, func(co *Options, _ *httpapi.Options) { opts = *co })
	ctx := context.Background()
	cs := e.ex.Ledger().(ledger.ConsoleSessions)
	now := time.Now()

	// A row for an id of the writer's choosing, with a cookie under a key
	// the writer guessed.
	guessed := credential{p: principals[1], key: sessionKey("not-olgas-token")}
	s, value := issue(guessed, now.Add(time.Hour))
	if err := cs.AddConsoleSession(ctx, ledger.ConsoleSession{Key: ledger.ConsoleSessionKey(s.id), Principal: "olga", Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if p := who(t, opts, value); p != "" {
		t.Errorf("a row written into the ledger with a cookie under a guessed key opened the console as %q", p)
	}

	// rita's cookie, with a right MAC, whose row names olga: the row
	// speaks for nobody the cookie does not name.
	rita := credential{p: principals[0], key: sessionKey(ritaTok)}
	rs, rvalue := issue(rita, now.Add(time.Hour))
	if err := cs.AddConsoleSession(ctx, ledger.ConsoleSession{Key: ledger.ConsoleSessionKey(rs.id), Principal: "olga", Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if p := who(t, opts, rvalue); p != "" {
		t.Errorf("rita's cookie whose row names olga opened the console as %q", p)
	}

	// A right cookie whose row the ledger does not hold.
	_, unrecorded := issue(rita, now.Add(time.Hour))
	if p := who(t, opts, unrecorded); p != "" {
		t.Errorf("a cookie with a right MAC and no row in the ledger opened the console as %q", p)
	}
}

// failingSessions is the executor's ledger whose console session reads
// fail, as a database that cannot be reached.
type failingSessions struct{ ledger.ConsoleSessions }

func (failingSessions) ConsoleSession(context.Context, [32]byte) (ledger.ConsoleSession, error) {
	return ledger.ConsoleSession{}, fmt.Errorf("%w: connection refused", ledger.ErrUnavailable)
}

// TestSessionLedgerUnavailable: when the ledger cannot be read, a page
// says so (503), acts on nothing and leaves the browser signed in,
// rather than show a page to a session that may have been signed out.
func TestSessionLedgerUnavailable(t *testing.T) {
	var opts Options
	e := newEnvWith(t, principals, nil, false, func(co *Options, _ *httpapi.Options) { opts = *co })
	c := e.browser(t)
	e.signIn(t, c, ritaTok)
	opts.Sessions = failingSessions{e.ex.Ledger().(ledger.ConsoleSessions)}
	ui, err := newConsole(opts)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/ui/approvals", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: sessionValue(t, e, c)})
	rec := httptest.NewRecorder()
	ui.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "could not check this session in the ledger") {
		t.Errorf("a page while the ledger is unreachable: %d\n%s", rec.Code, rec.Body.String())
	}
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == sessionCookie && ck.MaxAge < 0 {
			t.Error("the session cookie was cleared")
		}
	}
}

// TestNoteTravelsInACookie: an action's outcome reaches the next page
// through a cookie, so another console with the same principals (another
// node, a restart) shows it; a note cookie sealed for another session,
// or changed, shows nothing.
func TestNoteTravelsInACookie(t *testing.T) {
	var opts Options
	e := newEnvWith(t, principals, nil, false, func(co *Options, _ *httpapi.Options) { opts = *co })
	res := e.gatedCall(t, "", "c1", `{"amount":500,"currency":"usd"}`)
	c, other := e.browser(t), e.browser(t)
	csrf := e.signIn(t, c, ritaTok)
	e.signIn(t, other, ritaTok)
	_, _, hdr := e.post(t, c, "/ui/approvals/"+res.Approval.ID+"/reject", url.Values{"csrf": {csrf}, "reason": {"not ours"}}, nil)
	var session, noteCk *http.Cookie
	for _, ck := range c.Jar.Cookies(mustURL(t, e.srv.URL+"/ui/")) {
		switch ck.Name {
		case sessionCookie:
			session = ck
		case noteCookie:
			noteCk = ck
		}
	}
	if hdr.Get("Location") != "/ui/approvals" || session == nil || noteCk == nil {
		t.Fatalf("reject: → %q, session cookie %v, note cookie %v", hdr.Get("Location"), session, noteCk)
	}
	node2, err := newConsole(opts)
	if err != nil {
		t.Fatal(err)
	}
	show := func(cookies ...*http.Cookie) string {
		req := httptest.NewRequest("GET", "/ui/approvals", nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		rec := httptest.NewRecorder()
		node2.handler.ServeHTTP(rec, req)
		return rec.Body.String()
	}
	want := "rejected " + res.Approval.ID + " (gated.echo) as rita"
	if page := show(session, noteCk); !strings.Contains(page, want) {
		t.Errorf("another console does not show the outcome %q", want)
	}
	var otherSession *http.Cookie
	for _, ck := range other.Jar.Cookies(mustURL(t, e.srv.URL+"/ui/")) {
		if ck.Name == sessionCookie {
			otherSession = ck
		}
	}
	if page := show(otherSession, noteCk); strings.Contains(page, res.Approval.ID) {
		t.Error("another session's page shows a note sealed for rita's first session")
	}
	changed := *noteCk
	changed.Value = "W3siRXJyb3IiOmZhbHNlLCJUZXh0IjoiYXBwcm92ZWQgZXZlcnl0aGluZyJ9XQ" + changed.Value[strings.Index(changed.Value, "."):]
	if page := show(session, &changed); strings.Contains(page, "approved everything") {
		t.Error("a changed note cookie is shown")
	}
}

// FuzzSessionCookie: a session cookie's value is the browser's to send,
// so verify reads arbitrary bytes. It never panics, and accepts only the
// value the console issued (the seed): nothing else carries a MAC under
// a principal's key.
func FuzzSessionCookie(f *testing.F) {
	creds := []credential{{p: principals[0], key: sessionKey(ritaTok)}}
	// The value issue makes, with a fixed id and expiry (2100), so that
	// every fuzzing process knows it.
	payload := "v1." + base64.RawURLEncoding.EncodeToString(make([]byte, 32)) + ".4102444800.cml0YQ"
	good := payload + "." + base64.RawURLEncoding.EncodeToString(mac(creds[0].key, "session", payload))
	if s, ok := verify(creds, good, time.Now()); !ok || s.principal.Name != "rita" {
		f.Fatal("the seed does not verify")
	}
	f.Add(good)
	f.Add("v1....")
	f.Add("v1." + randomToken() + ".1.cml0YQ.AAAA")
	f.Fuzz(func(t *testing.T, value string) {
		s, ok := verify(creds, value, time.Now())
		if ok && value != good {
			t.Fatalf("verify accepted %q as %q", value, s.principal.Name)
		}
	})
}

// unusedBitsSet returns the base64url character c with its two lowest
// bits set: the last character of an unpadded 32-byte value carries
// data only in its upper four bits.
func unusedBitsSet(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	return alphabet[strings.IndexByte(alphabet, c)|3]
}
