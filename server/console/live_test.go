package console

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/connhost/connhost/host"
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

var cardsRE = regexp.MustCompile(`data-cards="([^"]+)"`)

// TestNewCards: the first page of the inbox names where its script reads
// the cards of calls that begin to wait while it is open, with the page's
// filter; a later page names none (its calls follow the pages before it).
// The answer holds the cards of the calls that began to wait after the
// page was read and that the filter keeps, in the principal's namespaces,
// rendered as the page renders them: with decision forms and the
// session's CSRF token for an approver, without them for a runtime.
func TestNewCards(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	old := e.gatedCall(t, "", "old", `{"amount":1,"currency":"usd"}`)
	rita, agent, acme := e.browser(t), e.browser(t), e.browser(t)
	csrf := e.signIn(t, rita, ritaTok)
	e.signIn(t, agent, runTok)
	e.signIn(t, acme, acmeTok)
	cardsOf := func(c *http.Client, page string) string {
		t.Helper()
		_, body, _ := e.get(t, c, page)
		m := cardsRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s names no cards to read:\n%s", page, body)
		}
		return html.UnescapeString(m[1])
	}
	all, filtered, agentAll, acmeAll := cardsOf(rita, "/ui/approvals"), cardsOf(rita, "/ui/approvals?session=team"), cardsOf(agent, "/ui/approvals"), cardsOf(acme, "/ui/approvals")
	if !strings.Contains(filtered, "session=team") {
		t.Errorf("the filtered page's cards URL %q lacks its filter", filtered)
	}
	if _, body, _ := e.get(t, rita, "/ui/approvals?after=x"); cardsRE.MatchString(body) {
		t.Errorf("a later page names cards to read: its new calls would be out of order")
	}
	fresh := e.gatedCall(t, "", "n1", `{"amount":2,"currency":"usd"}`)
	team, err := e.ex.Execute(context.Background(), host.ToolCall{SessionID: "team-7", ToolCallID: "n2", Tool: "gated.echo", Arguments: json.RawMessage(`{"amount":3,"currency":"usd"}`)})
	if err != nil || team.Approval == nil {
		t.Fatalf("team call: %+v %v", team, err)
	}
	ids := func(c *http.Client, path string) (int, []string, string) {
		t.Helper()
		code, body, hdr := e.get(t, c, path)
		if code == http.StatusOK && !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: Content-Type %q", path, hdr.Get("Content-Type"))
		}
		var got []string
		for _, m := range cardRE.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		return code, got, body
	}
	for _, tc := range []struct {
		name string
		c    *http.Client
		path string
		want []string
	}{
		{"every new call, newest first", rita, all, []string{team.Approval.ID, fresh.Approval.ID}},
		{"the filter's new call", rita, filtered, []string{team.Approval.ID}},
		{"a runtime's", agent, agentAll, []string{team.Approval.ID, fresh.Approval.ID}},
		{"another namespace's principal", acme, acmeAll, nil},
	} {
		code, got, _ := ids(tc.c, tc.path)
		if code != http.StatusOK || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: %d %v, want %v (not %s, which waited before the page)", tc.name, code, got, tc.want, old.Approval.ID)
		}
	}
	_, _, body := ids(rita, all)
	if !strings.Contains(body, `action="/ui/approvals/`+fresh.Approval.ID+`/approve"`) || !strings.Contains(body, `value="`+csrf+`"`) || !strings.Contains(body, `id="bulk"`) {
		t.Errorf("the approver's new card lacks its approve form, the session's CSRF token or the bulk form:\n%s", body)
	}
	if _, _, body := ids(agent, agentAll); strings.Contains(body, `/approve"`) || strings.Contains(body, `/reject"`) {
		t.Errorf("the runtime's new cards hold decision forms:\n%s", body)
	}
	if code, _, _ := ids(e.browser(t), all); code != http.StatusUnauthorized {
		t.Errorf("cards without a session: %d, want 401", code)
	}
	if code, _, _ := ids(rita, "/ui/approvals/new/cards?since=soon"); code != http.StatusBadRequest {
		t.Errorf("cards with a bad since: %d, want 400", code)
	}
}

// TestServerTiming: a console page says what it cost the server in a
// Server-Timing header, which the browser test reads to report the first
// page's time with 10,000 waiting calls.
func TestServerTiming(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	c := e.browser(t)
	e.signIn(t, c, ritaTok)
	for _, page := range []string{"/ui/approvals", "/ui/recovery", "/ui/executions", "/ui/connectors"} {
		_, _, hdr := e.get(t, c, page)
		if st := hdr.Get("Server-Timing"); !regexp.MustCompile(`^page;dur=\d+\.\d;desc="\w+"$`).MatchString(st) {
			t.Errorf("%s: Server-Timing %q", page, st)
		}
	}
}
