package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
	"github.com/connhost/connhost/server/httpapi"
)

// BenchmarkInboxFirstPage: the inbox's first page, and a filtered one,
// with 100 and with 10,000 calls awaiting approval. A page reads its 50
// calls and the approval index's count, so its time should not grow with
// what waits. A tool filter reads the listing until its 50: the keyed
// calls (one in five, approval_ttl 2h) expire after every echo call (1h),
// so with 10,000 waiting it reads some 8,250 calls (maxScan bounds it).
// An amount range reads the listing until its 50 too, parsing each
// call's arguments; newest first and grouped by session, with a principal
// and an amount range, reads every waiting call (maxScan bounds it) and
// sorts what it keeps: the cost a sorted page pays over the default.
// Run with -bench InboxFirstPage -benchtime 20x.
func BenchmarkInboxFirstPage(b *testing.B) {
	for _, waiting := range []int{100, 10000} {
		e := newEnv(b, principals, nil, false)
		ctx := context.Background()
		for i := range waiting {
			tool, args := "gated.echo", fmt.Sprintf(`{"amount":%d,"currency":"usd"}`, i+1)
			if i%5 == 0 {
				tool, args = "gated.keyed", fmt.Sprintf(`{"doc":"d-%d"}`, i)
			}
			ctx := host.WithScope(ctx, host.Scope{Principal: []string{"bot-a", "bot-b"}[i%2]})
			if _, err := e.ex.Execute(ctx, host.ToolCall{SessionID: fmt.Sprintf("s-%d", i%20), ToolCallID: fmt.Sprintf("c-%05d", i), Tool: tool, Arguments: json.RawMessage(args)}); err != nil {
				b.Fatal(err)
			}
		}
		c := e.browser(b)
		e.signIn(b, c, ritaTok)
		for _, path := range []string{"/ui/approvals", "/ui/approvals?tool=keyed", "/ui/approvals?currency=USD&amount_min=50&amount_max=100",
			"/ui/approvals?principal=bot-a&currency=USD&amount_min=50&sort=newest&group=session"} {
			b.Run(fmt.Sprintf("waiting=%d/%s", waiting, path[len("/ui/"):]), func(b *testing.B) {
				size := 0
				for b.Loop() {
					code, page, _ := e.get(b, c, path)
					if code != 200 {
						b.Fatalf("GET %s: %d", path, code)
					}
					size = len(page)
				}
				b.ReportMetric(float64(size)/1024, "KB/page")
			})
		}
	}
}

// BenchmarkSessionCheck is what checking a signed-in session costs per
// console request: "cookie" is the cookie's MAC alone (verify, all a
// request cost before sessions were kept in the ledger); "ledger=pebble"
// and "ledger=postgres" are the whole check (current: the MAC, then the
// session's row read from the ledger), on the Pebble ledger on disk and on
// a PostgreSQL database on this machine; "page" is the inbox page with the
// check, for scale. Run with -bench SessionCheck.
func BenchmarkSessionCheck(b *testing.B) {
	var opts Options
	e := newEnvWith(b, principals, nil, false, func(co *Options, _ *httpapi.Options) { opts = *co })
	c := e.browser(b)
	e.signIn(b, c, ritaTok)
	var value string
	u, _ := url.Parse(e.srv.URL + "/ui/")
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == sessionCookie {
			value = ck.Value
		}
	}
	req := httptest.NewRequest("GET", "/ui/approvals", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: value})
	b.Run("cookie", func(b *testing.B) {
		for b.Loop() {
			if _, ok := verify(e.ui.creds, value, time.Now()); !ok {
				b.Fatal("refused")
			}
		}
	})
	check := func(b *testing.B, ui *console) {
		for b.Loop() {
			if _, err := ui.current(nil, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("ledger=pebble", func(b *testing.B) { check(b, e.ui) })
	b.Run("ledger=postgres", func(b *testing.B) {
		pg, err := pgledger.Open(context.Background(), pgledger.Options{DSN: testenv.NewPostgresDatabase(b), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer pg.Close()
		o := opts
		o.Sessions = pg
		ui, err := newConsole(o)
		if err != nil {
			b.Fatal(err)
		}
		id := strings.Split(value, ".")[1]
		now := time.Now()
		if err := pg.AddConsoleSession(context.Background(), ledger.ConsoleSession{Key: ledger.ConsoleSessionKey(id), Principal: "rita",
			Created: now, Expires: now.Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
		check(b, ui)
	})
	b.Run("page", func(b *testing.B) {
		for b.Loop() {
			if code, _, _ := e.get(b, c, "/ui/approvals"); code != http.StatusOK {
				b.Fatalf("GET: %d", code)
			}
		}
	})
}
