package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/server/mcpserver"
)

// bearerRT adds a principal's token to every request of an MCP client.
type bearerRT string

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestConsoleLinkThroughServe: the link of a URL-mode elicitation
// (mcpserver.Options.ConsoleURL) is under [server] public_url, else under
// the URL Serve listens at, and names the call's execution page of the
// console; the go-sdk client that declared URL mode receives it.
func TestConsoleLinkThroughServe(t *testing.T) {
	const tok = "tok-runtime-0123456789"
	for _, tt := range []struct {
		name, config, base string
	}{
		{"listen-url", "", ""},
		{"public-url", "public_url = \"https://connhost.example.test\"\n", "https://connhost.example.test"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, newTestDirs(t), tt.config+`
[[principals]]
name = "runtime"
roles = ["runtime"]
token_env = "T_RUNTIME"
`, map[string]string{"T_RUNTIME": tok})
			url, _ := serve(t, cfg, Options{})
			base := tt.base
			if base == "" {
				base = url
			}
			sent := make(chan *mcp.ElicitParams, 1)
			c := mcp.NewClient(&mcp.Implementation{Name: "link-test", Version: "0"}, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					sent <- req.Params
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearerRT(tok)}},
				&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gated.echo", Arguments: map[string]any{"msg": "hi"},
				Meta: mcp.Meta{mcpserver.MetaSessionID: "s-link", mcpserver.MetaToolCallID: "c1"}})
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Status      string `json:"status"`
				ExecutionID string `json:"execution_id"`
			}
			b, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &out); err != nil || out.Status != "awaiting_approval" {
				t.Fatalf("want awaiting_approval, got %+v", res.StructuredContent)
			}
			select {
			case p := <-sent:
				if want := base + mcpserver.ConsolePage + out.ExecutionID; p.URL != want || p.Mode != "url" {
					t.Errorf("link %q (mode %q), want %q", p.URL, p.Mode, want)
				}
				if strings.Contains(p.URL, tok) {
					t.Errorf("the link carries the token: %s", p.URL)
				}
			default:
				t.Fatal("the call answered without sending a link")
			}
		})
	}
}
