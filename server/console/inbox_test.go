package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

var (
	cardRE  = regexp.MustCompile(`<section class="card approval" id="(ap_[a-z0-9]+)"`)
	nextRE  = regexp.MustCompile(`href="([^"]+)" id="inbox-next"`)
	countRE = regexp.MustCompile(`<small id="inbox-count">(\d+) pending`)
)

// inboxPages reads the inbox from path on, following its next links, and
// returns the approval ids of every card in the order shown, the count
// each page claimed, and the size of the largest page.
func (e *env) inboxPages(t *testing.T, c *http.Client, path string) (ids []string, counts []string, largest int) {
	t.Helper()
	for pages := 0; path != ""; pages++ {
		if pages > 100 {
			t.Fatal("the inbox's next links do not end")
		}
		code, page, _ := e.get(t, c, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, page)
		}
		largest = max(largest, len(page))
		for _, m := range cardRE.FindAllStringSubmatch(page, -1) {
			ids = append(ids, m[1])
		}
		if m := countRE.FindStringSubmatch(page); m != nil {
			counts = append(counts, m[1])
		} else {
			counts = append(counts, "none")
		}
		path = ""
		if m := nextRE.FindStringSubmatch(page); m != nil {
			path = html.UnescapeString(m[1])
		}
	}
	return ids, counts, largest
}

// TestInboxFlood: a flood of another tenant's calls neither hides a call
// nor makes the inbox claim a count it did not count. tenant-a's call,
// recorded first and so the soonest to expire, is followed by 1,000 of
// tenant-b's (the default max_pending_approvals): the inbox shows
// tenant-a's call first, says 1001 pending, and its pages, followed to
// the end, show every one of the 1,001 calls once, in expiry order, each
// page a bounded size.
func TestInboxFlood(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	ctx := context.Background()
	first := e.gatedCall(t, "tenant-a", "a-1", `{"amount":500,"currency":"usd"}`)
	all := map[string]bool{first.Approval.ID: true}
	for i := range 1000 {
		res, err := e.ex.Execute(ctx, host.ToolCall{Namespace: "tenant-b", SessionID: "flood", ToolCallID: fmt.Sprintf("b-%04d", i),
			Tool: "gated.echo", Arguments: json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"usd","note":"flood"}`, i+1))})
		if err != nil || res.Approval == nil {
			t.Fatalf("tenant-b call %d: %+v %v", i, res, err)
		}
		all[res.Approval.ID] = true
	}
	c := e.browser(t)
	e.signIn(t, c, ritaTok)

	ids, counts, largest := e.inboxPages(t, c, "/ui/approvals")
	t.Logf("inbox: %d calls over %d pages, largest page %d bytes", len(ids), len(counts), largest)
	if len(ids) == 0 || ids[0] != first.Approval.ID {
		t.Fatalf("tenant-a's call, the soonest to expire, is not the inbox's first (first shown: %v)", ids[:min(1, len(ids))])
	}
	if counts[0] != "1001" {
		t.Errorf("the inbox claims %s pending, want the 1001 there are", counts[0])
	}
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	for id := range all {
		if seen[id] != 1 {
			t.Errorf("call %s shown %d times over the inbox's pages, want once", id, seen[id])
		}
	}
	if len(ids) != len(all) {
		t.Errorf("the inbox's pages show %d calls, want %d", len(ids), len(all))
	}
	if largest > 256<<10 {
		t.Errorf("an inbox page of %d bytes, want at most 256 KiB", largest)
	}

	// Its own inbox, and one namespace's, count what they list.
	acme := e.browser(t)
	e.signIn(t, acme, acmeTok)
	if _, counts, _ := e.inboxPages(t, acme, "/ui/approvals"); counts[0] != "0" {
		t.Errorf("acme's inbox claims %s pending, want 0", counts[0])
	}
	ids, counts, _ = e.inboxPages(t, c, "/ui/approvals?namespace=tenant-a")
	if counts[0] != "1" || len(ids) != 1 || ids[0] != first.Approval.ID {
		t.Errorf("tenant-a's inbox: %v claiming %s, want its one call", ids, counts[0])
	}
}

// TestInboxFoldsLongCalls: 60 calls with arguments of 240 KB make an
// inbox page of a bounded size: each long value is folded, the card says
// so and links to the call's own page, and only that page, which shows
// the call whole, offers to approve it (a reviewer approves what was
// shown); approving from it runs as from the inbox.
func TestInboxFoldsLongCalls(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	ctx := context.Background()
	long := strings.Repeat("A", 240<<10)
	var first, last host.Result
	for i := range 60 {
		res, err := e.ex.Execute(ctx, host.ToolCall{SessionID: "docs", ToolCallID: fmt.Sprintf("d-%02d", i), Tool: "gated.keyed",
			Arguments: json.RawMessage(fmt.Sprintf(`{"to":"ops@example.com","body":"%s","n":%d}`, long, i))})
		if err != nil || res.Approval == nil {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
		if i == 0 {
			first = res
		}
		last = res
	}
	c := e.browser(t)
	csrf := e.signIn(t, c, ritaTok)
	ids, counts, largest := e.inboxPages(t, c, "/ui/approvals")
	t.Logf("inbox: %d calls of 240 KB over %d pages, largest page %d bytes", len(ids), len(counts), largest)
	if len(ids) != 60 || counts[0] != "60" {
		t.Fatalf("the inbox shows %d calls and claims %s, want 60", len(ids), counts[0])
	}
	if largest > 256<<10 {
		t.Errorf("an inbox page of %d bytes, want at most 256 KiB", largest)
	}
	_, page, _ := e.get(t, c, "/ui/approvals")
	if !strings.Contains(page, `id="`+first.Approval.ID+`"`) || strings.Contains(page, `action="/ui/approvals/`+first.Approval.ID+`/approve"`) {
		t.Error("the inbox does not show the first call, or offers to approve it though it shows it folded")
	}
	if !strings.Contains(page, "more bytes") || !strings.Contains(page, `/ui/executions/`+first.ExecutionID+`#decide`) {
		t.Error("a folded call does not say so, or does not link to its whole view")
	}

	_, whole, _ := e.get(t, c, "/ui/executions/"+last.ExecutionID)
	if !strings.Contains(whole, long) {
		t.Fatal("the call's own page does not show the argument whole")
	}
	if !strings.Contains(whole, `action="/ui/approvals/`+last.Approval.ID+`/approve"`) {
		t.Fatal("the call's own page offers no approval")
	}
	code, _, hdr := e.post(t, c, "/ui/approvals/"+last.Approval.ID+"/approve",
		url.Values{"csrf": {csrf}, "digest": {last.Approval.ArgsDigest}, "reason": {"read it whole"}}, nil)
	if code != http.StatusSeeOther || e.state(t, last.ExecutionID) != ledger.StateApproved {
		t.Fatalf("approve from the call's page: %d %s, state %s", code, hdr.Get("Location"), e.state(t, last.ExecutionID))
	}
}
