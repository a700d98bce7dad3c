package telemetry_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/connhost/connhost/internal/telemetry"
)

const (
	callerParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
)

// enable turns tracing on for the test with an in-memory recorder.
func enable(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	telemetry.Enable(tp)
	t.Cleanup(func() { telemetry.Enable(nil) })
	return rec
}

// TestOffCostsNoAllocation: with tracing off, Start hands back its
// context and a no-op span without allocating, and the propagation
// helpers change nothing.
func TestOffCostsNoAllocation(t *testing.T) {
	telemetry.Enable(nil)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := telemetry.Start(ctx, "x", trace.SpanKindInternal)
		if span.IsRecording() || c != ctx {
			t.Fatal("off: a recording span, or a new context")
		}
		span.End()
	})
	if allocs != 0 {
		t.Errorf("Start with tracing off: %v allocations, want 0", allocs)
	}
	h := http.Header{"Traceparent": {callerParent}}
	if c := telemetry.FromHeaders(ctx, h); c != ctx {
		t.Error("FromHeaders with tracing off changed the context")
	}
	if c := telemetry.FromMeta(ctx, map[string]any{"traceparent": callerParent}); c != ctx {
		t.Error("FromMeta with tracing off changed the context")
	}
	if id, _ := telemetry.IDs(ctx); id != "" {
		t.Errorf("IDs off: %q", id)
	}
}

// TestContinuesTheCallersTrace: a caller's traceparent, from HTTP headers
// or MCP _meta, is the parent of the span connhost opens; baggage is
// accepted but an outgoing request carries the trace context only.
func TestContinuesTheCallersTrace(t *testing.T) {
	rec := enable(t)
	for _, tc := range []struct {
		name string
		ctx  func() context.Context
	}{
		{"headers", func() context.Context {
			return telemetry.FromHeaders(context.Background(), http.Header{"Traceparent": {callerParent}, "Baggage": {"user=alice"}})
		}},
		{"meta", func() context.Context {
			return telemetry.FromMeta(context.Background(), map[string]any{"traceparent": callerParent, "baggage": "user=alice", "io.connhost/session_id": "s"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx()
			if baggage.FromContext(ctx).Member("user").Value() != "alice" {
				t.Error("baggage not accepted")
			}
			ctx, span := telemetry.Start(ctx, "op", trace.SpanKindServer)
			span.End()
			got := rec.Ended()[len(rec.Ended())-1]
			if got.SpanContext().TraceID().String() != callerTrace || got.Parent().SpanID().String() != callerSpan || !got.Parent().IsRemote() {
				t.Fatalf("span %s parent %s: want the caller's trace and span", got.SpanContext().TraceID(), got.Parent().SpanID())
			}
			out := http.Header{}
			telemetry.Inject(ctx, out)
			if tp := out.Get("traceparent"); !strings.HasPrefix(tp, "00-"+callerTrace+"-"+got.SpanContext().SpanID().String()) {
				t.Errorf("outgoing traceparent %q: want the span's", tp)
			}
			if out.Get("baggage") != "" {
				t.Errorf("outgoing baggage %q: the caller's baggage must not reach a provider", out.Get("baggage"))
			}
		})
	}
}

// TestMalformedContextStartsANewTrace: a traceparent that does not parse,
// or a _meta value that is no string, is ignored.
func TestMalformedContextStartsANewTrace(t *testing.T) {
	enable(t)
	for _, meta := range []map[string]any{
		{"traceparent": "00-zz-00f067aa0ba902b7-01"},
		{"traceparent": 42},
		{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
	} {
		ctx := telemetry.FromMeta(context.Background(), meta)
		if trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("%v gave a valid span context", meta)
		}
	}
}

// TestJoinRecordedTrace: work on an execution joins the trace recorded
// with it and links the span that caused it; Traceparent and Remote are
// inverse.
func TestJoinRecordedTrace(t *testing.T) {
	rec := enable(t)
	ctx, exec := telemetry.Start(context.Background(), "execute", trace.SpanKindInternal)
	parent, state := telemetry.Traceparent(ctx)
	exec.End()
	if sc := telemetry.Remote(parent, state); sc.TraceID() != exec.SpanContext().TraceID() || sc.SpanID() != exec.SpanContext().SpanID() {
		t.Fatalf("Remote(Traceparent) = %v, want %v", sc, exec.SpanContext())
	}
	reviewer, rspan := telemetry.Start(context.Background(), "POST /v1/approvals/{id}/approve", trace.SpanKindServer)
	jctx, links := telemetry.Join(reviewer, parent, state)
	_, approve := telemetry.Start(jctx, "connhost.approve", trace.SpanKindInternal, links...)
	approve.End()
	rspan.End()
	var got sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "connhost.approve" {
			got = s
		}
	}
	if got.Parent().SpanID() != exec.SpanContext().SpanID() || got.SpanContext().TraceID() != exec.SpanContext().TraceID() {
		t.Errorf("approve's parent %v: want the execute span %v", got.Parent(), exec.SpanContext())
	}
	if len(got.Links()) != 1 || got.Links()[0].SpanContext.SpanID() != rspan.SpanContext().SpanID() {
		t.Errorf("approve's links %v: want the reviewer's request span", got.Links())
	}
	if c, l := telemetry.Join(reviewer, "", ""); c != reviewer || l != nil {
		t.Error("Join without a recorded context changed the context")
	}
}

// TestLogHandlerNamesTheTrace: a record logged with a sampled span's
// context names trace_id and span_id; one without does not.
func TestLogHandlerNamesTheTrace(t *testing.T) {
	enable(t)
	var b strings.Builder
	log := slog.New(telemetry.LogHandler(slog.NewTextHandler(&b, nil)))
	ctx, span := telemetry.Start(context.Background(), "op", trace.SpanKindServer)
	log.InfoContext(ctx, "http request")
	log.Info("no context")
	span.End()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if !strings.Contains(lines[0], "trace_id="+span.SpanContext().TraceID().String()) || !strings.Contains(lines[0], "span_id=") {
		t.Errorf("traced record: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("untraced record: %s", lines[1])
	}
}

// TestHandlerServerSpans: a request continues its caller's trace in a
// server span named by its route; a quiet path (a health check) gets none
// unless its caller traces it.
func TestHandlerServerSpans(t *testing.T) {
	rec := enable(t)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/executions", telemetry.Route("POST /v1/executions", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	h := telemetry.Handler(mux, "/healthz")
	serve := func(method, path, traceparent string) {
		r, _ := http.NewRequest(method, "http://x"+path, nil)
		if traceparent != "" {
			r.Header.Set("traceparent", traceparent)
		}
		h.ServeHTTP(discard{}, r)
	}
	serve("GET", "/healthz", "")
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("an untraced health check made %d spans", n)
	}
	serve("POST", "/v1/executions", callerParent)
	serve("GET", "/healthz", callerParent)
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	s := spans[0]
	if s.Name() != "POST /v1/executions" || s.SpanKind() != trace.SpanKindServer || s.Parent().SpanID().String() != callerSpan {
		t.Errorf("span %q kind %v parent %v", s.Name(), s.SpanKind(), s.Parent().SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["http.route"] != "/v1/executions" || attrs["http.response.status_code"] != "202" || attrs["http.request.method"] != "POST" {
		t.Errorf("attributes %v", attrs)
	}
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
