package mcpserver_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
)

// toolUse is the _meta Claude Code sends with a tools/call: the model's
// tool_use id, and no session.
func toolUse(id string) mcp.Meta { return mcp.Meta{"claudecode/toolUseId": id} }

// TestClaudeCodeConversationsOverHTTP: Claude Code names no conversation
// to an HTTP MCP server. Over a 2025-11-25 connection each connection is
// a session of its own: conversation B's payment of the same amount right
// after A's is not held as a duplicate of A's (two charges, both wanted),
// while a re-issue within A still is; an uncertain call in conversation
// C fences C, not B. A stateless 2026-07-28 request has no connection:
// each such call is a session of its own, so no conversation holds or
// fences another, and what remains is that nothing holds a re-issue
// either (a runtime that wants the guard passes io.connhost/session_id).
func TestClaudeCodeConversationsOverHTTP(t *testing.T) {
	for _, v := range []struct {
		name, version string
		guarded       bool
	}{{"stateful", legacy, true}, {"stateless", "", false}} {
		t.Run(v.name, func(t *testing.T) {
			f := payFixture(t, true)
			co := clientOpts{version: v.version}
			a, b, c := f.client(co), f.client(co), f.client(co)
			before := charges()

			_, first := callTool(t, a, "pay.create_payment", payment, toolUse("toolu_A1"))
			require.Equal(t, "succeeded", first.Status)
			res, other := callTool(t, b, "pay.create_payment", payment, toolUse("toolu_B1"))
			require.Equal(t, "succeeded", other.Status, text(res))
			require.Empty(t, other.DuplicateOf)
			require.NotEqual(t, first.SessionID, other.SessionID)
			require.Equal(t, before+2, charges(), "two conversations, two payments")

			_, again := callTool(t, a, "pay.create_payment", payment, toolUse("toolu_A2"))
			if v.guarded {
				// Within A the guard still holds a re-issue under a new id.
				require.Equal(t, "awaiting_approval", again.Status)
				require.Equal(t, first.ExecutionID, again.DuplicateOf)
				require.Equal(t, before+2, charges())
			} else {
				require.Equal(t, "succeeded", again.Status)
				require.Equal(t, before+3, charges(), "no guard across stateless calls")
			}
			// The same tool_use id again is the same call, on any
			// connection.
			res, same := callTool(t, b, "pay.create_payment", payment, toolUse("toolu_B1"))
			require.Equal(t, other.ExecutionID, same.ExecutionID, text(res))

			// C resumes a call the ledger never saw: recovery_required,
			// and its session is fenced; B is not.
			resumed := toolUse("toolu_C1")
			resumed[mcpserver.MetaResumed] = true
			res, unknown := callTool(t, c, "plain.echo", map[string]any{"msg": "c"}, resumed)
			require.Equal(t, "recovery_required", unknown.Status, text(res))
			if v.guarded {
				res, fenced := callTool(t, c, "plain.echo", map[string]any{"msg": "c2"}, toolUse("toolu_C2"))
				require.Equal(t, httpapi.CodeSessionFenced, fenced.Code, text(res))
			}
			res, fine := callTool(t, b, "plain.echo", map[string]any{"msg": "b"}, toolUse("toolu_B2"))
			require.Equal(t, "succeeded", fine.Status, text(res))
		})
	}
}

// TestClaudeCodeConversationsOverStdio: Claude Code gives a stdio server
// it launches its session id (CLAUDE_CODE_SESSION_ID); connhost mcp runs
// that conversation's calls in a session of their own. Conversation B's
// payment of the same amount right after A's is not taken for A's
// duplicate; A resumed later (the same session id, a new process) is A
// again, so its re-issue of the payment under a new tool_use id is.
func TestClaudeCodeConversationsOverStdio(t *testing.T) {
	f := newFixture(t, overStdio)
	call := func(conv, toolUseID string) mcpserver.Result {
		t.Helper()
		cs := f.client(clientOpts{env: []string{"CLAUDE_CODE_SESSION_ID=" + conv}})
		defer cs.Close()
		res, out := callTool(t, cs, "payments_create_payment", payment, toolUse(toolUseID))
		require.Equal(t, "awaiting_approval", out.Status, text(res))
		require.Equal(t, mcpserver.ConversationSession(mcpserver.DefaultStdioActor, conv), out.SessionID)
		require.Contains(t, out.IdentitySource, "CLAUDE_CODE_SESSION_ID")
		return out
	}
	a := call("0b6f3a52-a", "toolu_A1")
	b := call("5c1d0e77-b", "toolu_B1")
	require.Empty(t, b.DuplicateOf, "B's payment is B's own")
	resumed := call("0b6f3a52-a", "toolu_A2")
	require.Equal(t, a.ExecutionID, resumed.DuplicateOf, "A resumed re-issues A's payment")
}
