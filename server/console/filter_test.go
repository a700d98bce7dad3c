package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// fakeClock is the executor's clock in the filter tests: each call begins
// waiting at a known minute.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

var groupRE = regexp.MustCompile(`<h2 class="session-group">Session ([^ <]+) <small>· namespace [^ ]+ · (\d+) calls?(, continued from the previous page)?</small></h2>`)

// filterCall is one call of the filter tests and what the filters should
// find of it.
type filterCall struct {
	i         int
	approval  string
	exec      string
	principal string
	session   string
	tool      string
	amount    int // minor units; 0: none
	currency  string
	began     time.Time
}

// seedFilterCalls records n gated calls, call i at base+i minutes: made by
// bot-a (even i) or bot-b (odd), in session sess-a, sess-b or sess-c
// (i%3); every fourth a gated.keyed call with no amount (approval_ttl 2h,
// so it expires after every echo call), the others gated.echo for
// (i+1)*10.00 USD, or EUR when i%5 == 0.
func seedFilterCalls(t *testing.T, e *env, clock *fakeClock, base time.Time, n int) []filterCall {
	t.Helper()
	var calls []filterCall
	for i := range n {
		fc := filterCall{i: i, principal: []string{"bot-a", "bot-b"}[i%2], session: []string{"sess-a", "sess-b", "sess-c"}[i%3],
			tool: "gated.echo", amount: (i + 1) * 1000, currency: "usd", began: base.Add(time.Duration(i) * time.Minute)}
		if i%5 == 0 {
			fc.currency = "eur"
		}
		args := fmt.Sprintf(`{"amount":%d,"currency":%q}`, fc.amount, fc.currency)
		if i%4 == 3 {
			fc.tool, fc.amount, fc.currency, args = "gated.keyed", 0, "", fmt.Sprintf(`{"doc":"d-%d"}`, i)
		}
		clock.set(fc.began)
		ctx := host.WithScope(context.Background(), host.Scope{Principal: fc.principal})
		res, err := e.ex.Execute(ctx, host.ToolCall{SessionID: fc.session, ToolCallID: fmt.Sprintf("c-%03d", i), Tool: fc.tool, Arguments: json.RawMessage(args)})
		if err != nil || res.Approval == nil {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
		fc.approval, fc.exec = res.Approval.ID, res.ExecutionID
		calls = append(calls, fc)
	}
	return calls
}

func idsOf(calls []filterCall) []string {
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.approval)
	}
	return ids
}

func where(calls []filterCall, keep func(filterCall) bool) []filterCall {
	var out []filterCall
	for _, c := range calls {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// TestApprovalsFilters: each filter of the Approvals page keeps exactly
// the calls it names, in the order asked, page after page; the filter
// stays in the page's links and form, and in the page a decision returns
// to; an amount range leaves out the calls without an amount and says
// how many; a parameter the page cannot read is refused with every
// reason at once.
func TestApprovalsFilters(t *testing.T) {
	clock := &fakeClock{}
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	e := newEnvHost(t, nil, principals, nil, false, nil, func(o *host.Options) { o.Now = clock.Now })
	calls := seedFilterCalls(t, e, clock, base, 120)
	c := e.browser(t)
	e.signIn(t, c, ritaTok)

	keyed := func(fc filterCall) bool { return fc.tool == "gated.keyed" }
	// gated.echo's approval_ttl is 1h, gated.keyed's 2h.
	expiry := func(fc filterCall) time.Time {
		if keyed(fc) {
			return fc.began.Add(2 * time.Hour)
		}
		return fc.began.Add(time.Hour)
	}
	byExpiry := slices.Clone(calls)
	slices.SortFunc(byExpiry, func(a, b filterCall) int {
		return cmp.Or(expiry(a).Compare(expiry(b)), cmp.Compare(a.exec, b.exec))
	})
	newest := slices.Clone(calls)
	slices.Reverse(newest)
	var grouped []filterCall
	for _, s := range []string{"sess-a", "sess-b", "sess-c"} {
		grouped = append(grouped, where(byExpiry, func(fc filterCall) bool { return fc.session == s })...)
	}
	inAmount := func(fc filterCall) bool { return fc.currency == "usd" && fc.amount >= 30_00 && fc.amount <= 600_00 }

	for _, tc := range []struct {
		name, query string
		want        []filterCall
	}{
		{"every call, soonest expiry first", "", byExpiry},
		{"principal who asked", "principal=bot-a", where(byExpiry, func(fc filterCall) bool { return fc.principal == "bot-a" })},
		{"began waiting from–before", "from=2026-03-01T09:03&to=2026-03-01T09:45",
			where(byExpiry, func(fc filterCall) bool { return fc.i >= 3 && fc.i < 45 })},
		{"amount range in USD: EUR calls left out", "currency=USD&amount_min=30&amount_max=600.00", where(byExpiry, inAmount)},
		{"currency alone, in any case", "currency=eur", where(byExpiry, func(fc filterCall) bool { return fc.currency == "eur" })},
		{"amount and principal and session", "currency=usd&amount_min=30&amount_max=600&principal=bot-b&session=sess-c",
			where(byExpiry, func(fc filterCall) bool { return inAmount(fc) && fc.principal == "bot-b" && fc.session == "sess-c" })},
		{"longest waiting first", "sort=oldest", calls},
		{"newest first", "sort=newest", newest},
		{"newest first, filtered", "sort=newest&tool=keyed", where(newest, keyed)},
		{"grouped by session", "group=session", grouped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/ui/approvals"
			if tc.query != "" {
				path += "?" + tc.query
			}
			ids, _, _ := e.inboxPages(t, c, path)
			if want := idsOf(tc.want); !slices.Equal(ids, want) {
				t.Fatalf("%s shows %d calls over its pages, want %d in this order:\n got %v\nwant %v", path, len(ids), len(want), ids, want)
			}
			// The filter stays in the form, the next link and the page a
			// decision returns to.
			_, page, _ := e.get(t, c, path)
			q, _ := url.ParseQuery(tc.query)
			for k, vs := range q {
				if k == "sort" {
					if !strings.Contains(page, fmt.Sprintf(`<option value=%q selected>`, vs[0])) {
						t.Errorf("the form does not keep sort=%s", vs[0])
					}
					continue
				}
				if k == "group" {
					if !strings.Contains(page, `name="group" value="session" checked`) {
						t.Error("the form does not keep group=session")
					}
					continue
				}
				want := vs[0]
				if k == "currency" {
					want = strings.ToUpper(want) // read as the code it is
				}
				if !strings.Contains(page, fmt.Sprintf(`name=%q value=%q`, k, want)) {
					t.Errorf("the form does not keep %s=%s", k, want)
				}
			}
			if m := nextRE.FindStringSubmatch(page); m != nil {
				next, _ := url.Parse(html.UnescapeString(m[1]))
				for k, vs := range q {
					if got := next.Query().Get(k); got != vs[0] && (k != "currency" || got != strings.ToUpper(vs[0])) {
						t.Errorf("the next link %s drops %s=%s", next, k, vs[0])
					}
				}
			}
		})
	}

	// Grouped: each session's heading once, the count of its calls, and
	// "continued" where a session runs over from the previous page.
	var heads []string
	for path, pages := "/ui/approvals?group=session", 0; path != ""; pages++ {
		_, page, _ := e.get(t, c, path)
		for _, m := range groupRE.FindAllStringSubmatch(page, -1) {
			heads = append(heads, m[1]+" "+m[2]+m[3])
		}
		path = ""
		if m := nextRE.FindStringSubmatch(page); m != nil {
			path = html.UnescapeString(m[1])
		}
	}
	wantHeads := []string{"sess-a 40", "sess-b 40", "sess-b 40, continued from the previous page", "sess-c 40", "sess-c 40, continued from the previous page"}
	if !slices.Equal(heads, wantHeads) {
		t.Errorf("group headings %q, want %q", heads, wantHeads)
	}

	// The amount range says how many calls it left out for having none
	// in its currency: those without an amount, and those in EUR.
	_, page, _ := e.get(t, c, "/ui/approvals?currency=USD&amount_min=1&sort=oldest")
	noUSD := where(calls, func(fc filterCall) bool { return fc.currency != "usd" })
	if want := fmt.Sprintf(`<p class="hint" id="inbox-noamount">%d calls read have no amount in USD`, len(noUSD)); !strings.Contains(page, want) {
		t.Errorf("amount range: the page does not say %q", want)
	}

	// A decision returns to the list as it was filtered, sorted and paged.
	path := "/ui/approvals?principal=bot-b&sort=newest"
	_, page, _ = e.get(t, c, path)
	first := cardRE.FindStringSubmatch(page)[1]
	code, _, hdr := e.post(t, c, "/ui/approvals/"+first+"/reject", url.Values{"csrf": {csrfOf(t, page)}, "reason": {"no"}, "back": {"/ui/approvals?principal=bot-b&sort=newest"}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != path {
		t.Errorf("reject from %s: %d → %q, want back to the filtered page", path, code, hdr.Get("Location"))
	}
	if !strings.Contains(page, `name="back" value="`+html.EscapeString("/ui/approvals?principal=bot-b&sort=newest")+`"`) {
		t.Error("the card's forms do not return to the filtered, sorted page")
	}

	// A page continued after a call decided since starts at the same place.
	ids, _, _ := e.inboxPages(t, c, "/ui/approvals?sort=newest")
	if want := idsOf(where(newest, func(fc filterCall) bool { return fc.approval != first })); !slices.Equal(ids, want) {
		t.Errorf("after the decision, sort=newest shows %d calls, want the %d left", len(ids), len(want))
	}

	// The cards a first page's script shows without a reload are read
	// under its whole filter too.
	since := base.Add(100 * time.Minute).UnixNano()
	_, page, _ = e.get(t, c, fmt.Sprintf("/ui/approvals/new/cards?since=%d&principal=bot-a&currency=USD&amount_min=1", since))
	wantNew := idsOf(where(calls, func(fc filterCall) bool { return fc.i > 100 && fc.principal == "bot-a" && fc.currency == "usd" }))
	if got := cardRE.FindAllStringSubmatch(page, -1); len(got) != len(wantNew) {
		t.Errorf("new cards under principal=bot-a&currency=USD&amount_min=1: %d, want %d", len(got), len(wantNew))
	}
	if _, page, _ := e.get(t, c, "/ui/approvals?principal=bot-a&sort=newest"); !strings.Contains(page, html.EscapeString("/ui/approvals/new/cards?principal=bot-a&since=")) {
		t.Error("the first page's script does not read new cards under the page's filter")
	}

	// Executions refuse a time range that holds no time, as Approvals do,
	// rather than list nothing as if no call had been made then.
	if code, page, _ := e.get(t, c, "/ui/executions?from=2026-03-01T10:00&to=2026-03-01T09:00"); code != http.StatusBadRequest ||
		!strings.Contains(page, "from 2026-03-01T10:00 is not before to 2026-03-01T09:00: no call can match") {
		t.Errorf("executions with from after to: %d, want 400 saying no call can match", code)
	}
	// Executions: by principal, who asked (with a state) or who decided.
	_, page, _ = e.get(t, c, "/ui/executions?principal=bot-a&state=awaiting_approval")
	if n, want := strings.Count(page, `<td data-label="execution"`), len(where(calls, func(fc filterCall) bool { return fc.principal == "bot-a" })); n != want {
		t.Errorf("executions?principal=bot-a&state=awaiting_approval lists %d, want the %d bot-a asked for", n, want)
	}
	rejected, _ := ledger.ExecutionIDOfApproval(first)
	_, page, _ = e.get(t, c, "/ui/executions?principal=rita")
	if n := strings.Count(page, `<td data-label="execution"`); n != 1 || !strings.Contains(page, `href="/ui/executions/`+rejected+`"`) {
		t.Errorf("executions?principal=rita lists %d, want the one call rita rejected", n)
	}

	// Parameters the page cannot read: every reason at once, 400.
	code, page, _ = e.get(t, c, "/ui/approvals?from=yesterday&amount_min=1e9&amount_max=-5&sort=sideways&group=tool&currency=dollars")
	if code != http.StatusBadRequest {
		t.Errorf("bad filter: %d, want 400", code)
	}
	for _, want := range []string{`from &#34;yesterday&#34;: want YYYY-MM-DDTHH:MM (UTC)`, `amount from &#34;1e9&#34;: want a number`, `amount to &#34;-5&#34;: want a number`,
		`sort &#34;sideways&#34;: want expiry, oldest or newest`, `group &#34;tool&#34;: want session`,
		`currency &#34;DOLLARS&#34;: want a three-letter code such as USD`} {
		if !strings.Contains(page, want) {
			t.Errorf("bad filter: the page does not say %q", want)
		}
	}
	if _, page, _ := e.get(t, c, "/ui/approvals?currency=USD&amount_min=50&amount_max=10"); !strings.Contains(page, "amount from 50 is above amount to 10") {
		t.Error("an empty amount range is not refused")
	}
	// Amounts of different currencies do not compare: a range names one.
	if code, page, _ := e.get(t, c, "/ui/approvals?amount_max=500"); code != http.StatusBadRequest || !strings.Contains(page, "an amount range needs a currency") {
		t.Errorf("amount range without a currency: %d, want 400 saying it needs one", code)
	}
}

// TestRecoveryFilters: the recovery queue filters by principal and by
// when a call last changed, sorts newest first, groups by session across
// pages, and each card links to the provider's search for the call (the
// manifest's provider.search, filled and escaped), as does the call's own
// page.
func TestRecoveryFilters(t *testing.T) {
	clock := &fakeClock{}
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	e := newEnvHost(t, nil, principals, nil, false, nil, func(o *host.Options) { o.Now = clock.Now })
	type stuck struct {
		exec, key, principal, session string
		i                             int
	}
	// A recovery_required call fences its session, which refuses new
	// calls: a session's first is a resumed call the executor records,
	// its others are recorded in the ledger beside it, as a crash leaves
	// several calls of a session uncertain.
	var all []stuck
	firsts := map[string]ledger.Record{}
	firstEv := map[string]ledger.Event{}
	led := e.ex.Ledger()
	for i := range 70 {
		at := base.Add(time.Duration(i) * time.Minute)
		clock.set(at)
		p := []string{"bot-a", "bot-b"}[i%2]
		session := fmt.Sprintf("stuck-%d", i%4)
		tc := fmt.Sprintf("c%02d", i)
		first, ok := firsts[session]
		if !ok {
			ctx := host.WithScope(context.Background(), host.Scope{Principal: p})
			res, err := e.ex.Execute(ctx, host.ToolCall{SessionID: session, ToolCallID: tc, Tool: "noop.echo", Arguments: json.RawMessage(`{"msg":"x"}`), Resumed: true})
			if err != nil || res.Status != host.StatusRecoveryRequired {
				t.Fatalf("resumed call %d: %+v %v", i, res, err)
			}
			rec, evs, err := e.ex.Get(context.Background(), res.ExecutionID)
			if err != nil {
				t.Fatal(err)
			}
			firsts[session], firstEv[session] = rec, evs[0]
			all = append(all, stuck{exec: rec.ID, key: rec.IdempotencyKey, principal: p, session: session, i: i})
			continue
		}
		rec, ev := first, firstEv[session]
		rec.ID = ledger.ExecutionID(rec.Namespace, session, tc)
		rec.ToolCallID, rec.RequestedBy, rec.CreatedAt, rec.UpdatedAt = tc, p, at, at
		rec.IdempotencyKey = ledger.IdempotencyKey(rec.Namespace, rec.Connector, rec.ID)
		ev.ExecutionID, ev.ToolCallID, ev.Time = rec.ID, tc, at
		if _, err := led.Create(context.Background(), rec, ev); err != nil {
			t.Fatalf("record call %d: %v", i, err)
		}
		all = append(all, stuck{exec: rec.ID, key: rec.IdempotencyKey, principal: p, session: session, i: i})
	}
	c := e.browser(t)
	e.signIn(t, c, olgaTok)
	pages := func(path string) (ids []string, heads []string, first string) {
		for n := 0; path != ""; n++ {
			if n > 10 {
				t.Fatalf("%s: the next links do not end", path)
			}
			code, page, _ := e.get(t, c, path)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d", path, code)
			}
			if n == 0 {
				first = page
			}
			for _, m := range recoveryCardRE.FindAllStringSubmatch(page, -1) {
				ids = append(ids, m[1])
			}
			for _, m := range groupRE.FindAllStringSubmatch(page, -1) {
				heads = append(heads, m[1]+" "+m[2]+m[3])
			}
			path = ""
			if m := recoveryNextRE.FindStringSubmatch(page); m != nil {
				path = html.UnescapeString(m[1])
			}
		}
		return ids, heads, first
	}
	execs := func(ss []stuck) []string {
		var ids []string
		for _, s := range ss {
			ids = append(ids, s.exec)
		}
		return ids
	}
	keep := func(f func(stuck) bool) []stuck {
		var out []stuck
		for _, s := range all {
			if f(s) {
				out = append(out, s)
			}
		}
		return out
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	var grouped []stuck
	for g := range 4 {
		for _, s := range newest {
			if s.session == fmt.Sprintf("stuck-%d", g) {
				grouped = append(grouped, s)
			}
		}
	}
	for _, tc := range []struct {
		name, query string
		want        []stuck
	}{
		{"least recently changed first", "", all},
		{"principal", "principal=bot-b", keep(func(s stuck) bool { return s.principal == "bot-b" })},
		{"changed from–before", "from=2026-03-01T09:10&to=2026-03-01T09:20", keep(func(s stuck) bool { return s.i >= 10 && s.i < 20 })},
		{"most recently changed first", "sort=newest", newest},
		{"grouped, newest first", "group=session&sort=newest", grouped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, _, _ := pages("/ui/recovery?" + tc.query)
			if want := execs(tc.want); !slices.Equal(ids, want) {
				t.Fatalf("recovery?%s shows %v, want %v", tc.query, ids, want)
			}
		})
	}
	_, heads, _ := pages("/ui/recovery?group=session")
	if want := []string{"stuck-0 18", "stuck-1 18", "stuck-2 17", "stuck-2 17, continued from the previous page", "stuck-3 17"}; !slices.Equal(heads, want) {
		t.Errorf("recovery group headings %q, want %q", heads, want)
	}
	// A filter narrows the calls listed, not what fences a session: a
	// fenced session the filtered page names lists every recovery_required
	// call of it ("refused until every call listed is resolved" must hold),
	// here stuck-0's 18 calls though the time range keeps 3 of them.
	_, page, _ := e.get(t, c, "/ui/recovery?from=2026-03-01T09:10&to=2026-03-01T09:20")
	fenced := regexp.MustCompile(`<li>session <a [^>]*>stuck-0</a>[^<]*:((?: <a href="/ui/executions/ex_[a-z0-9]+">ex_[a-z0-9]+</a>)+)`).FindStringSubmatch(page)
	if fenced == nil {
		t.Fatal("the filtered recovery page lists no fenced session stuck-0")
	}
	var listed []string
	for _, m := range regexp.MustCompile(`>(ex_[a-z0-9]+)<`).FindAllStringSubmatch(fenced[1], -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	fences := execs(keep(func(s stuck) bool { return s.session == "stuck-0" }))
	slices.Sort(fences)
	if !slices.Equal(listed, fences) {
		t.Errorf("a filtered page lists %d calls as fencing session stuck-0, want all its %d recovery_required calls:\n got %v\nwant %v", len(listed), len(fences), listed, fences)
	}

	// noop.echo declares no money: an amount range keeps none, and says so.
	if _, page, _ := e.get(t, c, "/ui/recovery?currency=USD&amount_min=0"); !strings.Contains(page, `id="recovery-noamount">70 calls have no amount in USD`) || recoveryCardRE.MatchString(page) {
		t.Error("an amount range over calls without amounts does not say why it shows none")
	}
	if code, page, _ := e.get(t, c, "/ui/recovery?sort=expiry"); code != http.StatusBadRequest || !strings.Contains(page, "sort &#34;expiry&#34;: want oldest or newest") {
		t.Errorf("recovery?sort=expiry: %d, want 400 saying the orders it has", code)
	}

	// The provider's search, on the card and on the call's page.
	s := all[0]
	link := html.EscapeString("https://provider.example/search?q=metadata%5Bexec%5D%3A" + s.exec + "&key=" + s.key)
	want := `<a href="` + link + `" rel="noreferrer noopener" class="provider-search">Search Noop Provider for this call</a>`
	if _, _, first := pages("/ui/recovery"); !strings.Contains(first, want) {
		t.Errorf("the recovery card does not link to the provider's search:\nwant %s", want)
	}
	if _, page, _ := e.get(t, c, "/ui/executions/"+s.exec); !strings.Contains(page, want) {
		t.Errorf("the call's page does not link to the provider's search")
	}
}

// TestProviderSearchRefusedAtLoad: a manifest whose provider.search has a
// placeholder other than {execution_id} and {key} does not load, and the
// error names the file and line.
func TestProviderSearchRefusedAtLoad(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("testdata/manifests/noop.toml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "&key={key}", "&session={session_id}", 1)
	path := filepath.Join(dir, "noop.toml")
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	line := 1 + strings.Count(bad[:strings.Index(bad, "search = ")], "\n")
	_, err = manifests.LoadDir(dir)
	if want := fmt.Sprintf(`%s:%d: provider.search: "{session_id}": the only placeholders are {execution_id} and {key}`, path, line); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("LoadDir = %v, want an error saying %q", err, want)
	}
}

// TestOrderedPageSaysWhereItStopped: a sorted page reads at most maxScan
// waiting calls, soonest expiry first, sorts those and says it stopped;
// the calls it did not read are not on any of its pages.
func TestOrderedPageSaysWhereItStopped(t *testing.T) {
	old := maxScan
	maxScan = 40
	t.Cleanup(func() { maxScan = old })
	clock := &fakeClock{}
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	e := newEnvHost(t, nil, principals, nil, false, nil, func(o *host.Options) { o.Now = clock.Now })
	calls := seedFilterCalls(t, e, clock, base, 60)
	c := e.browser(t)
	e.signIn(t, c, ritaTok)
	// Every echo call expires (1h) before every keyed one (2h) here: the
	// 40 read are the 45 echo calls' first 40, shown newest first.
	echo := where(calls, func(fc filterCall) bool { return fc.tool == "gated.echo" })[:40]
	slices.Reverse(echo)
	ids, _, _ := e.inboxPages(t, c, "/ui/approvals?sort=newest")
	if want := idsOf(echo); !slices.Equal(ids, want) {
		t.Errorf("sort=newest under a bound of 40 shows %v, want %v", ids, want)
	}
	_, page, _ := e.get(t, c, "/ui/approvals?sort=newest")
	if !strings.Contains(page, `<p class="hint" id="inbox-budget">Read the 40 waiting calls that expire soonest and stopped`) {
		t.Error("the sorted page does not say it stopped reading")
	}
}
