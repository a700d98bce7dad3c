package console

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/connhost/connhost/host"
)

// TestBulkReject: a reviewer selects calls on the inbox and rejects them
// with one reason: those are rejected, recorded under the reviewer with
// that reason, and the others stay pending; an id that names no waiting
// call is reported, not skipped silently; without a reason or a
// selection nothing is rejected; an operator and a runtime principal
// are refused (403) and see no checkbox.
func TestBulkReject(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	var calls []host.Result
	for i := range 5 {
		calls = append(calls, e.gatedCall(t, "", fmt.Sprintf("c%d", i), fmt.Sprintf(`{"amount":%d,"currency":"usd"}`, i+1)))
	}
	c := e.browser(t)
	csrf := e.signIn(t, c, ritaTok)
	_, page, _ := e.get(t, c, "/ui/approvals")
	if n := strings.Count(page, `form="bulk"`); n != 5 || !strings.Contains(page, `<form method="post" action="/ui/approvals/reject" id="bulk"`) {
		t.Fatalf("the inbox offers %d checkboxes for a bulk reject, want 5", n)
	}
	reject := func(cl *http.Client, csrf, reason string, ids ...string) (int, string) {
		t.Helper()
		code, _, hdr := e.post(t, cl, "/ui/approvals/reject", url.Values{"csrf": {csrf}, "reason": {reason}, "id": ids}, nil)
		if code != http.StatusSeeOther {
			return code, ""
		}
		_, page, _ := e.get(t, cl, hdr.Get("Location"))
		return code, html.UnescapeString(page)
	}
	pending := func() (n int) {
		for _, r := range calls {
			if e.decision(t, r.Approval.ID) == "pending" {
				n++
			}
		}
		return n
	}
	if _, page := reject(c, csrf, "", calls[0].Approval.ID); !strings.Contains(page, "needs a reason") || pending() != 5 {
		t.Errorf("a bulk reject without a reason: %d pending, page says reason: %v", pending(), strings.Contains(page, "needs a reason"))
	}
	if _, page := reject(c, csrf, "spam"); !strings.Contains(page, "select the calls") || pending() != 5 {
		t.Errorf("a bulk reject of nothing")
	}
	for _, tok := range []string{olgaTok, runTok} {
		o := e.browser(t)
		ocsrf := e.signIn(t, o, tok)
		if _, page, _ := e.get(t, o, "/ui/approvals"); strings.Contains(page, `form="bulk"`) {
			t.Errorf("a principal that may not reject sees bulk checkboxes")
		}
		if code, _ := reject(o, ocsrf, "spam", calls[0].Approval.ID); code != http.StatusForbidden {
			t.Errorf("a bulk reject by a principal without approver: %d, want 403", code)
		}
	}
	if pending() != 5 {
		t.Fatal("a refused bulk reject rejected something")
	}
	_, page = reject(c, csrf, "a flood from one agent", calls[1].Approval.ID, calls[3].Approval.ID, calls[4].Approval.ID, "ap_nosuchthing", calls[1].Approval.ID)
	if !strings.Contains(page, "rejected 3 of 4 calls as rita") || !strings.Contains(page, `not rejected: ap_nosuchthing: no approval "ap_nosuchthing"`) {
		t.Errorf("the bulk reject's note:\n%s", page[strings.Index(page, `<div id="live"`):strings.Index(page, "<main")])
	}
	for i, r := range calls {
		rec, _, err := e.ex.Get(t.Context(), r.ExecutionID)
		if err != nil {
			t.Fatal(err)
		}
		a := rec.Approval
		selected := i == 1 || i == 3 || i == 4
		if selected && (a.Decision != "rejected" || a.By != "rita" || a.Reason != "a flood from one agent") {
			t.Errorf("selected call %d: %s by %q (%q)", i, a.Decision, a.By, a.Reason)
		}
		if !selected && a.Decision != "pending" {
			t.Errorf("call %d was not selected but is %s", i, a.Decision)
		}
	}
}
