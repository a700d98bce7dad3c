package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/connhost/connhost/devkit/testing/testenv"
)

// TestOIDCSignInInBrowser signs a reviewer in to the console of a real
// `connhost serve`, configured by connhost.toml's [oidc] table and the
// principal's oidc_subject, through a real OpenID provider (zitadel/oidc's
// example OP) in headless Chromium: from the console's "Sign in with"
// button to the provider's login form and back, the browser lands on the
// inbox signed in as the principal the provider's subject names. A real
// browser is what keeps SameSite honest: the provider's redirect back is
// a cross-site navigation, which must still carry the sign-in's state
// cookie, and the session cookie it sets must be sent on the next page.
func TestOIDCSignInInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost, runs it, an OpenID provider and a browser")
	}
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)

	// The provider must know the console's callback before either runs.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	base := "http://" + listen
	op := testenv.StartZitadelOP(t, []testenv.OPUser{{ID: "sub-rita", Username: "rita@op.test", Password: "pw-rita-0123"}}, base+"/ui/oidc/callback")

	d := testDirs(t)
	const ritaTok = "tok-rita-0123456789abcdef"
	cfg := writeFile(t, tmp, "connhost.toml", fmt.Sprintf(`
[server]
public_url = %q

[oidc]
issuer = %q
client_id = %q
client_secret_env = "T_OIDC_SECRET"
name = "Example SSO"

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"
oidc_subject = "sub-rita"
`, base, op.Issuer, op.ClientID))
	srv := startServer(t, bin, cliEnv("T_RITA="+ritaTok, "T_OIDC_SECRET="+op.ClientSecret), "serving the HTTP API",
		"--json", "serve", "--config", cfg, "--listen", listen, "--data", d.data, "--manifests", pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm")), "--modules", d.modules)

	br := newBrowser(t, browserOptions{ServerLog: func() string { return srv.log.String() }})
	run := br.run
	run("the sign-in page offers the provider",
		chromedp.Navigate(base+"/ui/approvals"),
		chromedp.WaitVisible(chromedp.ID("signin-oidc")))
	if s := br.text("#signin-oidc"); s != "Sign in with Example SSO" {
		t.Errorf("the button says %q", s)
	}
	run("the provider's login form",
		chromedp.Click(chromedp.ID("signin-oidc")),
		chromedp.WaitVisible(chromedp.ID("username")))
	run("sign in at the provider",
		chromedp.SendKeys(chromedp.ID("username"), "rita@op.test"),
		chromedp.SendKeys(chromedp.ID("password"), "pw-rita-0123"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("principal")))
	who, at := br.text("#principal"), br.eval(`location.href`)
	if who != "rita" || at != base+"/ui/approvals" {
		t.Fatalf("after the provider's sign-in: principal %q at %s, want rita at %s/ui/approvals", who, at, base)
	}
	if !strings.Contains(srv.log.String(), "signed in with OIDC") {
		t.Logf("server log:\n%s", srv.log)
	}
}
