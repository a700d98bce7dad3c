package mcpserver

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessVersion is the first protocol revision served statelessly over
// HTTP: no initialize, no Mcp-Session-Id, every request carrying its
// protocol version, client capabilities and identity in its own _meta.
const statelessVersion = "2026-07-28"

// streamableHandler serves /mcp for both generations of the protocol.
// A request that names protocol 2026-07-28 or later in its
// Mcp-Protocol-Version header (server/discover included) and carries no
// Mcp-Session-Id goes to the SDK's stateless handler: a session of its
// own request, which asks for approval with input requests (multi round
// trip) and finds its execution again by the ids in _meta, whatever
// JSON-RPC id a re-sent request carries. Every other request goes to the
// stateful handler, whose sessions (2025-11-25 and earlier) ask with
// elicitation/create while the call runs. Both serve the same server, so
// a 2025-11-25 client and a 2026-07-28 one see the same tools and the
// same executions.
func (s *Server) streamableHandler() http.Handler {
	getServer := func(*http.Request) *mcp.Server { return s.srv }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Logger:              s.opts.Logger,
		SessionTimeout:      s.opts.SessionTimeout,
		MaxRequestBodyBytes: s.opts.MaxBodyBytes,
	})
	// The end of the HTTP request does not cancel the call's context (the
	// SDK's PropagateRequestCancellation would cancel it as a client's
	// cancellation does, and cancel the execution): a broken stream is
	// not a cancellation, the client re-sends the call with the same ids.
	// A call held for a decision stops holding when its request is gone
	// (see requestGone).
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              s.opts.Logger,
		MaxRequestBodyBytes: s.opts.MaxBodyBytes,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= statelessVersion {
			r = r.WithContext(context.WithValue(r.Context(), requestDoneKey{}, r.Context().Done()))
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
}

// requestDoneKey is the context key of the Done channel of a stateless
// request's HTTP request.
type requestDoneKey struct{}

// requestGone returns a channel closed when the HTTP request of a
// stateless tools/call has ended (the client went away), or nil (never
// ready) on other transports, where the connection's end cancels the
// call's context.
func requestGone(ctx context.Context) <-chan struct{} {
	done, _ := ctx.Value(requestDoneKey{}).(<-chan struct{})
	return done
}
