package console

import (
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var pollRE = regexp.MustCompile(`data-poll="([^"]+)"`)

// TestNewCallsPoll: the inbox page names what its script polls; the
// answer counts the calls that began to wait after the page was read,
// within the principal's namespaces only, and nothing without a session.
// The script is served from the console itself, which the CSP allows.
func TestNewCallsPoll(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	e.gatedCall(t, "acme", "old", `{"amount":1,"currency":"usd"}`)
	c, acme := e.browser(t), e.browser(t)
	e.signIn(t, c, ritaTok)
	e.signIn(t, acme, acmeTok)
	poll := func(cl *http.Client) string {
		t.Helper()
		_, page, _ := e.get(t, cl, "/ui/approvals")
		m := pollRE.FindStringSubmatch(page)
		if m == nil || !strings.Contains(page, `<script src="/ui/static/live.js" defer></script>`) {
			t.Fatalf("the inbox names nothing to poll, or loads no script:\n%s", page)
		}
		return html.UnescapeString(m[1])
	}
	read := func(cl *http.Client, path string) (int, map[string]any) {
		t.Helper()
		code, body, hdr := e.get(t, cl, path)
		var out map[string]any
		if err := json.Unmarshal([]byte(body), &out); err != nil || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %q %v", path, code, body, err)
		}
		return code, out
	}
	ritaPoll := poll(c)
	acmePoll := poll(acme)
	if _, out := read(c, ritaPoll); out["new"] != 0.0 || out["total"] != 1.0 {
		t.Errorf("before any new call: %v, want 0 new of 1", out)
	}
	e.gatedCall(t, "", "n1", `{"amount":2,"currency":"usd"}`)
	e.gatedCall(t, "globex", "n2", `{"amount":3,"currency":"usd"}`)
	if _, out := read(c, ritaPoll); out["new"] != 2.0 || out["total"] != 3.0 {
		t.Errorf("after two new calls: %v, want 2 new of 3", out)
	}
	if _, out := read(acme, acmePoll); out["new"] != 0.0 || out["total"] != 1.0 {
		t.Errorf("acme's poll after other namespaces' calls: %v, want 0 new of 1", out)
	}
	if code, _ := read(e.browser(t), ritaPoll); code != http.StatusUnauthorized {
		t.Errorf("a poll without a session: %d, want 401", code)
	}
	if code, _ := read(c, "/ui/approvals/new?since=soon"); code != http.StatusBadRequest {
		t.Errorf("a poll with a bad since: %d, want 400", code)
	}
	code, js, hdr := e.get(t, c, "/ui/static/live.js")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/javascript") || !strings.Contains(js, "new calls wait") {
		t.Errorf("live.js: %d %s", code, hdr.Get("Content-Type"))
	}
}
