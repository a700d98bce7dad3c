package main

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestConsoleSessionSurvivesRestart: a reviewer signed in to `connhost
// serve` stays signed in when the process restarts (the same cookie opens
// the console of the new process); after a sign-out the cookie opens
// nothing, in that process and after a restart; and a restart with the
// principal's token rotated ends every session it had.
func TestConsoleSessionSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it three times")
	}
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	const ritaTok = "tok-rita-0123456789abcdef"
	cfg := writeFile(t, tmp, "connhost.toml", `
[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"
`)
	serve := func(token string) (*serverProcess, string) {
		t.Helper()
		srv := startServer(t, bin, cliEnv("T_RITA="+token), "serving the HTTP API",
			"--json", "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--data", d.data, "--manifests", mdir, "--modules", d.modules)
		si, err := readServerInfo(d.data)
		if err != nil {
			t.Fatal(err)
		}
		return srv, si.URL
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, u string, cookies []*http.Cookie, form url.Values) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, u, strings.NewReader(form.Encode()))
		if method == "POST" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// signedIn returns the CSRF token of the inbox the cookie opens, ""
	// when it is sent to sign in.
	signedIn := func(base string, session *http.Cookie) string {
		t.Helper()
		resp, page := do("GET", base+"/ui/approvals", []*http.Cookie{session}, nil)
		if resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/ui/signin") {
			return ""
		}
		m := consoleCSRF.FindStringSubmatch(page)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<span id="principal">rita</span>`) || m == nil {
			t.Fatalf("GET /ui/approvals: %d\n%s", resp.StatusCode, page)
		}
		return html.UnescapeString(m[1])
	}
	signIn := func(base string) *http.Cookie {
		t.Helper()
		resp, form := do("GET", base+"/ui/signin", nil, nil)
		m := consoleCSRF.FindStringSubmatch(form)
		if m == nil {
			t.Fatalf("sign-in form: %d\n%s", resp.StatusCode, form)
		}
		resp, body := do("POST", base+"/ui/signin", resp.Cookies(), url.Values{"csrf": {html.UnescapeString(m[1])}, "token": {ritaTok}})
		for _, c := range resp.Cookies() {
			if c.Name == "connhost_console" && c.Value != "" {
				return c
			}
		}
		t.Fatalf("sign-in: %d, no session cookie\n%s", resp.StatusCode, body)
		return nil
	}

	srv, base := serve(ritaTok)
	session, kept := signIn(base), signIn(base)
	srv.stop(t)
	srv, base = serve(ritaTok)
	csrf := signedIn(base, session)
	if csrf == "" {
		t.Fatal("after a restart the reviewer's cookie no longer opens the console")
	}
	if resp, _ := do("POST", base+"/ui/signout", []*http.Cookie{session}, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if signedIn(base, session) != "" {
		t.Error("the signed-out cookie still opens the console")
	}
	srv.stop(t)
	srv, base = serve(ritaTok)
	if signedIn(base, session) != "" {
		t.Error("after a restart the signed-out cookie opens the console again")
	}
	if signedIn(base, kept) == "" {
		t.Error("the sign-out of one session ended rita's other session")
	}
	srv.stop(t)
	srv, base = serve("tok-rita-rotated-0123456789abcdef")
	if signedIn(base, kept) != "" {
		t.Error("after rita's token was rotated her old session still opens the console")
	}
	srv.stop(t)
}
