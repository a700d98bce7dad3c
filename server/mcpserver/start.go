package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/server/httpapi"
)

// The problem codes of a tools/call that reached a server which has not
// started (see NewStarting). Nothing is recorded for such a call.
const (
	// CodeStarting: the server was still starting (opening its ledger,
	// compiling connectors, running recovery) after Options.StartWait.
	// The same call, sent again, runs once the start is done.
	CodeStarting httpapi.Code = "starting"
	// CodeStartFailed: the server could not start (a missing secret, a
	// config or manifest error, a ledger that is damaged or held by
	// another process); the problem's detail says why. Sending the call
	// again fails the same way until the server is restarted, fixed.
	CodeStartFailed httpapi.Code = "start_failed"
)

// stdioKey marks the contexts of a stdio connection's requests (see
// RunStdio).
type stdioKey struct{}

// modernVersion is the first protocol revision a client may speak
// without initialize (SEP-2575), after a server/discover.
const modernVersion = "2026-07-28"

// lifecycle answers the requests that must not wait for the start, nor
// depend on the order a client sends them in:
//
//   - server/discover over stdio is answered here, from what the server
//     offers, without touching the connection's state: the SDK's own
//     answer records the probe as the connection's initialization, so an
//     initialize that follows it (a client whose probe timed out, then
//     fell back) was refused as a duplicate, and a probe after initialize
//     turned a 2025-11-25 connection into a 2026-07-28 one. Answered here,
//     discover and initialize both work, in either order.
//   - server/discover over HTTP whose answer would list no version a
//     client can use without initialize (the stateful /mcp serves up to
//     2025-11-25) is answered as a server without the method answers it
//     (method not found), which every client takes as "use initialize";
//     a list of old versions alone is taken by some clients
//     (mark3labs/mcp-go) as a modern server they cannot speak to, and they
//     give up.
//   - tools/list of a server whose start failed before it could read its
//     manifests answers why, instead of an empty list.
func (s *Server) lifecycle(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "server/discover":
			if ctx.Value(stdioKey{}) != nil {
				return &mcp.DiscoverResult{
					Cacheable:         mcp.Cacheable{CacheScope: "public"},
					SupportedVersions: mcp.SupportedProtocolVersions(),
					Capabilities:      capabilities(),
					Instructions:      instructions,
				}, nil
			}
			res, err := next(ctx, method, req)
			if d, ok := res.(*mcp.DiscoverResult); ok && err == nil &&
				!slices.ContainsFunc(d.SupportedVersions, func(v string) bool { return v >= modernVersion }) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf(
					"server/discover is not served here: this endpoint speaks protocol versions %v, which begin with initialize", d.SupportedVersions)}
			}
			return res, err
		case "tools/list":
			if len(s.tools) == 0 {
				if err := s.startError(); err != nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "connhost could not start, so it offers no tools: " + err.Error()}
				}
			}
		}
		return next(ctx, method, req)
	}
}

// startError returns why the start failed, or nil while it runs or after
// it succeeded.
func (s *Server) startError() error {
	select {
	case <-s.ready:
		return s.startErr
	default:
		return nil
	}
}

// waitStarted waits, up to Options.StartWait, until the server has
// started (at once for a server made by New). It sends no progress: a
// progress token's values must increase, and the call's own progress
// (attempt numbers, see progressFunc) follows. It returns nil once s.ex
// can serve the call, else the problem to refuse it with (CodeStarting,
// CodeStartFailed); err is the connection's end.
func (s *Server) waitStarted(ctx context.Context) (*httpapi.Problem, error) {
	select {
	case <-s.ready:
	default:
		wait := time.NewTimer(max(s.opts.StartWait, 0))
		defer wait.Stop()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait.C:
			select {
			case <-s.ready:
			default:
				return &httpapi.Problem{Type: httpapi.ProblemTypePrefix + string(CodeStarting), Title: "Starting",
					Status: http.StatusServiceUnavailable, Code: CodeStarting, RetryAfter: 5, Detail: fmt.Sprintf(
						"connhost is still starting (opening its ledger, compiling connectors, recovery) after %s; nothing was done. "+
							"Send the same call again (same arguments, same ids) in a few seconds", max(s.opts.StartWait, 0).Round(time.Second))}, nil
			}
		}
	}
	if s.startErr != nil {
		return &httpapi.Problem{Type: httpapi.ProblemTypePrefix + string(CodeStartFailed), Title: "Start failed",
			Status: http.StatusServiceUnavailable, Code: CodeStartFailed,
			Detail: "connhost could not start, so no tool runs; nothing was done: " + s.startErr.Error()}, nil
	}
	return nil, nil
}
