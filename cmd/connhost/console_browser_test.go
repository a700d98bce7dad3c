package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// TestConsoleInBrowser drives the console of a real `connhost serve`
// (Pebble ledger, the payments wasm connector, the Stripe emulator) with
// headless Chromium: an approver signs in, approves a pending payment and
// sees it succeed once the runtime sends it again; an operator resolves a
// recovery_required call and sees its session unfenced; a runtime
// principal sees no action form and its direct POST is refused (403); a
// form posted from another site is refused and decides nothing. A call
// that begins to wait is shown on the open inbox without a reload;
// the trail and the executions list fit 1,440 and 390 px without sideways
// scrolling; axe-core finds no serious or critical violation on any
// console page; after a restart of the server the reviewer is still
// signed in. Each page is saved as a screenshot at 1280 px and at 390 px.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost, runs it and a browser")
	}
	ctx := context.Background()
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)

	wasm, digest, err := wasmbuild.Cached(ctx, "plugins/payments")
	if err != nil {
		t.Fatal(err)
	}
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	mods, mans := filepath.Join(tmp, "modules"), filepath.Join(tmp, "manifests")
	for _, d := range []string{mods, mans} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, mods, "payments.wasm", string(b))
	src, err := os.ReadFile(filepath.Join(root, "manifests", "payments.toml"))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := manifests.SetSHA256(src, digest)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, mans, "payments.toml", string(pinned))
	sb, err := sandbox.Start(ctx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	origin := strings.TrimSuffix(sb.PaymentsURL(), "/")

	const agentTok, ritaTok, olgaTok = "tok-agent-0123456789abcdef", "tok-rita-0123456789abcdef", "tok-olga-0123456789abcdef"
	cfg := writeFile(t, tmp, "connhost.toml", fmt.Sprintf(`
[[principals]]
name = "agent"
roles = ["runtime"]
token_env = "T_AGENT"

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"

[[principals]]
name = "olga"
roles = ["operator"]
token_env = "T_OLGA"

[connectors.payments]
api_key = "sk_test_console"
base_url = %q
allow_http = [%q]
`, sb.PaymentsURL(), origin))
	data := filepath.Join(tmp, "data")
	serve := func() *serverProcess {
		return startServer(t, bin, cliEnv("T_AGENT="+agentTok, "T_RITA="+ritaTok, "T_OLGA="+olgaTok), "serving the HTTP API",
			"--json", "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--data", data, "--manifests", mans, "--modules", mods)
	}
	srv := serve()
	si, err := readServerInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	base := si.URL

	br := newBrowser(t, browserOptions{ServerLog: func() string { return srv.log.String() }, ShotPrefix: "console", CheckShots: true})
	run, text, eval, shot, accessible := br.run, br.text, br.eval, br.shot, br.accessible
	signIn := func(token string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			chromedp.Navigate(base+"/ui/signin"),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), token),
			chromedp.Click(chromedp.ID("signin")),
			chromedp.WaitVisible(chromedp.ID("principal")),
		)
	}
	signOut := chromedp.Steps(
		chromedp.Click(chromedp.CSS(`header form[action="/ui/signout"] button`)),
		chromedp.WaitVisible(chromedp.ID("token")),
	)

	// An approver approves a pending payment.
	run("sign-in form", chromedp.Navigate(base+"/ui/signin"), chromedp.WaitVisible(chromedp.ID("token")))
	shot("signin")
	accessible("the sign-in page")
	run("sign in as rita", signIn(ritaTok))
	payArgs := map[string]any{"amount": 123456, "currency": "usd", "payment_method": "pm_card_visa", "description": "invoice 42 <b>bold</b>\u202e"}
	var pay host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": "c1", "tool": "payments.create_payment", "arguments": payArgs}, &pay)
	awaiting := time.Now()
	if pay.Status != host.StatusAwaitingApproval {
		t.Fatalf("payment: %+v", pay)
	}
	card := "#" + pay.Approval.ID
	run("inbox shows the payment", chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS(card)))
	t.Logf("payment awaits approval → shown in the console's inbox: %v (one page load)", time.Since(awaiting).Round(time.Millisecond))
	inbox := text(card)
	if pay.RequestedBy != "agent" {
		t.Errorf("the payment's requested_by is %q, want the runtime principal agent", pay.RequestedBy)
	}
	if asked := text(card + " dd.requested-by"); !strings.HasPrefix(asked, "agent,") {
		t.Errorf("the inbox's card names %q as the caller, want the runtime principal agent", asked)
	}
	for _, want := range []string{"1,234.56 USD", `"pm_card_visa"`, `\u202E`, "<b>bold</b>", pay.Approval.ArgsDigest, "after a crash"} {
		if !strings.Contains(strings.ToLower(inbox), strings.ToLower(want)) {
			t.Errorf("the inbox's card lacks %q:\n%s", want, inbox)
		}
	}
	shot("approvals")
	accessible("the approvals page")
	run("approve", chromedp.SendKeys(chromedp.CSS(card+` form[action$="/approve"] input[name=reason]`), "invoice 42 checked"),
		chromedp.Click(chromedp.CSS(card+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS("#live p.note")))
	if note := text("#live p.note"); !strings.Contains(note, "approved "+pay.Approval.ID) || !strings.Contains(note, "as rita") {
		t.Errorf("after approving: %q", note)
	}
	if u := eval(`location.pathname`); u != "/ui/approvals" {
		t.Errorf("after approving the reviewer is at %s, want back at the inbox", u)
	}
	// A call that begins to wait while the inbox is open is announced in
	// its aria-live region and its card shown, without a reload.
	var fresh host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s-live", "tool_call_id": "c1", "tool": "payments.create_payment", "arguments": payArgs}, &fresh)
	announced := time.Now()
	run("a new call is shown", chromedp.WaitVisible(chromedp.CSS("#inbox-new #"+fresh.Approval.ID)))
	t.Logf("a new call began to wait → shown on the open inbox after %v", time.Since(announced).Round(time.Millisecond))
	if a := text("#live-new"); a != "1 new call waits; it is shown first on this page. Reload to sort the page" {
		t.Errorf("the announcement: %q", a)
	}
	accessible("the approvals, showing a new call page")
	// The inbox was empty when it loaded (the one call was just approved):
	// its shortcuts still reach the call that arrived, and the hint says so.
	if h := eval(`(document.getElementById("keys-hint") || {}).textContent || ""`); !strings.Contains(h, "a approves") {
		t.Errorf("the hint on an inbox whose calls arrived live: %q", h)
	}
	run("a on a call that arrived live asks", chromedp.KeyEvent("j"), chromedp.KeyEvent("a"), chromedp.WaitVisible(chromedp.ID("keys-confirm")))
	if q := text("#keys-confirm"); !strings.Contains(q, fresh.Approval.ID) {
		t.Errorf("the confirmation names %q, want the call that arrived live %s", q, fresh.Approval.ID)
	}
	run("cancel", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.ID("keys-confirm")))
	run("reload", chromedp.Click(chromedp.CSS("#live-new a")), chromedp.WaitVisible(chromedp.CSS("#"+fresh.Approval.ID)))
	shot("approvals-announced")
	var again host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": "c1", "tool": "payments.create_payment", "arguments": payArgs}, &again)
	if again.Status != host.StatusSucceeded || !strings.HasPrefix(again.Receipt, "pi_") || again.Approval.By != "rita" {
		t.Fatalf("the approved payment: %+v", again)
	}
	run("the payment succeeded", chromedp.Navigate(base+"/ui/executions/"+pay.ExecutionID), chromedp.WaitVisible(chromedp.ID("receipt")))
	if st, rc := text("#status"), text("#receipt"); st != "succeeded" || rc != again.Receipt {
		t.Errorf("execution page: status %q receipt %q, want succeeded %s", st, rc, again.Receipt)
	}
	shot("execution")
	accessible("the execution page")
	// The trail and the executions list fit the screen: nothing is cut or
	// pushed off it at 1,440 px, and at 390 px each trail row is a block.
	const overflow = `String(document.documentElement.scrollWidth > window.innerWidth)`
	const lastTrailHeader = `String(Math.round(document.querySelector('table.trail th:last-child').getBoundingClientRect().right) <= window.innerWidth)`
	run("trail at 1440 px", chromedp.EmulateViewport(1440, 900))
	if o, r := eval(overflow), eval(lastTrailHeader); o != "false" || r != "true" {
		t.Errorf("at 1440 px the execution page scrolls sideways (%s) or the trail's reason column is off-screen (fits: %s)", o, r)
	}
	run("trail at 390 px", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(1), chromedp.EmulateMobile))
	if o, d := eval(overflow), eval(`getComputedStyle(document.querySelector('table.trail tbody tr')).display`); o != "false" || d != "block" {
		t.Errorf("at 390 px the execution page scrolls sideways (%s) or a trail row is not a block (%s)", o, d)
	}
	run("executions", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(base+"/ui/executions?tool=payments"), chromedp.WaitVisible(chromedp.ID("executions")))
	if o, r := eval(overflow), eval(`String(Math.round(document.querySelector('#executions th:last-child').getBoundingClientRect().right) <= window.innerWidth)`); o != "false" || r != "true" {
		t.Errorf("at 1440 px the executions page scrolls sideways (%s) or its updated column is off-screen (fits: %s)", o, r)
	}
	shot("executions")
	accessible("the executions page")
	run("connectors", chromedp.Navigate(base+"/ui/connectors"), chromedp.WaitVisible(chromedp.ID("connector-payments")))
	shot("connectors")
	accessible("the connectors page")
	if c := text("#connector-payments"); !strings.Contains(c, digest) || !strings.Contains(c, "unsigned") {
		t.Errorf("the connectors page lacks the module digest or the sign-off status:\n%s", c)
	}
	run("audit report", chromedp.Click(chromedp.ID("audit-link")), chromedp.WaitVisible(chromedp.CSS("h1")))
	shot("audit")
	if body := text("body"); !strings.Contains(body, "payments") {
		t.Errorf("the audit report does not name the connector:\n%s", body)
	}
	run("sign out", chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.ID("principal")), signOut)

	// A resumed payment the ledger has no record of: recovery_required,
	// fencing its session. An operator resolves it.
	var unc host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s-old", "tool_call_id": "c1", "tool": "payments.create_payment", "arguments": payArgs, "resumed": true}, &unc)
	if unc.Status != host.StatusRecoveryRequired {
		t.Fatalf("resumed payment: %+v", unc)
	}
	ucard := "#" + unc.ExecutionID
	run("sign in as olga", signIn(olgaTok), chromedp.Navigate(base+"/ui/recovery"), chromedp.WaitVisible(chromedp.CSS(ucard)))
	shot("recovery")
	accessible("the recovery page")
	if q := text(ucard); !strings.Contains(q, unc.IdempotencyKey) || !strings.Contains(q, "resumed_without_record") {
		t.Errorf("the recovery card lacks the key or why recovery stopped:\n%s", q)
	}
	run("resolve", chromedp.Click(chromedp.CSS(ucard+` input[value=abandon]`)),
		chromedp.SendKeys(chromedp.CSS(ucard+` input[name=reason]`), "no PaymentIntent with this key at Stripe"),
		chromedp.Click(chromedp.CSS(ucard+" button.resolve-btn")),
		chromedp.WaitVisible(chromedp.ID("unfenced")))
	shot("resolved")
	accessible("the resolved execution page")
	if note := text("p.note"); !strings.Contains(note, "no longer fenced") {
		t.Errorf("after the resolve: %q", note)
	}
	if st := text("#status"); st != "abandoned" {
		t.Errorf("resolved call: %q", st)
	}
	run("sign out", signOut)

	// A runtime principal: no action form, and its POST is refused.
	var held host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s2", "tool_call_id": "c1", "tool": "payments.create_payment", "arguments": payArgs}, &held)
	if held.Status != host.StatusAwaitingApproval {
		t.Fatalf("second payment: %+v", held)
	}
	var unc2 host.Result
	apiCall(t, base, agentTok, "/v1/executions", map[string]any{"session_id": "s-old2", "tool_call_id": "c1", "tool": "payments.create_payment", "arguments": payArgs, "resumed": true}, &unc2)
	const actionForms = `String(document.querySelectorAll('form[action*="/approve"], form[action*="/reject"], form[action*="/resolve"]').length)`
	run("sign in as agent", signIn(agentTok), chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS("#"+held.Approval.ID)))
	shot("approvals-runtime")
	if n := eval(actionForms); n != "0" || !strings.Contains(text("#readonly"), "may not approve") {
		t.Errorf("the runtime principal's inbox holds %s action forms", n)
	}
	csrf := eval(`document.querySelector('input[name=csrf]').value`)
	run("recovery as agent", chromedp.Navigate(base+"/ui/recovery"), chromedp.WaitVisible(chromedp.CSS("#"+unc2.ExecutionID)))
	if n := eval(actionForms); n != "0" {
		t.Errorf("the runtime principal's recovery queue holds %s resolve forms", n)
	}
	cookies, err := chromedp.Run(br.ctx, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/ui/"}})
		return res.Cookies, err
	})
	if err != nil {
		br.fail("cookies", err)
	}
	post := func(path string, form url.Values) int {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for _, c := range cookies {
			req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/ui/approvals/"+held.Approval.ID+"/approve", url.Values{"csrf": {csrf}, "digest": {held.Approval.ArgsDigest}}); code != http.StatusForbidden {
		t.Errorf("the runtime principal's direct approve POST: %d, want 403", code)
	}
	if code := post("/ui/executions/"+unc2.ExecutionID+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"abandon"}, "reason": {"x"}}); code != http.StatusForbidden {
		t.Errorf("the runtime principal's direct resolve POST: %d, want 403", code)
	}
	// The same POST as a form the browser submits from the console's page.
	eval(fmt.Sprintf(`(() => { const f = document.createElement('form'); f.method = 'post';
		f.action = '/ui/approvals/%s/approve';
		for (const [k, v] of [['csrf', %q], ['digest', %q]]) { const i = document.createElement('input'); i.type = 'hidden'; i.name = k; i.value = v; f.appendChild(i); }
		document.body.appendChild(f); f.submit(); return "sent"; })()`, held.Approval.ID, csrf, held.Approval.ArgsDigest))
	run("runtime form post", chromedp.WaitVisible(chromedp.CSS("p.note.error")))
	shot("refused-runtime")
	accessible("the refused page")
	if note := text("p.note.error"); !strings.Contains(note, "needs role approver") {
		t.Errorf("the runtime principal's form post: %q", note)
	}
	run("sign out", chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.ID("principal")), signOut)

	// A form on another site posting to the console, with a valid CSRF
	// token even: refused, nothing decided.
	run("sign in as rita again", signIn(ritaTok), chromedp.Navigate(base+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS("#"+held.Approval.ID)))
	csrf = eval(`document.querySelector('input[name=csrf]').value`)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/ui/approvals/%s/approve">
<input type="hidden" name="csrf" value="%s"><input type="hidden" name="digest" value="%s"><button id="go">Claim your prize</button></form>`,
			base, held.Approval.ID, csrf, held.Approval.ArgsDigest)
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) // another site
	run("cross-site form post", chromedp.Navigate(evilURL), chromedp.WaitVisible(chromedp.ID("go")), chromedp.Click(chromedp.ID("go")),
		chromedp.WaitVisible(chromedp.CSS("p.note.error")))
	shot("refused-cross-site")
	if note := text("p.note.error"); !strings.Contains(note, "another site") {
		t.Errorf("the cross-site form post: %q", note)
	}
	var view host.ApprovalView
	apiCall(t, base, ritaTok, "/v1/approvals/"+held.Approval.ID, nil, &view)
	if view.Decision != "pending" {
		t.Fatalf("the cross-site form post decided: %s by %s", view.Decision, view.By)
	}

	// The server restarts: rita, signed in before, is still signed in
	// (the browser sends its cookie to the new process's port too).
	srv.stop(t)
	srv = serve()
	if si, err = readServerInfo(data); err != nil {
		t.Fatal(err)
	}
	run("after a restart", chromedp.Navigate(si.URL+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS("#"+held.Approval.ID)))
	if who := text("#principal"); who != "rita" {
		t.Errorf("after a restart the console names %q, want rita still signed in", who)
	}
	t.Logf("axe-core checked %d console pages for serious or critical violations", br.checked)
	t.Logf("screenshots in %s: %s", br.shotsDir(), strings.Join(br.saved, " "))
	srv.stop(t)
}
