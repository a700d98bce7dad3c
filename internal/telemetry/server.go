package telemetry

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Handler wraps next so that each request continues its caller's trace:
// the traceparent, tracestate and baggage headers (FromHeaders) are the
// parent of a server span named by the request's method (and its route,
// once Route has named it), with the HTTP server conventions' attributes
// and the response's status. Requests to the quiet paths (health checks,
// metric scrapes: a trace each would bury the calls) get a span only when
// they carry a traceparent. With tracing off (Enabled false when Handler
// is called) it returns next itself. Query strings, headers and bodies
// are not recorded.
func Handler(next http.Handler, quiet ...string) http.Handler {
	if !Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(quiet, r.URL.Path) && r.Header.Get(KeyTraceparent) == "" {
			next.ServeHTTP(w, r)
			return
		}
		ctx, span := Start(FromHeaders(r.Context(), r.Header), r.Method, trace.SpanKindServer)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		if span.IsRecording() {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			span.SetAttributes(HTTPRequestMethod.String(r.Method), URLPath.String(r.URL.Path), URLScheme.String(scheme))
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(HTTPResponseStatus.Int(status))
			if status >= 500 {
				span.SetStatus(codes.Error, "")
			}
		}
		span.End()
	})
}

// Route names the server span of the requests next serves by their route
// (the pattern it is registered under: "POST /v1/executions"), and sets
// http.route. With tracing off it returns next itself.
func Route(pattern string, next http.Handler) http.Handler {
	if !Enabled() {
		return next
	}
	route := pattern
	if _, path, ok := strings.Cut(pattern, " "); ok {
		route = path
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(HTTPRoute.String(route))
		}
		next.ServeHTTP(w, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush passes a flush on (the MCP transport streams events).
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// MCPRequest describes one MCP request for StartMCP.
type MCPRequest struct {
	// Method is the JSON-RPC method ("tools/call").
	Method string
	// Target is the tool (or prompt, resource) the request names, if any.
	Target string
	// Meta is the request's _meta, where a client passes its trace
	// context (traceparent, tracestate, baggage).
	Meta map[string]any
	// SessionID and ProtocolVersion are the MCP session's, if known.
	SessionID, ProtocolVersion string
}

// StartMCP opens the server span of an MCP request ("tools/call
// create_payment", as the MCP conventions name it), a child of the trace
// context in the request's _meta when it carries one (which takes
// precedence over the HTTP request's headers), else of the span in ctx.
// The caller ends the span, with EndMCP.
func StartMCP(ctx context.Context, req MCPRequest) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noopSpan
	}
	name := req.Method
	if req.Target != "" {
		name += " " + req.Target
	}
	ctx, span := Start(FromMeta(ctx, req.Meta), name, trace.SpanKindServer)
	if span.IsRecording() {
		span.SetAttributes(MCPMethodName.String(req.Method))
		if req.Target != "" && req.Method == "tools/call" {
			span.SetAttributes(GenAIToolName.String(req.Target), GenAIOperationName.String("execute_tool"))
		}
		if req.SessionID != "" {
			span.SetAttributes(MCPSessionID.String(req.SessionID))
		}
		if req.ProtocolVersion != "" {
			span.SetAttributes(MCPProtocolVersion.String(req.ProtocolVersion))
		}
	}
	return ctx, span
}

// EndMCP ends an MCP request's span: err is a JSON-RPC error, toolError
// a tool's result with isError set.
func EndMCP(span trace.Span, err error, toolError bool) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	switch {
	case err != nil:
		Fail(span, "_OTHER", err)
	case toolError:
		span.SetAttributes(ErrorType.String("tool_error"))
		span.SetStatus(codes.Error, "")
	}
}
