package mcpserver

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/internal/telemetry"
)

// traced opens the server span of each request (see
// telemetry.StartMCP): a client's trace context in _meta (traceparent,
// tracestate, baggage) is continued, and the executor's spans of a
// tools/call are its children. Notifications get none.
func traced(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		r := telemetry.MCPRequest{Method: method}
		if p := req.GetParams(); p != nil {
			r.Meta = p.GetMeta()
		}
		if ct, ok := req.(*mcp.CallToolRequest); ok && ct.Params != nil {
			r.Target = ct.Params.Name
			r.ProtocolVersion = ct.ProtocolVersion()
		}
		if s := req.GetSession(); s != nil {
			r.SessionID = s.ID()
		}
		ctx, span := telemetry.StartMCP(ctx, r)
		res, err := next(ctx, method, req)
		ctr, _ := res.(*mcp.CallToolResult)
		telemetry.EndMCP(span, err, ctr != nil && ctr.IsError)
		return res, err
	}
}
