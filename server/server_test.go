package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestFaviconIsNoWarning: a browser showing the console asks for
// /favicon.ico without a token; on a server with credentials that was a
// 401 and a WARN line per page (37 of 42 WARN lines of one session).
// It is answered 204 and logged as any request.
func TestFaviconIsNoWarning(t *testing.T) {
	cfg := testConfig(t, newTestDirs(t), `
[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"
`, map[string]string{"T_RITA": "tok-rita-0123456789abcdef0123456789"})
	url, log := serve(t, cfg, Options{})
	for _, path := range []string{"/favicon.ico", "/ui/"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[string]int{"/favicon.ico": http.StatusNoContent, "/ui/": http.StatusOK}[path]; resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if strings.Contains(log.String(), "level=WARN msg=\"http request\"") {
		t.Errorf("a request logged at WARN:\n%s", log)
	}
}
