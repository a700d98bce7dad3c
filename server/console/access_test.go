package console

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var labelRE = regexp.MustCompile(`<label>Reason <span class="vh">([^<]+)</span><input type="text" name="reason"`)

// TestAccessible: every reason input of the inbox has a label of its own
// (approving or rejecting which call), notes are announced from one
// aria-live region, a skip link leads to the content, and an operator is
// told why no call has approve buttons. A decision returns the reviewer
// to the inbox as filtered, to the next call, saying what was done.
func TestAccessible(t *testing.T) {
	e := newEnv(t, principals, nil, false)
	a := e.gatedCall(t, "", "c1", `{"amount":500,"currency":"usd"}`)
	b := e.gatedCall(t, "", "c2", `{"amount":700,"currency":"usd"}`)
	c := e.browser(t)
	csrf := e.signIn(t, c, ritaTok)
	_, page, _ := e.get(t, c, "/ui/approvals?tool=echo")
	labels := labelRE.FindAllStringSubmatch(page, -1)
	distinct := map[string]bool{}
	for _, l := range labels {
		distinct[l[1]] = true
	}
	if len(labels) != 4 || len(distinct) != 4 {
		t.Errorf("%d reason inputs with %d distinct labels, want 4 and 4: %q", len(labels), len(distinct), labels)
	}
	for _, want := range []string{"for approving gated.echo " + a.Approval.ID, "for rejecting gated.echo " + b.Approval.ID} {
		if !distinct[want] {
			t.Errorf("no reason input is labelled %q", want)
		}
	}
	for _, want := range []string{`<a class="skip" href="#main">`, `<main id="main"`, `<div id="live" role="status" aria-live="polite"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the inbox lacks %s", want)
		}
	}
	if strings.Contains(page, `id="no-approve"`) {
		t.Error("an approver is told it may not approve")
	}

	code, _, hdr := e.post(t, c, "/ui/approvals/"+a.Approval.ID+"/reject",
		url.Values{"csrf": {csrf}, "reason": {"duplicate"}, "back": {"/ui/approvals?tool=echo"}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != "/ui/approvals?tool=echo" {
		t.Fatalf("reject: %d → %q, want the inbox as filtered", code, hdr.Get("Location"))
	}
	_, page, _ = e.get(t, c, hdr.Get("Location"))
	live := page[strings.Index(page, `<div id="live"`):strings.Index(page, "<main")]
	if !strings.Contains(live, "rejected "+a.Approval.ID) || !strings.Contains(live, `href="/ui/executions/`+a.ExecutionID+`"`) {
		t.Errorf("the live region after the rejection: %s", live)
	}
	if strings.Contains(page, `id="`+a.Approval.ID+`"`) || !strings.Contains(page, `id="`+b.Approval.ID+`"`) {
		t.Error("the inbox after the rejection does not show the next call alone")
	}
	for _, back := range []string{"https://evil.example/ui/approvals", "//evil.example/ui/approvals", "/ui/signout", "/ui/approvalsx"} {
		_, _, hdr := e.post(t, c, "/ui/approvals/"+b.Approval.ID+"/reject", url.Values{"csrf": {csrf}, "back": {back}}, nil)
		if hdr.Get("Location") != "/ui/approvals" {
			t.Errorf("back %q: sent to %q, want /ui/approvals", back, hdr.Get("Location"))
		}
	}

	o := e.browser(t)
	e.signIn(t, o, olgaTok)
	_, page, _ = e.get(t, o, "/ui/approvals")
	if !strings.Contains(page, `id="no-approve"`) || !strings.Contains(page, "needs the approver role") {
		t.Errorf("an operator is not told why it has no approve buttons:\n%s", page)
	}
	if code, page, _ := e.get(t, o, "/ui/recovery"); code != http.StatusOK || strings.Contains(page, `id="readonly"`) {
		t.Errorf("an operator's recovery page: %d, or called read-only", code)
	}
}
