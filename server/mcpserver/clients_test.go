package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/server/mcpserver"
)

// TestMCPGoClient: mark3labs/mcp-go's client, set up as its simple_client
// example does (streamable HTTP, initialize asking for the latest
// protocol), connects to /mcp, lists the tools and calls one with the
// ids in _meta. Its client tries server/discover first and gives up for
// good when the answer lists no protocol it can speak statelessly; /mcp
// (stateful, up to 2025-11-25) must answer server/discover as a server
// without it does, so that the client falls back to initialize.
func TestMCPGoClient(t *testing.T) {
	f := newFixture(t, overHTTP)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr, err := mcpgotransport.NewStreamableHTTP(f.srv.URL+"/mcp",
		mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tokenRuntime}))
	require.NoError(t, err)
	c := mcpgoclient.NewClient(tr)
	defer c.Close()

	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "connhost-test", Version: "1.0.0"}
	init.Params.Capabilities = mcpgo.ClientCapabilities{}
	info, err := c.Initialize(ctx, init)
	require.NoError(t, err)
	require.Equal(t, "connhost", info.ServerInfo.Name)
	require.NotNil(t, info.Capabilities.Tools)
	require.NoError(t, c.Ping(ctx))

	tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	require.Contains(t, names, "noop_echo")

	call := mcpgo.CallToolRequest{}
	call.Params.Name = "noop_echo"
	call.Params.Arguments = map[string]any{"msg": "from mcp-go"}
	call.Params.Meta = &mcpgo.Meta{AdditionalFields: map[string]any{
		mcpserver.MetaSessionID: "s-mcpgo", mcpserver.MetaToolCallID: "call_1"}}
	res, err := c.CallTool(ctx, call)
	require.NoError(t, err)
	require.False(t, res.IsError)
	var out mcpserver.Result
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out))
	require.Equal(t, "succeeded", out.Status)
	require.Equal(t, "s-mcpgo", out.SessionID)
	require.Equal(t, "call_1", out.ToolCallID)

	// The same ids again: the recorded outcome, nothing done again.
	res, err = c.CallTool(ctx, call)
	require.NoError(t, err)
	b, _ = json.Marshal(res.StructuredContent)
	var again mcpserver.Result
	require.NoError(t, json.Unmarshal(b, &again))
	require.Equal(t, out.ExecutionID, again.ExecutionID)
	require.True(t, again.Recorded)
}

// TestGoSDKDefaultClient: the official Go SDK's client with its default
// initialisation (no protocol version asked for: it probes
// server/discover at its latest version first) connects to /mcp and
// calls a tool; so does one that asks for 2025-11-25 explicitly.
func TestGoSDKDefaultClient(t *testing.T) {
	f := newFixture(t, overHTTP)
	for _, version := range []string{"", legacy} {
		t.Run("version="+version, func(t *testing.T) {
			c := mcp.NewClient(&mcp.Implementation{Name: "connhost-test", Version: "0"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var so *mcp.ClientSessionOptions
			if version != "" {
				so = &mcp.ClientSessionOptions{ProtocolVersion: version}
			}
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.srv.URL + "/mcp", HTTPClient: bearerClient(tokenRuntime)}, so)
			require.NoError(t, err)
			defer cs.Close()
			require.Equal(t, "connhost", cs.InitializeResult().ServerInfo.Name)
			res, out := callTool(t, cs, "noop_echo", map[string]any{"msg": "hi"}, ids("s-gosdk", "call-"+version))
			require.False(t, res.IsError, text(res))
			require.Equal(t, "succeeded", out.Status)
		})
	}
}
