package console

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/connhost/connhost/host"
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
		for _, path := range []string{"/ui/approvals", "/ui/approvals?tool=keyed", "/ui/approvals?amount_min=50&amount_max=100",
			"/ui/approvals?principal=bot-a&amount_min=50&sort=newest&group=session"} {
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
