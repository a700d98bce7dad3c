package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/server/httpapi"
)

// TestDoorsThroughServe runs connhost serve (a real process) behind a
// TLS-terminating proxy (behind_tls_proxy = true, loopback listen) with a
// reviewer whose token is 11 characters, and tries the side doors from
// the outside: what the console's cookies and every answer say to a
// browser, a relay that passes the server proof on to the real server,
// and a source that guesses tokens.
func TestDoorsThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs serve")
	}
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	cfg := writeFile(t, tmp, "connhost.toml", `
[server]
token_env = "T_RUNTIME"
behind_tls_proxy = true

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"

[[principals]]
name = "shorty"
roles = ["operator"]
token_env = "T_SHORT"
`)
	const runtime, rita, short = "tok-runtime-0123456789abcdef0123456789", "tok-rita-0123456789abcdef0123456789", "tok-shorty"
	global := []string{"--data", d.data, "--manifests", mdir, "--modules", d.modules}
	srv := startServer(t, bin, cliEnv("T_RUNTIME="+runtime, "T_RITA="+rita, "T_SHORT="+short), "serving the HTTP API",
		append([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, global...)...)
	si, err := readServerInfo(d.data)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a short token is named at start", func(t *testing.T) {
		// Before: taken silently.
		startup := strings.Join(srv.startup, "\n")
		if !strings.Contains(startup, "short bearer tokens") || !strings.Contains(startup, "shorty (10 characters)") ||
			strings.Contains(startup, "rita (") || strings.Contains(startup, short) {
			t.Errorf("the startup log does not name the short token's principal (and only it):\n%s", startup)
		}
	})

	t.Run("Secure cookies and HSTS behind the proxy", func(t *testing.T) {
		// Before: the sign-in cookie lacked Secure (serve saw plain http
		// from the proxy) and no answer carried HSTS.
		resp, err := http.Get(si.URL + "/ui/signin")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Header.Values("Set-Cookie")
		if len(cookies) == 0 {
			t.Fatal("the sign-in form set no cookie")
		}
		for _, c := range cookies {
			if !strings.Contains(c, "; Secure") {
				t.Errorf("cookie without Secure: %s", c)
			}
		}
		for _, path := range []string{"/ui/signin", "/healthz", "/v1/executions"} {
			resp, err := http.Get(si.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Strict-Transport-Security"); got != httpapi.HSTS {
				t.Errorf("%s: Strict-Transport-Security %q, want %q", path, got, httpapi.HSTS)
			}
		}
	})

	t.Run("a relay does not get the token", func(t *testing.T) {
		// Before: the relay passed POST /v1/auth/proof on, the real
		// server's proof verified, and the CLI sent the relay rita's
		// token.
		real, _ := url.Parse(si.URL)
		var mu sync.Mutex
		var seen, auth []string
		relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.Path)
			if h := r.Header.Get("Authorization"); h != "" {
				auth = append(auth, h)
			}
			mu.Unlock()
			httputil.NewSingleHostReverseProxy(real).ServeHTTP(w, r)
		}))
		defer relay.Close()
		code, out, errOut := runBin(t, bin, cliEnv(DefaultTokenEnv+"="+rita), append([]string{"ls", "--server", relay.URL}, global...)...)
		mu.Lock()
		defer mu.Unlock()
		t.Logf("the relay saw %v", seen)
		if len(auth) > 0 || strings.Contains(out+errOut, rita) {
			t.Errorf("the relay was sent %d Authorization header(s)", len(auth))
		}
		if code == cli.ExitOK || !strings.Contains(errOut, "relayed the request") || !strings.Contains(errOut, si.URL) {
			t.Errorf("ls through the relay: exit %d, want a refusal naming the real server's URL:\n%s%s", code, out, errOut)
		}
		for _, server := range []string{si.URL, strings.Replace(si.URL, "127.0.0.1", "localhost", 1)} {
			if code, out, errOut := runBin(t, bin, cliEnv(DefaultTokenEnv+"="+rita), append([]string{"ls", "--server", server}, global...)...); code != cli.ExitOK {
				t.Errorf("ls --server %s: exit %d\n%s%s", server, code, out, errOut)
			}
		}
	})

	t.Run("guessing is throttled", func(t *testing.T) {
		// Before: every guess was looked at, each with a WARN line.
		guess := func(token string) int {
			req, _ := http.NewRequest("GET", si.URL+"/v1/executions", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("X-Forwarded-For", "198.51.100.7") // as the proxy names the guesser
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		var got []int
		for i := 0; i < 50; i++ {
			got = append(got, guess("tok-"+strings.Repeat("g", i%5)))
		}
		if got[httpapi.AuthFailureBurst-1] != http.StatusUnauthorized || got[httpapi.AuthFailureBurst] != http.StatusTooManyRequests ||
			got[len(got)-1] != http.StatusTooManyRequests {
			t.Errorf("50 guesses answered %v, want %d 401s, then 429s", got, httpapi.AuthFailureBurst)
		}
		if guess(rita) != http.StatusTooManyRequests {
			t.Errorf("a right token from the guessing source was looked at")
		}
		if code, out, errOut := runBin(t, bin, cliEnv(DefaultTokenEnv+"="+rita), append([]string{"ls", "--server", si.URL}, global...)...); code != cli.ExitOK {
			t.Errorf("another source is slowed down too: exit %d\n%s%s", code, out, errOut)
		}
	})
	srv.stop(t)
	if n := strings.Count(srv.log.String(), "authentication throttled"); n != 1 {
		t.Errorf("%d throttle summary lines, want 1:\n%s", n, srv.log)
	}
}
