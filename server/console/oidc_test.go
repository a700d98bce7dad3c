package console

import (
	"context"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/server/httpapi"
)

// opUsers are the people of the OpenID provider: rita and olga are mapped
// to the principals of that name, mallory to none.
var opUsers = []testenv.OPUser{
	{ID: "sub-rita", Username: "rita@op.test", Password: "pw-rita-0123"},
	{ID: "sub-olga", Username: "olga@op.test", Password: "pw-olga-0123"},
	{ID: "sub-mallory", Username: "mallory@op.test", Password: "pw-mallory-0123"},
}

// TestOIDCSignIn signs browsers in through a real OpenID provider (the
// zitadel/oidc example OP, built from its pinned module): the
// authorization code flow with PKCE against its login form. It proves
// that the identity it vouches for signs in as the principal whose
// oidc_subject it is, with that principal's roles (an approver's
// approval is recorded under its name; an operator gets no approve
// button), that an identity mapped to no principal is refused, and that
// an answer of the provider that belongs to another sign-in (a forged
// or replayed state) signs nobody in.
func TestOIDCSignIn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	op := testenv.StartZitadelOP(t, opUsers, base+"/ui/oidc/callback")
	e := newEnvOn(t, ln, principals, nil, false, func(co *Options, _ *httpapi.Options) {
		co.OIDC = &OIDC{Issuer: op.Issuer, Name: "Example SSO", ClientID: op.ClientID, ClientSecret: op.ClientSecret,
			RedirectURL: base + "/ui/oidc/callback", Subjects: map[string]string{"sub-rita": "rita", "sub-olga": "olga"}}
	})
	res := e.gatedCall(t, "", "c1", `{"note":"rent","amount":500,"currency":"usd"}`)

	t.Run("approver", func(t *testing.T) {
		c := following(t)
		code, page, callback := oidcSignIn(t, e, c, opUsers[0], nil)
		if code != http.StatusOK || !strings.Contains(page, `id="signedin"`) || !strings.Contains(page, "<b>rita</b>") ||
			!strings.Contains(page, `content="0; url=/ui/approvals"`) {
			t.Fatalf("sign-in as rita: %d\n%s", code, page)
		}
		_, page, _ = e.get(t, c, "/ui/approvals")
		if !strings.Contains(page, `<span id="principal">rita</span>`) || !strings.Contains(page, "/ui/approvals/"+res.Approval.ID+"/approve") {
			t.Fatalf("rita's inbox has no approve button for %s:\n%s", res.Approval.ID, page)
		}
		code, _, _ = e.post(t, c, "/ui/approvals/"+res.Approval.ID+"/approve",
			url.Values{"csrf": {csrfOf(t, page)}, "digest": {res.Approval.ArgsDigest}, "reason": {"signed in with SSO"}}, nil)
		if code != http.StatusOK && code != http.StatusSeeOther {
			t.Fatalf("approve: %d", code)
		}
		if v, err := e.ex.ApprovalView(context.Background(), res.Approval.ID); err != nil || v.By != "rita" || v.Decision != "approved" {
			t.Fatalf("the approval: %+v %v, want approved by rita", v, err)
		}
		// The session is the token sign-in's cookie: another token for
		// rita (a rotation) no longer opens it.
		var cookie string
		u, _ := url.Parse(base + "/ui/")
		for _, ck := range c.Jar.Cookies(u) {
			if ck.Name == sessionCookie {
				cookie = ck.Value
			}
		}
		if _, ok := verify(e.ui.creds, cookie, time.Now()); !ok {
			t.Fatalf("the session cookie %q does not verify", cookie)
		}
		rotated := credential{p: principals[0], key: sessionKey("tok-rita-rotated-0123456789")}
		if _, ok := verify([]credential{rotated}, cookie, time.Now()); ok {
			t.Error("the session survives a rotation of rita's token")
		}
		// The provider's answer again (a replay, from this browser's
		// history or a copied URL) signs nobody in: the state was used.
		fresh := following(t)
		code, page = getPage(t, fresh, callback)
		if code != http.StatusForbidden || !strings.Contains(page, "belongs to no sign-in this browser started") {
			t.Errorf("replayed callback: %d\n%s", code, page)
		}
		if code, _, _ := e.get(t, noRedirect(fresh), "/ui/approvals"); code != http.StatusSeeOther {
			t.Errorf("the replayed callback signed a browser in: %d", code)
		}
	})

	t.Run("operator", func(t *testing.T) {
		c := following(t)
		if code, page, _ := oidcSignIn(t, e, c, opUsers[1], nil); code != http.StatusOK || !strings.Contains(page, "<b>olga</b>") {
			t.Fatalf("sign-in as olga: %d\n%s", code, page)
		}
		other := e.gatedCall(t, "", "c2", `{"note":"fee","amount":700,"currency":"usd"}`)
		_, page, _ := e.get(t, c, "/ui/approvals")
		if !strings.Contains(page, `<span id="principal">olga</span>`) || !strings.Contains(page, other.Approval.ID) {
			t.Fatalf("olga's inbox:\n%s", page)
		}
		if strings.Contains(page, "/approve\"") || !strings.Contains(page, `id="no-approve"`) {
			t.Errorf("an operator's inbox offers approve buttons, or does not say why not:\n%s", page)
		}
	})

	t.Run("unmapped identity", func(t *testing.T) {
		c := following(t)
		code, page, _ := oidcSignIn(t, e, c, opUsers[2], nil)
		if code != http.StatusForbidden || !strings.Contains(page, html.EscapeString(`subject "sub-mallory", which is no principal of this server`)) ||
			!strings.Contains(page, html.EscapeString(`oidc_subject = "sub-mallory"`)) {
			t.Fatalf("unmapped identity: %d\n%s", code, page)
		}
		if code, _, hdr := e.get(t, noRedirect(c), "/ui/approvals"); code != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/ui/signin") {
			t.Errorf("an unmapped identity reached the inbox: %d", code)
		}
	})

	t.Run("forged state", func(t *testing.T) {
		// Another site signs rita in at the provider, stops before the
		// console, and sends the victim's browser (which started a
		// sign-in of its own) to the console with rita's answer: the
		// victim would act as rita unknowingly. Refused.
		attacker := following(t)
		var stolen string
		oidcSignIn(t, e, attacker, opUsers[0], func(u *url.URL) bool {
			if strings.HasPrefix(u.String(), base+"/ui/oidc/callback") {
				stolen = u.String()
				return true
			}
			return false
		})
		if stolen == "" {
			t.Fatal("the provider never redirected to the console")
		}
		victim := following(t)
		startFlow(t, e, victim) // the victim's own sign-in, at the provider's login form
		code, page := getPage(t, victim, stolen)
		if code != http.StatusForbidden || !strings.Contains(page, "its state does not match") {
			t.Fatalf("a callback with another sign-in's state: %d\n%s", code, page)
		}
		if code, _, _ := e.get(t, noRedirect(victim), "/ui/approvals"); code != http.StatusSeeOther {
			t.Errorf("a forged state signed the victim in: %d", code)
		}
		// A made-up state and code, with no sign-in begun, likewise.
		code, page = getPage(t, following(t), base+"/ui/oidc/callback?state=made-up&code=made-up")
		if code != http.StatusForbidden || !strings.Contains(page, "its state does not match") {
			t.Errorf("a made-up callback: %d\n%s", code, page)
		}
	})
}

// following is a browser that follows redirects, across the console and
// the provider.
func following(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

// noRedirect is c without following redirects.
func noRedirect(c *http.Client) *http.Client {
	return &http.Client{Jar: c.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func getPage(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var (
	oidcLinkRE = regexp.MustCompile(`id="signin-oidc" href="([^"]+)"`)
	opIDRE     = regexp.MustCompile(`name="id" value="([^"]+)"`)
)

// startFlow follows the sign-in page's "Sign in with" link to the
// provider's login form, and returns the form's URL and its auth request
// id.
func startFlow(t *testing.T, e *env, c *http.Client) (*url.URL, string) {
	t.Helper()
	_, page := getPage(t, c, e.srv.URL+"/ui/signin?next=/ui/approvals")
	m := oidcLinkRE.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, "Sign in with Example SSO") || !strings.Contains(page, `id="token"`) {
		t.Fatalf("the sign-in page offers no OIDC sign-in beside the token form:\n%s", page)
	}
	resp, err := c.Get(e.srv.URL + html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	id := opIDRE.FindStringSubmatch(string(b))
	if resp.StatusCode != http.StatusOK || id == nil {
		t.Fatalf("the provider's login form: %d %s\n%s", resp.StatusCode, resp.Request.URL, b)
	}
	return resp.Request.URL, html.UnescapeString(id[1])
}

// oidcSignIn signs c in as u at the provider's login form and returns
// the page the browser lands on and the console callback URL it came
// through. With stop, the browser stops before a URL stop accepts.
func oidcSignIn(t *testing.T, e *env, c *http.Client, u testenv.OPUser, stop func(*url.URL) bool) (int, string, string) {
	t.Helper()
	form, id := startFlow(t, e, c)
	var callback string
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), e.srv.URL+"/ui/oidc/callback") {
			callback = req.URL.String()
		}
		if stop != nil && stop(req.URL) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	defer func() { c.CheckRedirect = nil }()
	login := form.ResolveReference(&url.URL{Path: "/login/username"})
	resp, err := c.PostForm(login.String(), url.Values{"id": {id}, "username": {u.Username}, "password": {u.Password}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if stop == nil && callback == "" {
		t.Fatalf("the provider did not send the browser back to the console: %d %s\n%s", resp.StatusCode, resp.Request.URL, b)
	}
	return resp.StatusCode, string(b), callback
}
