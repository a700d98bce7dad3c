package console

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/server/httpapi"
)

// TestSessionCookie: a session is its signed cookie, so another console
// with the same principals (a restart, another node) accepts it, and
// nothing else does: a cookie naming another principal, a changed one,
// an expired one, one whose principal's token was rotated, and, read
// from the sign-out file by a console started after the sign-out, one
// that was signed out. Another session of the same principal lives on.
func TestSessionCookie(t *testing.T) {
	signouts := filepath.Join(t.TempDir(), "console-signouts")
	var opts Options
	e := newEnvWith(t, principals, nil, false, func(co *Options, _ *httpapi.Options) {
		co.SignOutFile = signouts
		opts = *co
	})
	c, other := e.browser(t), e.browser(t)
	csrf := e.signIn(t, c, ritaTok)
	e.signIn(t, other, ritaTok)
	cookie := func(cl *http.Client) string {
		for _, ck := range cl.Jar.Cookies(mustURL(t, e.srv.URL+"/ui/")) {
			if ck.Name == sessionCookie {
				return ck.Value
			}
		}
		t.Fatal("no session cookie")
		return ""
	}
	value, otherValue := cookie(c), cookie(other)
	// who returns the principal a console started with o names for the
	// cookie, "" when it sends the browser to sign in.
	who := func(o Options, value string) string {
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
	if p := who(opts, value); p != "rita" {
		t.Fatalf("another console with the same principals: %q, want rita's session", p)
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
		{"with a flipped MAC", opts, value[:len(value)-1] + map[bool]string{true: "A", false: "B"}[value[len(value)-1] != 'A']},
		{"a random id", opts, randomToken()},
		{"expired", later, value},
		{"of a rotated token", rotated, value},
	} {
		if p := who(tc.o, tc.value); p != "" {
			t.Errorf("a cookie %s opened the console as %q", tc.name, p)
		}
	}

	if code, _, _ := e.post(t, c, "/ui/signout", url.Values{"csrf": {csrf}}, nil); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", code)
	}
	// A torn line from a crash mid-append is skipped.
	f, err := os.OpenFile(signouts, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("torn")
	f.Close()
	if p := who(opts, value); p != "" {
		t.Errorf("after the sign-out a console started anew accepts the cookie as %q", p)
	}
	if p := who(opts, otherValue); p != "rita" {
		t.Errorf("rita's other session after one sign-out: %q, want rita", p)
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
