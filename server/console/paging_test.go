package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/connhost/connhost/host"
)

var (
	recoveryCardRE = regexp.MustCompile(`<section class="card uncertain" id="(ex_[a-z0-9]+)"`)
	recoveryNextRE = regexp.MustCompile(`href="([^"]+)" id="recovery-next"`)
)

// TestFindAndPage: 307 waiting calls (the count that made one page of
// 725 KB) of two tools over three kinds of session. The inbox shows 50
// cards a page, each page a bounded size, under the count of all 307; a
// tool filter and a session substring page through exactly the calls
// they match; the search box takes an approval id or an execution id
// straight to the call, and says so when neither names one; Executions'
// session search matches a part of the id (team finds team-crash); the
// recovery queue pages too.
func TestFindAndPage(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	ctx := context.Background()
	want := map[string]map[string]bool{"keyed": {}, "team": {}, "all": {}}
	var firstKeyed host.Result
	for i := range 307 {
		tool, session := "gated.echo", fmt.Sprintf("other-%d", i%7)
		args := fmt.Sprintf(`{"amount":%d,"currency":"usd","note":"call %d"}`, i+1, i)
		if i%5 == 0 {
			tool, args = "gated.keyed", fmt.Sprintf(`{"doc":"d-%d"}`, i)
		}
		if i%3 == 0 {
			session = "team-crash"
		}
		res, err := e.ex.Execute(ctx, host.ToolCall{SessionID: session, ToolCallID: fmt.Sprintf("c-%03d", i), Tool: tool, Arguments: json.RawMessage(args)})
		if err != nil || res.Approval == nil {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
		want["all"][res.Approval.ID] = true
		if tool == "gated.keyed" {
			want["keyed"][res.Approval.ID] = true
			if firstKeyed.ExecutionID == "" {
				firstKeyed = res
			}
		}
		if session == "team-crash" {
			want["team"][res.Approval.ID] = true
		}
	}
	c := e.browser(t)
	e.signIn(t, c, ritaTok)

	_, first, _ := e.get(t, c, "/ui/approvals")
	cards := len(cardRE.FindAllString(first, -1))
	t.Logf("307 waiting calls: the first inbox page holds %d cards in %.1f KB", cards, float64(len(first))/1024)
	if cards != inboxPage {
		t.Errorf("the first page holds %d cards, want %d", cards, inboxPage)
	}
	if m := countRE.FindStringSubmatch(first); m == nil || m[1] != "307" {
		t.Errorf("the inbox's count: %v, want 307 pending", m)
	}
	for _, tc := range []struct{ name, path string }{
		{"all", "/ui/approvals"}, {"keyed", "/ui/approvals?tool=keyed"}, {"team", "/ui/approvals?session=team"},
	} {
		ids, _, largest := e.inboxPages(t, c, tc.path)
		if largest > 160<<10 {
			t.Errorf("%s: an inbox page of %d bytes, want at most 160 KiB", tc.path, largest)
		}
		seen := map[string]int{}
		for _, id := range ids {
			seen[id]++
		}
		for id := range want[tc.name] {
			if seen[id] != 1 {
				t.Errorf("%s: call %s shown %d times, want once", tc.path, id, seen[id])
			}
		}
		if len(ids) != len(want[tc.name]) {
			t.Errorf("%s: %d calls shown over its pages, want the %d it matches", tc.path, len(ids), len(want[tc.name]))
		}
	}

	// The search box.
	for _, tc := range []struct{ id, to string }{
		{firstKeyed.Approval.ID, "/ui/executions/" + firstKeyed.ExecutionID + "#decide"},
		{"%20" + firstKeyed.ExecutionID + "%20", "/ui/executions/" + firstKeyed.ExecutionID + "#decide"},
	} {
		if code, _, hdr := e.get(t, c, "/ui/find?id="+tc.id); code != http.StatusSeeOther || hdr.Get("Location") != tc.to {
			t.Errorf("find %q: %d → %q, want %q", tc.id, code, hdr.Get("Location"), tc.to)
		}
	}
	code, _, hdr := e.get(t, c, "/ui/find?id=ap_nosuchthing")
	if code != http.StatusSeeOther || hdr.Get("Location") != "/ui/approvals" {
		t.Fatalf("find of an unknown id: %d → %q", code, hdr.Get("Location"))
	}
	if _, page, _ := e.get(t, c, "/ui/approvals"); !strings.Contains(page, html.EscapeString(`no execution or approval "ap_nosuchthing"`)) {
		t.Errorf("the inbox does not say the id named nothing")
	}
	// Another namespace's call is not found through the box either.
	other := e.gatedCall(t, "globex", "g1", `{"amount":1,"currency":"usd"}`)
	acme := e.browser(t)
	e.signIn(t, acme, acmeTok)
	if _, _, hdr := e.get(t, acme, "/ui/find?id="+other.Approval.ID); hdr.Get("Location") != "/ui/approvals" {
		t.Errorf("acme's find of globex's call went to %q", hdr.Get("Location"))
	}

	// Executions: a part of the session's id finds it.
	_, page, _ := e.get(t, c, "/ui/executions?session=team")
	rows := strings.Count(page, `<td data-label="session">team-crash</td>`)
	if rows == 0 || strings.Contains(page, `<td data-label="session">other-`) {
		t.Errorf("executions?session=team: %d rows of team-crash, others shown: %v", rows, strings.Contains(page, "<td>other-"))
	}
	// The whole id, looked up in the ledger's index: team is no session,
	// team-crash is.
	if _, page, _ := e.get(t, c, "/ui/executions?session=team&exact=1"); strings.Contains(page, `<td data-label="session">`) {
		t.Error("executions?session=team&exact=1 lists executions, but no session is called team")
	}
	if _, page, _ := e.get(t, c, "/ui/executions?session=team-crash&exact=1"); strings.Count(page, `<td data-label="session">team-crash</td>`) != rows {
		t.Errorf("executions?session=team-crash&exact=1 does not list the %d executions of team-crash", rows)
	}

	// The recovery queue: 60 calls over two pages, and a session filter.
	recovery := map[string]bool{}
	for i := range 60 {
		recovery[e.uncertainCall(t, fmt.Sprintf("stuck-%02d", i)).ExecutionID] = true
	}
	oc := e.browser(t)
	e.signIn(t, oc, olgaTok)
	var shown []string
	for path, pages := "/ui/recovery", 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatal("the recovery queue's next links do not end")
		}
		_, page, _ := e.get(t, oc, path)
		n := recoveryCardRE.FindAllStringSubmatch(page, -1)
		if len(n) > recoveryPage {
			t.Errorf("%s holds %d cards, want at most %d", path, len(n), recoveryPage)
		}
		if pages == 0 && !strings.Contains(page, `<small id="recovery-count">60 recovery_required`) {
			t.Errorf("the recovery queue does not count its 60 calls")
		}
		for _, m := range n {
			shown = append(shown, m[1])
		}
		path = ""
		if m := recoveryNextRE.FindStringSubmatch(page); m != nil {
			path = html.UnescapeString(m[1])
		}
	}
	seen := map[string]int{}
	for _, id := range shown {
		seen[id]++
	}
	if len(shown) != 60 || len(seen) != 60 {
		t.Errorf("the recovery queue's pages show %d cards (%d distinct), want 60", len(shown), len(seen))
	}
	_, page, _ = e.get(t, oc, "/ui/recovery?session=stuck-1")
	if n := len(recoveryCardRE.FindAllString(page, -1)); n != 10 {
		t.Errorf("recovery?session=stuck-1 shows %d calls, want the 10 of stuck-10…stuck-19", n)
	}
}
