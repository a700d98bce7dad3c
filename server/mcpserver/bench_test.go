package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCall compares one tool call (noop.echo, a read of the noop
// connector, new ids each time) over MCP's streamable HTTP at /mcp with
// the same call over the HTTP API's POST /v1/executions, alternating in
// the same run against the same server and ledger. It reports both
// latencies and their ratio (mcp/http).
func BenchmarkToolCall(b *testing.B) {
	f := newFixture(b, overHTTP)
	cs := f.client(clientOpts{})
	hc := bearerClient(tokenRuntime)
	ctx := context.Background()
	viaMCP := func(i int) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop.echo", Arguments: map[string]any{"msg": "hi"},
			Meta: ids("bench", fmt.Sprintf("mcp-%d", i))})
		if err != nil || res.IsError {
			b.Fatalf("mcp: %v %+v", err, res)
		}
	}
	viaHTTP := func(i int) {
		body := fmt.Sprintf(`{"session_id":"bench","tool_call_id":"http-%d","tool":"noop.echo","arguments":{"msg":"hi"}}`, i)
		req, _ := http.NewRequest("POST", f.srv.URL+"/v1/executions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("http: %d", resp.StatusCode)
		}
	}
	for i := range 20 { // warm both paths (pools, connections)
		viaMCP(-1 - i)
		viaHTTP(-1 - i)
	}
	var tMCP, tHTTP time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		viaMCP(i)
		mid := time.Now()
		viaHTTP(i)
		tMCP += mid.Sub(start)
		tHTTP += time.Since(mid)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tMCP.Microseconds())/n, "mcp-µs/call")
	b.ReportMetric(float64(tHTTP.Microseconds())/n, "http-µs/call")
	b.ReportMetric(float64(tMCP)/float64(tHTTP), "mcp/http")
}
