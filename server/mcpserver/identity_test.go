package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/mcpserver"
	"github.com/connhost/connhost/server/tooldefs"
)

// TestRecipeRefNamesAPage: the page the identity_required refusal and the
// per-request warning send integrators to exists and explains the _meta
// ids they must pass.
func TestRecipeRefNamesAPage(t *testing.T) {
	page, _, _ := strings.Cut(mcpserver.RecipeRef, " ")
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(page)))
	require.NoError(t, err, "RecipeRef names %s", page)
	for _, want := range []string{"## MCP", mcpserver.MetaSessionID, mcpserver.MetaToolCallID, "### Runtime recipes"} {
		require.Contains(t, string(b), want, "%s", page)
	}
}

// TestRuntimeToolCallID: a runtime that sends its own tool-call id in
// _meta (Claude Code's "claudecode/toolUseId") gets a stable identity
// without knowing connhost: the session of its MCP connection (it names
// no conversation here), or the session it names; the same id again is
// the same call, and the audit trail says where the ids came from.
func TestRuntimeToolCallID(t *testing.T) {
	eachTransport(t, func(t *testing.T, kind transport) {
		f := newFixture(t, kind)
		cs := f.client(clientOpts{env: []string{"CLAUDE_CODE_SESSION_ID="}})
		args := map[string]any{"msg": "a"}
		meta := mcp.Meta{"claudecode/toolUseId": "toolu_01AbCdEf" + string(kind)}
		res, out := callTool(t, cs, "plain_echo", args, meta)
		require.False(t, res.IsError, text(res))
		require.Equal(t, mcpserver.IdentityRuntime, out.Identity)
		if kind == overHTTP {
			// The SDK's default client speaks 2026-07-28 statelessly:
			// no connection, so the call is a session of its own.
			require.Equal(t, mcpserver.CallSession("runtime", "toolu_01AbCdEfhttp"), out.SessionID)
			require.Contains(t, out.IdentitySource, "a session of its own")
		} else {
			require.True(t, strings.HasPrefix(out.SessionID, mcpserver.DefaultSession(mcpserver.DefaultStdioActor, "")), out.SessionID)
			require.Contains(t, out.IdentitySource, "this MCP connection")
		}
		require.Equal(t, "toolu_01AbCdEf"+string(kind), out.ToolCallID)
		require.Contains(t, out.IdentitySource, "claudecode/toolUseId")
		require.NotContains(t, text(res), "Warning")
		_, again := callTool(t, cs, "plain_echo", args, meta)
		require.True(t, again.Recorded, "the same runtime id is the same call")
		require.Equal(t, out.ExecutionID, again.ExecutionID)

		// With a session named, that session holds the call.
		named := mcp.Meta{"claudecode/toolUseId": "toolu_02", mcpserver.MetaSessionID: "s-named"}
		_, inNamed := callTool(t, cs, "plain_echo", args, named)
		require.Equal(t, ledger.ExecutionID(ledger.DefaultNamespace, "s-named", "toolu_02"), inNamed.ExecutionID)

		// connhost's own key wins over the runtime's.
		both := mcp.Meta{"claudecode/toolUseId": "toolu_03", mcpserver.MetaSessionID: "s-both", mcpserver.MetaToolCallID: "c-own"}
		_, own := callTool(t, cs, "plain_echo", args, both)
		require.Equal(t, mcpserver.IdentityClient, own.Identity)
		require.Equal(t, "c-own", own.ToolCallID)

		// Never from the arguments: the key inside them is refused by the
		// schema, not taken.
		res, bad := callTool(t, cs, "noop_echo", map[string]any{"claudecode/toolUseId": "toolu_x"}, nil)
		require.True(t, res.IsError)
		require.NotEqual(t, "toolu_x", bad.ToolCallID)

		require.NoError(t, cs.Close())
		require.Contains(t, f.events(out.ExecutionID)[0].Reason, "claudecode/toolUseId")
		require.Contains(t, f.events(out.ExecutionID)[0].Reason, "claudecode/toolUseId (Claude Code's tool-call id, unique across sessions) in ")
		require.Contains(t, f.events(own.ExecutionID)[0].Reason, "_meta io.connhost/session_id and io.connhost/tool_call_id")
	})
}

// TestPerRequestPolicy: a side-effecting call without a stable identity
// is refused where the deployment says so (serve's default), naming what
// to pass; runs with a warning in the result and one in the log where it
// does not (dev, connhost mcp without a config); and runs, saying so in
// every result, where the deployment allows it. A read runs in every
// case.
func TestPerRequestPolicy(t *testing.T) {
	args := map[string]any{"msg": "a"}
	t.Run("refuse", func(t *testing.T) {
		f := newFixture(t, overHTTP, fixtureOpts{mcp: func(o *mcpserver.Options) { o.PerRequest = mcpserver.PerRequestRefuse }})
		cs := f.client(clientOpts{})
		res, out := callTool(t, cs, "plain_echo", args, nil)
		require.True(t, res.IsError)
		require.Equal(t, mcpserver.CodeIdentityRequired, out.Code)
		require.Empty(t, out.ExecutionID)
		for _, want := range []string{mcpserver.MetaSessionID, mcpserver.MetaToolCallID, "claudecode/toolUseId", "docs/runtimes.md", "Nothing was done", "Do not issue this call again"} {
			require.Contains(t, text(res), want)
		}
		recs, err := f.ex.Ledger().List(context.Background(), ledger.Filter{})
		require.NoError(t, err)
		require.Empty(t, recs, "a refused call records nothing")
		res, _ = callTool(t, cs, "noop_echo", args, nil)
		require.False(t, res.IsError, "a read runs: it has nothing to duplicate")
	})
	t.Run("warn", func(t *testing.T) {
		f := newFixture(t, overHTTP)
		cs := f.client(clientOpts{})
		for range 2 {
			res, out := callTool(t, cs, "plain_echo", args, nil)
			require.False(t, res.IsError, text(res))
			require.Equal(t, mcpserver.IdentityPerRequest, out.Identity)
			require.Contains(t, text(res), "passed no identity")
			require.Contains(t, text(res), "do not issue it again")
		}
		require.Equal(t, 1, strings.Count(f.log.String(), "came without a stable identity"), f.log.String())
		res, _ := callTool(t, cs, "noop_echo", args, nil)
		require.NotContains(t, text(res), "Warning", "a read needs no warning")
	})
	t.Run("allow", func(t *testing.T) {
		f := newFixture(t, overHTTP, fixtureOpts{mcp: func(o *mcpserver.Options) { o.PerRequest = mcpserver.PerRequestAllow }})
		cs := f.client(clientOpts{})
		res, out := callTool(t, cs, "plain_echo", args, nil)
		require.False(t, res.IsError, text(res))
		require.Contains(t, text(res), "This deployment allows calls without identity")
		require.NotContains(t, f.log.String(), "came without a stable identity")
		_, evs, err := f.ex.Get(context.Background(), out.ExecutionID)
		require.NoError(t, err)
		require.Contains(t, evs[0].Reason, "allow_per_request_identity")
	})
	t.Run("stdio with a config refuses", func(t *testing.T) {
		f := newFixture(t, overStdio)
		res, out := callTool(t, f.client(clientOpts{}), "plain_echo", args, nil)
		require.True(t, res.IsError)
		require.Equal(t, mcpserver.CodeIdentityRequired, out.Code)
	})
	t.Run("stdio config allows", func(t *testing.T) {
		f := newFixture(t, overStdio)
		f.mcpConfig = "allow_per_request_identity = true\n"
		res, out := callTool(t, f.client(clientOpts{}), "plain_echo", args, nil)
		require.False(t, res.IsError, text(res))
		require.Equal(t, mcpserver.IdentityPerRequest, out.Identity)
	})
}

// TestHoldGatedPerRequest: a gated call without a stable identity is held
// open while its approval is pending, with progress notifications, and
// finishes when a reviewer approves; past Options.ApprovalWait it answers
// awaiting_approval, telling the model not to issue it again.
func TestHoldGatedPerRequest(t *testing.T) {
	t.Run("approved while held", func(t *testing.T) {
		f := newFixture(t, overHTTP, fixtureOpts{mcp: func(o *mcpserver.Options) { o.ApprovalWait = 5 * time.Minute }})
		var mu sync.Mutex
		var progress []string
		cs := f.client(clientOpts{client: &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		}}})
		go func() {
			// The reviewer: approves the call once it waits.
			for {
				recs, err := f.ex.Ledger().List(context.Background(), ledger.Filter{State: ledger.StateAwaitingApproval})
				if err == nil && len(recs) == 1 {
					_, _ = f.ex.Approve(context.Background(), recs[0].Approval.ID, host.Decision{By: "olga", ArgsDigest: recs[0].ArgsDigest})
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		params := &mcp.CallToolParams{Name: "gated_echo", Arguments: map[string]any{"msg": "held"}}
		params.SetProgressToken("p1")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, params)
		require.NoError(t, err)
		out := structured(t, res)
		require.Equal(t, "succeeded", out.Status, text(res))
		require.Equal(t, mcpserver.IdentityPerRequest, out.Identity)
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, progress, "the held call sends progress")
		require.Contains(t, progress[0], "waiting for a human to approve")
	})
	t.Run("wait ends", func(t *testing.T) {
		f := newFixture(t, overHTTP, fixtureOpts{mcp: func(o *mcpserver.Options) { o.ApprovalWait = 500 * time.Millisecond }})
		res, out := callTool(t, f.client(clientOpts{}), "gated_echo", map[string]any{"msg": "nobody"}, nil)
		require.False(t, res.IsError)
		require.Equal(t, "awaiting_approval", out.Status)
		require.Contains(t, text(res), "A human must approve this call")
		require.Contains(t, text(res), "Do not issue this call again")
		require.NotContains(t, text(res), "_meta", "the model cannot set _meta")
	})
	t.Run("client identity answers at once", func(t *testing.T) {
		f := newFixture(t, overHTTP, fixtureOpts{mcp: func(o *mcpserver.Options) { o.ApprovalWait = time.Hour }})
		res, out := callTool(t, f.client(clientOpts{}), "gated_echo", map[string]any{"msg": "x"}, ids("s-hold", "c1"))
		require.Equal(t, "awaiting_approval", out.Status, text(res))
		require.Contains(t, text(res), "the runtime's retry of this same call runs it, once")
	})
}

// TestOriginRefused: /mcp refuses a browser request from a foreign origin
// with 403, whatever the method (GET opens the server's event stream);
// same-origin requests, trusted origins and clients that send no Origin
// work.
func TestOriginRefused(t *testing.T) {
	f := newFixture(t, overHTTP, fixtureOpts{mcp: func(o *mcpserver.Options) { o.TrustedOrigins = []string{"https://console.example.com"} }})
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	do := func(method, origin, site string) int {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(initialize)
		}
		req, err := http.NewRequest(method, f.srv.URL+"/mcp", body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tokenRuntime)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, do(http.MethodPost, "http://evil.example", ""))
	require.Equal(t, http.StatusForbidden, do(http.MethodGet, "http://evil.example", ""))
	require.Equal(t, http.StatusForbidden, do(http.MethodPost, "", "cross-site"))
	require.Equal(t, http.StatusOK, do(http.MethodPost, "", ""), "a client that is not a browser")
	require.Equal(t, http.StatusOK, do(http.MethodPost, f.srv.URL, "same-origin"), "same origin")
	require.Equal(t, http.StatusOK, do(http.MethodPost, "https://console.example.com", "cross-site"), "a trusted origin")
}

// TestToolNames: tools/list names every tool so that OpenAI, Anthropic
// and the runtimes accept it (payments_create_payment); a call by the
// dotted name, or the older "__" form, is the same tool.
func TestToolNames(t *testing.T) {
	eachTransport(t, func(t *testing.T, kind transport) {
		cs := newFixture(t, kind).client(clientOpts{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		var names []string
		for _, tl := range list.Tools {
			require.Regexp(t, tooldefs.ModelNameRE, tl.Name)
			names = append(names, tl.Name)
		}
		require.Contains(t, names, "payments_create_payment")
		require.Contains(t, names, "noop_echo")
		args := map[string]any{"msg": "n"}
		_, byModel := callTool(t, cs, "plain_echo", args, ids("s-names", "c1"))
		_, byDot := callTool(t, cs, "plain.echo", args, ids("s-names", "c1"))
		_, byOld := callTool(t, cs, "plain__echo", args, ids("s-names", "c1"))
		require.Equal(t, byModel.ExecutionID, byDot.ExecutionID)
		require.True(t, byDot.Recorded && byOld.Recorded, "one tool under every name")
	})
}
