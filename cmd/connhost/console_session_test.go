package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/ledger"
)

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleBrowser drives a connhost process's console as a browser would,
// as principal rita; it follows no redirect.
type consoleBrowser struct {
	t     *testing.T
	token string
	hc    *http.Client
}

func newConsoleBrowser(t *testing.T, token string) *consoleBrowser {
	return &consoleBrowser{t: t, token: token, hc: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *consoleBrowser) do(method, u string, cookies []*http.Cookie, form url.Values) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(form.Encode()))
	if method == "POST" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// signedIn returns the CSRF token of the inbox the session cookie opens
// at base, "" when it is sent to sign in.
func (b *consoleBrowser) signedIn(base string, session *http.Cookie) string {
	b.t.Helper()
	resp, page := b.do("GET", base+"/ui/approvals", []*http.Cookie{session}, nil)
	if resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/ui/signin") {
		return ""
	}
	m := consoleCSRF.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<span id="principal">rita</span>`) || m == nil {
		b.t.Fatalf("GET /ui/approvals: %d\n%s", resp.StatusCode, page)
	}
	return html.UnescapeString(m[1])
}

// signIn signs in at base with the token form and returns the session
// cookie.
func (b *consoleBrowser) signIn(base string) *http.Cookie {
	b.t.Helper()
	resp, form := b.do("GET", base+"/ui/signin", nil, nil)
	m := consoleCSRF.FindStringSubmatch(form)
	if m == nil {
		b.t.Fatalf("sign-in form: %d\n%s", resp.StatusCode, form)
	}
	resp, body := b.do("POST", base+"/ui/signin", resp.Cookies(), url.Values{"csrf": {html.UnescapeString(m[1])}, "token": {b.token}})
	for _, c := range resp.Cookies() {
		if c.Name == "connhost_console" && c.Value != "" {
			return c
		}
	}
	b.t.Fatalf("sign-in: %d, no session cookie\n%s", resp.StatusCode, body)
	return nil
}

// post sends form, with the session's CSRF token, to path at base, and
// returns the status.
func (b *consoleBrowser) post(base, path string, session *http.Cookie, form url.Values) int {
	b.t.Helper()
	csrf := b.signedIn(base, session)
	if csrf == "" {
		b.t.Fatalf("POST %s: the session is signed out", path)
	}
	form.Set("csrf", csrf)
	resp, _ := b.do("POST", base+path, []*http.Cookie{session}, form)
	return resp.StatusCode
}

const consoleRitaConfig = `
[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"
`

// TestConsoleSessionSurvivesRestart: a reviewer signed in to `connhost
// serve` stays signed in when the process restarts (the same cookie opens
// the console of the new process, which reads the session from the
// ledger); after a sign-out the cookie opens nothing, in that process and
// after a restart; and a restart with the principal's token rotated ends
// every session it had.
func TestConsoleSessionSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it four times")
	}
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	const ritaTok = "tok-rita-0123456789abcdef"
	cfg := writeFile(t, tmp, "connhost.toml", consoleRitaConfig)
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
	b := newConsoleBrowser(t, ritaTok)

	srv, base := serve(ritaTok)
	session, kept := b.signIn(base), b.signIn(base)
	srv.stop(t)
	srv, base = serve(ritaTok)
	if b.signedIn(base, session) == "" {
		t.Fatal("after a restart the reviewer's cookie no longer opens the console")
	}
	if code := b.post(base, "/ui/signout", session, url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", code)
	}
	if b.signedIn(base, session) != "" {
		t.Error("the signed-out cookie still opens the console")
	}
	srv.stop(t)
	srv, base = serve(ritaTok)
	if b.signedIn(base, session) != "" {
		t.Error("after a restart the signed-out cookie opens the console again")
	}
	if b.signedIn(base, kept) == "" {
		t.Error("the sign-out of one session ended rita's other session")
	}
	srv.stop(t)
	srv, base = serve("tok-rita-rotated-0123456789abcdef")
	if b.signedIn(base, kept) != "" {
		t.Error("after rita's token was rotated her old session still opens the console")
	}
	srv.stop(t)
}

// TestConsoleSignOutAcrossFleet: two `connhost serve` nodes on one
// PostgreSQL ledger. A session signed in on one node opens the other's
// console; signed out on one node, it is signed out on the other; and
// "Sign out everywhere" on one node ends rita's sessions signed in on
// either. A live row for rita inserted with the database's password
// alone opens nothing with a cookie whose MAC is not under rita's token
// (and, to show the row is all the cookie lacks otherwise, opens the
// console with one that is).
func TestConsoleSignOutAcrossFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs two nodes on PostgreSQL")
	}
	dsn := testenv.NewPostgresDatabase(t)
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	const ritaTok = "tok-rita-0123456789abcdef"
	cfg := writeFile(t, tmp, "connhost.toml", consoleRitaConfig)
	var nodes []string
	for _, node := range []string{"n1", "n2"} {
		data := filepath.Join(tmp, node)
		startServer(t, bin, cliEnv("T_RITA="+ritaTok), "serving the HTTP API",
			"--json", "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--ledger", dsn, "--node", node,
			"--data", data, "--manifests", mdir, "--modules", d.modules)
		si, err := readServerInfo(data)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, si.URL)
	}
	b := newConsoleBrowser(t, ritaTok)
	n1, n2 := nodes[0], nodes[1]

	one, other := b.signIn(n1), b.signIn(n1)
	if b.signedIn(n2, one) == "" {
		t.Fatal("a session signed in on n1 does not open n2's console")
	}
	if code := b.post(n2, "/ui/signout", one, url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("sign-out on n2: %d", code)
	}
	for i, base := range nodes {
		if b.signedIn(base, one) != "" {
			t.Errorf("signed out on n2, the cookie still opens n%d's console", i+1)
		}
		if b.signedIn(base, other) == "" {
			t.Errorf("the sign-out of one session ended rita's other session on n%d", i+1)
		}
	}

	third := b.signIn(n2)
	if code := b.post(n1, "/ui/signout/everywhere", other, url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("sign out everywhere on n1: %d", code)
	}
	for i, base := range nodes {
		for name, s := range map[string]*http.Cookie{"signed in on n1": other, "signed in on n2": third} {
			if b.signedIn(base, s) != "" {
				t.Errorf("after signing out everywhere on n1, rita's session %s still opens n%d's console", name, i+1)
			}
		}
	}

	// Whoever holds the database's password, not rita's token, inserts a
	// live row for a session id of their choosing.
	idb := make([]byte, 32)
	_, _ = rand.Read(idb)
	id := base64.RawURLEncoding.EncodeToString(idb)
	now, exp := time.Now(), time.Now().Add(time.Hour)
	key := ledger.ConsoleSessionKey(id)
	var inserted int
	if err := testenv.QueryDSN(context.Background(), dsn, fmt.Sprintf(`INSERT INTO connhost_console_sessions (key, principal, created_ns, expires_ns)
VALUES (decode('%x', 'hex'), 'rita', %d, %d) RETURNING 1`, key[:], now.UnixNano(), exp.UnixNano()), &inserted); err != nil {
		t.Fatal(err)
	}
	// The cookie's format (server/console/session.go), MAC'd under the
	// key derived from token.
	cookie := func(token string) *http.Cookie {
		payload := fmt.Sprintf("v1.%s.%d.%s", id, exp.Unix(), base64.RawURLEncoding.EncodeToString([]byte("rita")))
		k := hmac.New(sha256.New, []byte(token))
		k.Write([]byte("connhost console session key v1"))
		m := hmac.New(sha256.New, k.Sum(nil))
		m.Write([]byte("session\x00" + payload))
		return &http.Cookie{Name: "connhost_console", Value: payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
	}
	for i, base := range nodes {
		if b.signedIn(base, cookie("a-guessed-token-0123456789")) != "" {
			t.Errorf("a row inserted into the database with a cookie under a guessed key opens n%d's console", i+1)
		}
	}
	if b.signedIn(n1, cookie(ritaTok)) == "" {
		t.Error("the inserted row with a cookie under rita's key does not open the console: the check above proves nothing")
	}
}
