package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
)

// TestGuidanceInStructuredContent: a runtime that hands the model only
// structuredContent (Mastra) must not lose what the text tells it. Every
// result carries, beside its status, "next" (done, wait_for_human,
// retry_same_ids, do_not_retry) and "message", the text on one line
// (without a succeeded call's result, which the structured content has
// whole). No result, text or message, asks for the call under a new
// tool-call id.
func TestGuidanceInStructuredContent(t *testing.T) {
	f := newFixture(t, overHTTP, fixtureOpts{
		// Pending answers at once instead of waiting for the retry.
		adjust: func(o *host.Options) { o.MaxInlineRetryWait = time.Millisecond },
		mcp:    func(o *mcpserver.Options) { o.MaxWait = -1; o.PerRequest = mcpserver.PerRequestRefuse },
	})
	cs := f.client(clientOpts{})
	gated := func() mcpserver.Result {
		_, out := callTool(t, cs, "payments_create_payment", payment, ids("s-guide-gated", "c1"))
		require.Equal(t, "awaiting_approval", out.Status)
		return out
	}
	resumed := ids("s-guide-fenced", "c1")
	resumed[mcpserver.MetaResumed] = true

	for _, tt := range []struct {
		name   string
		call   func() *mcp.CallToolResult
		status string
		code   httpapi.Code
		next   mcpserver.Next
	}{
		{"succeeded", func() *mcp.CallToolResult {
			res, _ := callTool(t, cs, "noop_echo", map[string]any{"msg": "hi"}, ids("s-guide", "c1"))
			return res
		}, "succeeded", "", mcpserver.NextDone},
		{"recorded", func() *mcp.CallToolResult {
			res, _ := callTool(t, cs, "noop_echo", map[string]any{"msg": "hi"}, ids("s-guide", "c1"))
			return res
		}, "succeeded", "", mcpserver.NextDone},
		{"awaiting approval", func() *mcp.CallToolResult {
			gated()
			res, _ := callTool(t, cs, "payments_create_payment", payment, ids("s-guide-gated", "c1"))
			return res
		}, "awaiting_approval", "", mcpserver.NextWaitForHuman},
		{"rejected", func() *mcp.CallToolResult {
			out := gated()
			_, err := f.ex.Reject(context.Background(), out.Approval.ID, host.Decision{By: "olga", ArgsDigest: out.Approval.ArgsDigest})
			require.NoError(t, err)
			res, _ := callTool(t, cs, "payments_create_payment", payment, ids("s-guide-gated", "c1"))
			return res
		}, "rejected", "", mcpserver.NextDoNotRetry},
		{"pending", func() *mcp.CallToolResult {
			shared.effect.failNext(1)
			res, _ := callTool(t, cs, "effect_apply", map[string]any{"n": 1}, ids("s-guide", "c-pending"))
			return res
		}, "pending", "", mcpserver.NextRetrySameIDs},
		{"recovery required", func() *mcp.CallToolResult {
			res, _ := callTool(t, cs, "plain_echo", map[string]any{"msg": "a"}, resumed)
			return res
		}, "recovery_required", httpapi.CodeRecoveryRequired, mcpserver.NextWaitForHuman},
		{"fenced", func() *mcp.CallToolResult {
			res, _ := callTool(t, cs, "plain_echo", map[string]any{"msg": "b"}, ids("s-guide-fenced", "c2"))
			return res
		}, "refused", httpapi.CodeSessionFenced, mcpserver.NextWaitForHuman},
		{"intent mismatch", func() *mcp.CallToolResult {
			res, _ := callTool(t, cs, "noop_echo", map[string]any{"msg": "other"}, ids("s-guide", "c1"))
			return res
		}, "refused", httpapi.CodeIntentMismatch, mcpserver.NextDoNotRetry},
		{"identity required", func() *mcp.CallToolResult {
			res, _ := callTool(t, cs, "effect_apply", map[string]any{"n": 2}, nil)
			return res
		}, "refused", mcpserver.CodeIdentityRequired, mcpserver.NextDoNotRetry},
		{"settled, never received", func() *mcp.CallToolResult {
			settled := ids("s-guide-settle", "c-never")
			settled[mcpserver.MetaSettle] = true
			res, _ := callTool(t, cs, "noop_echo", map[string]any{"msg": "hi"}, settled)
			return res
		}, "cancelled", "", mcpserver.NextMayIssueAgain},
		{"invalid arguments", func() *mcp.CallToolResult {
			res, _ := callTool(t, cs, "effect_apply", map[string]any{"n": "two"}, ids("s-guide", "c-bad"))
			return res
		}, "refused", httpapi.CodeInvalidArguments, mcpserver.NextDoNotRetry},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.call()
			out := structured(t, res)
			require.Equal(t, tt.status, out.Status, text(res))
			require.Equal(t, tt.code, out.Code, text(res))
			require.Equal(t, tt.next, out.Next, text(res))
			want := strings.Join(strings.Fields(text(res)), " ")
			if out.Status == "succeeded" {
				cut, _, _ := strings.Cut(want, " Result: ")
				require.NotEqual(t, want, cut, "the text shows the result")
				want = cut
			}
			require.Equal(t, want, out.Message)
			require.NotContains(t, out.Message, "\n")
			for _, s := range []string{text(res), out.Message} {
				require.NotContains(t, strings.ToLower(s), "new tool-call id", "a retry under a new id is a new execution")
			}
		})
	}
}
