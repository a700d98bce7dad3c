// Package telemetry is connhost's tracing on the OpenTelemetry API: the
// spans the executor, the wasm runtime's http capability, the HTTP API and
// the MCP server open, the W3C trace context (traceparent, tracestate,
// baggage) they accept from callers and pass on to providers, and the names
// of their attributes (docs/telemetry.md lists them).
//
// It imports the OpenTelemetry API only. The SDK, its sampler and the OTLP
// exporter are set up by internal/telemetry/otlp, which `connhost serve`
// configures from connhost.toml's [telemetry] and which hands its provider
// to Enable. Until then tracing is off: Start returns its context as it was
// and a no-op span after one atomic load, allocating nothing, and nothing
// else of this package runs on the call path (callers check
// Span.IsRecording before they build attributes).
//
// Spans carry identifiers and decisions, never argument values, results,
// headers or secrets.
package telemetry

import (
	"context"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span connhost opens.
const ScopeName = "github.com/connhost/connhost"

// tracer is the tracer of the enabled provider; nil while tracing is off.
var tracer atomic.Pointer[trace.Tracer]

// Enable makes Start open spans with tp's tracer (nil turns tracing off
// again). It is called once, before serving; it is safe for concurrent
// use.
func Enable(tp trace.TracerProvider) {
	if tp == nil {
		tracer.Store(nil)
		return
	}
	t := tp.Tracer(ScopeName)
	tracer.Store(&t)
}

// Enabled reports whether tracing is on.
func Enabled() bool { return tracer.Load() != nil }

// noopSpan is converted to an interface once: Start returns it without
// allocating.
var noopSpan trace.Span = noop.Span{}

// Start opens a span named name of the given kind as a child of the span in
// ctx (or of the remote span context ctx carries), with links, and returns
// the context holding it. With tracing off it returns ctx and a no-op span.
// The caller ends the span.
func Start(ctx context.Context, name string, kind trace.SpanKind, links ...trace.Link) (context.Context, trace.Span) {
	t := tracer.Load()
	if t == nil {
		return ctx, noopSpan
	}
	if len(links) == 0 {
		return (*t).Start(ctx, name, trace.WithSpanKind(kind))
	}
	return (*t).Start(ctx, name, trace.WithSpanKind(kind), trace.WithLinks(links...))
}

// StartAt is Start for a span that began at start (opened after the fact,
// once it is known to be worth a span).
func StartAt(ctx context.Context, name string, kind trace.SpanKind, start trace.SpanStartEventOption) (context.Context, trace.Span) {
	t := tracer.Load()
	if t == nil {
		return ctx, noopSpan
	}
	return (*t).Start(ctx, name, trace.WithSpanKind(kind), start)
}

// Fail marks span as failed with err (its type as error.type, its message
// as the status description). A nil err does nothing.
func Fail(span trace.Span, errType string, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(ErrorType.String(errType))
	span.SetStatus(codesError, err.Error())
}

// The W3C keys of a trace context, in HTTP headers and in MCP _meta.
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
	KeyBaggage     = "baggage"
)

// incoming reads a caller's traceparent, tracestate and baggage; outgoing
// writes the trace context only: baggage is the caller's and stays in
// connhost, never sent on to a provider (a third party).
var (
	incoming = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	outgoing = propagation.TraceContext{}
)

// FromHeaders returns ctx with the trace context and baggage of an HTTP
// request's headers, when tracing is on and they carry any; ctx otherwise.
// A malformed traceparent is ignored (the request starts a new trace).
func FromHeaders(ctx context.Context, h http.Header) context.Context {
	if !Enabled() || h.Get(KeyTraceparent) == "" && h.Get(KeyBaggage) == "" {
		return ctx
	}
	return incoming.Extract(ctx, propagation.HeaderCarrier(h))
}

// FromMeta returns ctx with the trace context and baggage of an MCP
// request's _meta (the keys traceparent, tracestate and baggage, string
// values), when tracing is on and it carries a traceparent or baggage;
// ctx otherwise. A malformed or non-string value is ignored.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if !Enabled() || len(meta) == 0 {
		return ctx
	}
	c := propagation.MapCarrier{}
	for _, k := range []string{KeyTraceparent, KeyTracestate, KeyBaggage} {
		if v, ok := meta[k].(string); ok && v != "" {
			c[k] = v
		}
	}
	if c[KeyTraceparent] == "" && c[KeyBaggage] == "" {
		return ctx
	}
	return incoming.Extract(ctx, c)
}

// Inject writes the traceparent (and tracestate) of the span in ctx into
// h, for an outgoing request, when that span context is valid: a
// provider's own tracing then joins the trace. Baggage is not sent. With
// tracing off it does nothing.
func Inject(ctx context.Context, h http.Header) {
	if !Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	outgoing.Inject(ctx, propagation.HeaderCarrier(h))
}

// Traceparent returns the W3C traceparent and tracestate of the span in
// ctx, "" when it has no valid span context (tracing off, or no trace).
// The executor records them with an execution, so that work done on it
// later (an approval hours later, a recovery after a crash) joins its
// trace.
func Traceparent(ctx context.Context) (parent, state string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	outgoing.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c[KeyTraceparent], c[KeyTracestate]
}

// Remote parses a recorded traceparent and tracestate into a remote span
// context; an invalid one (or "") gives the zero SpanContext.
func Remote(parent, state string) trace.SpanContext {
	if parent == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{KeyTraceparent: parent}
	if state != "" {
		c[KeyTracestate] = state
	}
	return trace.SpanContextFromContext(outgoing.Extract(context.Background(), c))
}

// Join returns ctx whose parent span is the recorded one (parent,
// state), and a link to the span ctx held before, if any: work done on an
// execution long after its call (an approval, a recovery, an operator's
// resolution) then belongs to the execution's trace, and still points at
// the request that caused it. Without a valid recorded context it returns
// ctx and no link.
func Join(ctx context.Context, parent, state string) (context.Context, []trace.Link) {
	if !Enabled() {
		return ctx, nil
	}
	rsc := Remote(parent, state)
	if !rsc.IsValid() {
		return ctx, nil
	}
	var links []trace.Link
	if cur := trace.SpanContextFromContext(ctx); cur.IsValid() && cur.TraceID() != rsc.TraceID() {
		links = []trace.Link{{SpanContext: cur}}
	}
	return trace.ContextWithRemoteSpanContext(ctx, rsc), links
}

// IDs returns the trace and span id of the span in ctx, as hex, when it
// is sampled (recorded and exported); "" otherwise. Logs and metric
// exemplars name them, so that a slow call found there leads to its trace.
func IDs(ctx context.Context) (traceID, spanID string) {
	if !Enabled() {
		return "", ""
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}
