package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/telemetry"
)

// TestTraceOfATakeover: node a dies after the provider applied a call made
// in a traced request; node b's recovery pass claims it. The claim is a
// span of its own (how many it took), and b's recovery of the call joins
// the call's trace as a child of a's execute_tool, linked to the claim;
// its re-dispatch, connector call and outcome are the recovery's
// children. The record keeps the traceparent it was created under.
// (Not parallel: tracing is switched on for the process.)
func TestTraceOfATakeover(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	telemetry.Enable(tp)
	t.Cleanup(func() { telemetry.Enable(nil) })

	ctx := context.Background()
	f := newFleet(t, "idempotent-retry", withDedup())
	a := f.start("a", nil)
	b := f.start("b", nil)
	c := call("s1", "c1", `{"n":1}`)
	rctx, root := tp.Tracer("runtime").Start(ctx, "runtime turn")
	// a's spans of the call never end: it dies (as a killed process
	// exports nothing more).
	f.h.crashDuring(crash.AfterPluginReturn, func() { _, _ = a.Execute(rctx, c) })
	root.End()
	host.FreezeNode(a)
	testenv.ExpireNodeLease(t, f.dsn, "a")
	rep, err := b.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Claimed)
	require.Equal(t, 1, f.h.prov.count(), "one effect")

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	require.Len(t, byName[telemetry.SpanClaim], 1)
	claim := byName[telemetry.SpanClaim][0]
	require.Contains(t, claim.Attributes(), telemetry.Claimed.Int(1))
	require.Len(t, byName[telemetry.SpanRecover], 1)
	rcv := byName[telemetry.SpanRecover][0]
	var id string
	for _, kv := range rcv.Attributes() {
		if kv.Key == telemetry.ExecutionID {
			id = kv.Value.AsString()
		}
	}
	r, _, err := b.Get(ctx, id)
	require.NoError(t, err)
	recorded := telemetry.Remote(r.Traceparent, r.Tracestate)
	require.Equal(t, root.SpanContext().TraceID(), recorded.TraceID(), "the record keeps the trace of the call")
	require.NotEqual(t, root.SpanContext().SpanID(), recorded.SpanID(), "… and names a's execute_tool span, not the runtime's")
	require.Equal(t, root.SpanContext().TraceID(), rcv.SpanContext().TraceID(), "the recovery joins the call's trace")
	require.Equal(t, recorded.SpanID(), rcv.Parent().SpanID(), "as a child of the recorded span")
	require.Len(t, rcv.Links(), 1)
	require.Equal(t, claim.SpanContext().SpanID(), rcv.Links()[0].SpanContext.SpanID(), "linked to the claim")
	var redispatched bool
	for _, s := range byName[telemetry.SpanDispatch] {
		if s.Parent().SpanID() == rcv.SpanContext().SpanID() {
			redispatched = true
			require.Contains(t, s.Attributes(), telemetry.Decision.String("recover_retry"))
		}
	}
	require.True(t, redispatched, "the re-dispatch is the recovery's child")
	var called bool
	for _, s := range byName[telemetry.SpanWasmCall] {
		called = called || s.Parent().SpanID() == rcv.SpanContext().SpanID()
	}
	require.True(t, called, "the connector call is the recovery's child")
	var outcome bool
	for _, s := range byName[telemetry.SpanOutcome] {
		outcome = outcome || s.Parent().SpanID() == rcv.SpanContext().SpanID()
	}
	require.True(t, outcome, "the outcome write is the recovery's child")
}
