package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/connhost/connhost"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
)

// TestConsoleAtScaleInBrowser drives the console in headless Chromium over
// 10,000 payments awaiting approval (seeded through an in-process
// executor on a real Pebble ledger, served in-process: nothing here needs
// a process of its own). The inbox filters by session and pages through
// the waiting calls; each page's server time (its Server-Timing header,
// read from the browser's navigation timing) is logged, not asserted. A
// call that begins to wait appears on the open inbox without a reload.
// The keyboard shortcuts approve one call only after the confirmation
// dialog's confirm button: a cancelled dialog, and a key typed in a field,
// decide nothing; a runtime principal's shortcuts decide nothing at all. Every console page is saved as a screenshot at 1,280 and
// 390 px (under $CONNHOST_ARTIFACTS, else the test's temporary directory),
// each checked to be a PNG of that width, the page not scrolling sideways;
// axe-core checks the pages that show the shortcuts' dialogs.
func TestConsoleAtScaleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 10,000 calls and runs a browser")
	}
	ctx := context.Background()
	tmp := t.TempDir()

	emu := stripe.New(stripe.Options{})
	provider := httptest.NewServer(emu)
	defer provider.Close()
	defer emu.Close()
	ms, err := connhost.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	if err := connhost.WriteModules(filepath.Join(tmp, "modules")); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ex, err := host.Open(ctx, host.Options{DataDir: filepath.Join(tmp, "data"), Manifests: ms, ModuleDir: filepath.Join(tmp, "modules"), Logger: quiet,
		Config: func(c, k string) (string, bool) {
			v, ok := map[string]string{"api_key": "sk_test_scale", "base_url": provider.URL}[k]
			return v, ok && c == "payments"
		},
		AllowHTTP: map[string][]string{"payments": {provider.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close(ctx)

	// 10,000 payments await approval: even calls in sessions team-0 …
	// team-49 (100 each), odd ones in ops-0 … ops-49.
	const waiting = 10000
	payment := func(session, id string, amount int) host.ToolCall {
		return host.ToolCall{SessionID: session, ToolCallID: id, Tool: "payments.create_payment",
			Arguments: json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"usd","payment_method":"pm_card_visa","description":"invoice %d"}`, amount, amount))}
	}
	seeded := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < waiting; i += 8 {
				session := fmt.Sprintf("ops-%d", (i/2)%50)
				if i%2 == 0 {
					session = fmt.Sprintf("team-%d", (i/2)%50)
				}
				res, err := ex.Execute(ctx, payment(session, fmt.Sprintf("c-%05d", i), 100+i))
				if err == nil && res.Status != host.StatusAwaitingApproval {
					err = fmt.Errorf("call %d: %s, want awaiting_approval", i, res.Status)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	unc, err := ex.Execute(ctx, host.ToolCall{SessionID: "s-old", ToolCallID: "c1", Tool: "payments.create_payment", Resumed: true,
		Arguments: json.RawMessage(`{"amount":999,"currency":"usd","payment_method":"pm_card_visa"}`)})
	if err != nil || unc.Status != host.StatusRecoveryRequired {
		t.Fatalf("resumed payment: %+v %v", unc, err)
	}
	t.Logf("seeded %d waiting payments and one recovery_required call in %v", waiting, time.Since(seeded).Round(time.Millisecond))

	const agentTok, ritaTok = "tok-agent-0123456789abcdef", "tok-rita-0123456789abcdef"
	unlimited := 0 // the default max_pending_approvals (1,000) would refuse the runtime's next call
	srv, err := server.New(ctx, server.Options{Executor: ex, Logger: quiet, Config: &server.Config{
		Limits: server.LimitsConfig{MaxPendingApprovals: &unlimited},
		Principals: []server.PrincipalConfig{
			{Name: "agent", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: agentTok},
			{Name: "rita", Roles: []httpapi.Role{httpapi.RoleApprover}, Token: ritaTok},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	base := hs.URL

	br := newBrowser(t, browserOptions{PageLimit: 8000, ShotPrefix: "console-scale", ShotHeight: 4000, CheckShots: true})
	run, eval, shot, accessible := br.run, br.eval, br.shot, br.accessible
	// text is the element's textContent, "(no sel)" when there is none.
	text := func(sel string) string {
		t.Helper()
		return eval(fmt.Sprintf(`(document.querySelector(%q) || {textContent: "(no %s)"}).textContent`, sel, sel))
	}
	decision := func(id string) host.ApprovalView {
		t.Helper()
		var v host.ApprovalView
		apiCall(t, base, ritaTok, "/v1/approvals/"+id, nil, &v)
		return v
	}
	// serverTime is the page's Server-Timing, as the browser received it.
	serverTime := func() string {
		t.Helper()
		st := eval(`(performance.getEntriesByType("navigation")[0].serverTiming || []).map(s => s.name + " " + s.duration.toFixed(1) + " ms").join(", ") || "none"`)
		if st == "none" {
			t.Errorf("%s: the browser received no Server-Timing, so the page's server time is not measured", eval(`location.pathname + location.search`))
		}
		return st
	}
	ids := func() []string {
		t.Helper()
		var got []string
		if err := json.Unmarshal([]byte(eval(`JSON.stringify([...document.querySelectorAll("section.card.approval")].map(s => s.id))`)), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	sessions := func() []string {
		t.Helper()
		var got []string
		if err := json.Unmarshal([]byte(eval(`JSON.stringify([...document.querySelectorAll("section.card.approval dl.facts dd:nth-of-type(2) a:first-child")].map(a => a.textContent))`)), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	run("sign-in form", chromedp.Navigate(base+"/ui/signin"), chromedp.WaitVisible(chromedp.ID("token")))
	shot("signin")
	run("sign in as rita", chromedp.SendKeys(chromedp.ID("token"), ritaTok), chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("principal")))

	// The inbox's first page, then the next, over 10,000 waiting calls.
	run("inbox", chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS("section.card.approval")))
	t.Logf("%d waiting calls: the inbox's first page, server time %s", waiting, serverTime())
	if c := text("#inbox-count"); !strings.HasPrefix(c, fmt.Sprintf("%d pending", waiting)) {
		t.Errorf("the inbox's count: %q, want %d pending", c, waiting)
	}
	first := ids()
	if len(first) != 50 {
		t.Errorf("the first page holds %d cards, want 50", len(first))
	}
	shot("approvals")
	run("next page", chromedp.Click(chromedp.ID("inbox-next")), chromedp.WaitVisible(chromedp.ID("inbox-first")))
	t.Logf("%d waiting calls: the inbox's second page, server time %s", waiting, serverTime())
	second := ids()
	if len(second) != 50 || strings.Contains(" "+strings.Join(first, " ")+" ", " "+second[0]+" ") {
		t.Errorf("the second page holds %d cards, the first of them %s; want 50 others than the first page's", len(second), second[0])
	}
	shot("approvals-page-2")
	// A call that begins to wait while a later page is open is announced
	// with a link to the first page, where it is listed and new cards are
	// shown; the later page's own address would not show it.
	var later host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s-later", "tool_call_id": "c1", "tool": "payments.create_payment",
		"arguments": map[string]any{"amount": 777, "currency": "eur", "payment_method": "pm_card_visa"}}, &later)
	if later.Status != host.StatusAwaitingApproval {
		t.Fatalf("the runtime's payment while page 2 is open: %+v", later)
	}
	run("announced on page 2", chromedp.WaitVisible(chromedp.CSS("#live-new a")))
	if href, first := eval(`document.querySelector("#live-new a").getAttribute("href")`), eval(`document.getElementById("inbox-first").getAttribute("href")`); href != first {
		t.Errorf("page 2's notice of a new call links to %q, want the first page %q", href, first)
	}

	// Filter by session in the browser's form: 100 of the 10,000 match,
	// two pages of them.
	run("filter by session", chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS(`form.filter input[name=session]`)),
		chromedp.SendKeys(chromedp.CSS(`form.filter input[name=session]`), "team-7"),
		chromedp.Click(chromedp.CSS(`form.filter button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.hint a[href="/ui/approvals"]`)))
	t.Logf("%d waiting calls: the first page filtered by session team-7, server time %s", waiting, serverTime())
	matched := sessions()
	run("filtered next page", chromedp.Click(chromedp.ID("inbox-next")), chromedp.WaitVisible(chromedp.ID("inbox-first")))
	t.Logf("%d waiting calls: the second page filtered by session team-7, server time %s", waiting, serverTime())
	matched = append(matched, sessions()...)
	if len(matched) != 100 {
		t.Errorf("the session filter's two pages hold %d calls, want the 100 of team-7", len(matched))
	}
	for _, got := range matched {
		if got != "team-7" {
			t.Errorf("the session filter team-7 shows a call of session %q", got)
			break
		}
	}
	shot("approvals-filtered")

	// A call that begins to wait appears on the open first page, without
	// a reload: the page's marker survives.
	run("inbox again", chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS("section.card.approval")))
	eval(`window.connhostNoReload = "still this page"; "set"`)
	var fresh host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s-live", "tool_call_id": "c1", "tool": "payments.create_payment",
		"arguments": map[string]any{"amount": 4242, "currency": "eur", "payment_method": "pm_card_visa"}}, &fresh)
	if fresh.Status != host.StatusAwaitingApproval {
		t.Fatalf("the runtime's new payment (with 10,000 waiting and max_pending_approvals off): %+v", fresh)
	}
	appeared := time.Now()
	run("the new call appears", chromedp.WaitVisible(chromedp.CSS("#inbox-new #"+fresh.Approval.ID)))
	t.Logf("a call began to wait → its card on the open inbox after %v (the page polls every %v)", time.Since(appeared).Round(time.Millisecond), 5*time.Second)
	if m := eval(`String(window.connhostNoReload)`); m != "still this page" {
		t.Errorf("the inbox reloaded to show the new call (marker %q)", m)
	}
	if got := ids(); len(got) != 51 || got[0] != fresh.Approval.ID {
		t.Errorf("after the new call the page holds %d cards, the first %v; want 51, the new one first", len(got), got[:1])
	}
	if n := text("#live-new"); !strings.HasPrefix(n, "1 new call waits; it is shown first on this page.") {
		t.Errorf("the aria-live notice: %q", n)
	}
	if c := text("#" + fresh.Approval.ID + " .money"); !strings.HasPrefix(c, "42.42 EUR") {
		t.Errorf("the inserted card's amount: %q", c)
	}
	shot("approvals-live")

	// Keyboard: ? lists the shortcuts; a key typed in a field is the
	// field's; j chooses the new call; a asks, Escape cancels (nothing is
	// decided); a again, a reason, the dialog's confirm button approves.
	run("shortcuts listed", chromedp.KeyEvent("?"), chromedp.WaitVisible(chromedp.ID("keys-help")))
	if h := text("#keys-help"); !strings.Contains(h, "approve the call, after you confirm") {
		t.Errorf("the shortcuts' list: %q", h)
	}
	shot("shortcuts")
	accessible("the inbox with the shortcuts listed")
	run("close the list", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.ID("keys-help")))
	run("type a in a field", chromedp.Click(chromedp.ID("find-id")), chromedp.KeyEvent("a"))
	if open := eval(`String(!!document.querySelector("dialog[open]"))`); open != "false" {
		t.Errorf("a typed in the search field opened a dialog")
	}
	eval(`document.activeElement.blur(); "blurred"`)
	run("choose the first call", chromedp.KeyEvent("j"))
	if cur := eval(`document.querySelector("section.card.current").id`); cur != fresh.Approval.ID {
		t.Errorf("j chose %s, want the first call %s", cur, fresh.Approval.ID)
	}
	if said := text("#keys-said"); !strings.HasPrefix(said, "Call 1 of 51: payments.create_payment "+fresh.Approval.ID) {
		t.Errorf("j announced %q", said)
	}
	run("a asks", chromedp.KeyEvent("a"), chromedp.WaitVisible(chromedp.ID("keys-confirm")))
	if q := text("#keys-confirm"); !strings.Contains(q, "Approve payments.create_payment "+fresh.Approval.ID+"?") || !strings.Contains(q, "42.42 EUR") {
		t.Errorf("the confirmation dialog: %q", q)
	}
	if r := eval(`document.getElementById("keys-reason").value`); r != "" {
		t.Errorf("the key that opened the dialog typed %q into its reason field", r)
	}
	if f := eval(`document.activeElement.id`); f != "keys-reason" {
		t.Errorf("once the key is released the dialog's focus is on %q, want its reason field", f)
	}
	shot("shortcut-confirm")
	accessible("the inbox asking to confirm an approval")
	run("cancel", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.ID("keys-confirm")))
	if v := decision(fresh.Approval.ID); v.Decision != "pending" {
		t.Fatalf("a cancelled confirmation decided: %s by %s", v.Decision, v.By)
	}
	if said := text("#keys-said"); !strings.HasPrefix(said, "Nothing decided") {
		t.Errorf("after cancelling: %q", said)
	}
	run("a, a reason, confirm", chromedp.KeyEvent("a"), chromedp.WaitVisible(chromedp.ID("keys-reason")),
		chromedp.SendKeys(chromedp.ID("keys-reason"), "checked by keyboard"),
		chromedp.Click(chromedp.ID("keys-confirm-yes")),
		chromedp.WaitVisible(chromedp.CSS("#live p.note")))
	if note := text("#live p.note"); !strings.Contains(note, "approved "+fresh.Approval.ID) || !strings.Contains(note, "as rita") {
		t.Errorf("after confirming: %q", note)
	}
	if v := decision(fresh.Approval.ID); v.Decision != "approved" || v.By != "rita" {
		t.Errorf("the shortcut's approval: %s by %s, want approved by rita", v.Decision, v.By)
	}
	if v := decision(first[0]); v.Decision != "pending" {
		t.Errorf("the next call was decided too: %s", v.Decision)
	}

	// A call too long for the inbox is approved from its own page: a on
	// its card says so, and opens no dialog; it does not say the approver
	// lacks the role.
	var long host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s-folded", "tool_call_id": "c1", "tool": "payments.create_payment",
		"arguments": map[string]any{"amount": 990, "currency": "eur", "payment_method": "pm_card_visa", "description": strings.Repeat("é", 600)}}, &long)
	if long.Status != host.StatusAwaitingApproval {
		t.Fatalf("the long payment: %+v", long)
	}
	run("the long call's card", chromedp.Navigate(base+"/ui/approvals?session=s-folded"), chromedp.WaitVisible(chromedp.CSS("#"+long.Approval.ID+" .folded-call")))
	eval(`document.activeElement.blur(); "blurred"`)
	run("j, a on a folded card", chromedp.KeyEvent("j"), chromedp.KeyEvent("a"))
	if open, said := eval(`String(!!document.querySelector("dialog[open]"))`), text("#keys-said"); open != "false" || !strings.Contains(said, "too long for the inbox") || strings.Contains(said, "approver role") {
		t.Errorf("a on a folded card as an approver: dialog open %s, said %q", open, said)
	}

	// The other pages, for the screenshots.
	run("execution", chromedp.Navigate(base+"/ui/executions/"+fresh.ExecutionID), chromedp.WaitVisible(chromedp.ID("status")))
	if trail := text("table.trail"); !strings.Contains(trail, "checked by keyboard") {
		t.Errorf("the approval's trail lacks the reason given in the dialog:\n%s", trail)
	}
	shot("execution-approved")
	run("waiting execution", chromedp.Navigate(base+"/ui/find?id="+first[0]), chromedp.WaitVisible(chromedp.ID("decide")))
	shot("execution-waiting")
	run("shortcuts on a call's page", chromedp.KeyEvent("a"), chromedp.WaitVisible(chromedp.ID("keys-confirm")))
	if q := text("#keys-confirm-title"); !strings.HasPrefix(q, "Approve ") {
		t.Errorf("a on a waiting call's page asks %q", q)
	}
	run("cancel on a call's page", chromedp.Click(chromedp.ID("keys-confirm-no")), chromedp.WaitNotPresent(chromedp.ID("keys-confirm")))
	if v := decision(first[0]); v.Decision != "pending" {
		t.Errorf("a cancelled confirmation on the call's page decided: %s", v.Decision)
	}
	run("executions", chromedp.Navigate(base+"/ui/executions"), chromedp.WaitVisible(chromedp.ID("executions")))
	t.Logf("%d waiting calls: the executions page, server time %s", waiting, serverTime())
	shot("executions")
	run("recovery", chromedp.Navigate(base+"/ui/recovery"), chromedp.WaitVisible(chromedp.CSS("#"+unc.ExecutionID)))
	shot("recovery")
	run("connectors", chromedp.Navigate(base+"/ui/connectors"), chromedp.WaitVisible(chromedp.ID("connector-payments")))
	shot("connectors")
	// A runtime principal's inbox has no decision forms: a and r open no
	// dialog and say why, and ? lists no shortcut that decides.
	run("sign in as the runtime", chromedp.Click(chromedp.CSS(`header form[action="/ui/signout"] button`)), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), agentTok), chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("principal")),
		chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS("section.card.approval")))
	eval(`document.activeElement.blur(); "blurred"`)
	run("j, a as the runtime", chromedp.KeyEvent("j"), chromedp.KeyEvent("a"))
	if open, said := eval(`String(!!document.querySelector("dialog[open]"))`), text("#keys-said"); open != "false" || !strings.Contains(said, "needs the approver role") {
		t.Errorf("a as the runtime principal: dialog open %s, said %q", open, said)
	}
	run("? as the runtime", chromedp.KeyEvent("?"), chromedp.WaitVisible(chromedp.ID("keys-help")))
	if h := text("#keys-help"); strings.Contains(h, "approve the call") || !strings.Contains(h, "need the approver role") {
		t.Errorf("the runtime principal's list of shortcuts: %q", h)
	}
	run("close", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.ID("keys-help")))
	t.Logf("screenshots in %s:\n%s", br.shotsDir(), strings.Join(br.saved, "\n"))
}
