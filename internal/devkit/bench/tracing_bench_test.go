package bench

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/connhost/connhost/internal/telemetry"
)

// BenchmarkExecuteTracing is BenchmarkExecute's sequential Execute of
// noop.echo with tracing off (the default: no [telemetry]), on with every
// trace sampled, and on with none sampled (the sampler's parent-based
// ratio at 0): what tracing costs a call. "On" is the SDK connhost serve
// runs (a batching span processor) with an exporter that discards, so
// that no backend's speed is measured:
//
//	go test ./internal/devkit/bench -run '^$' -bench ExecuteTracing -count 6
//
// BENCHMARKS.md ("Tracing") has the figures and their ratios.
func BenchmarkExecuteTracing(b *testing.B) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: off
	}{
		{"off", nil},
		{"on-sampled", sdktrace.ParentBased(sdktrace.AlwaysSample())},
		{"on-not-sampled", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.sampler != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(tc.sampler))
				telemetry.Enable(tp)
				b.Cleanup(func() {
					telemetry.Enable(nil)
					_ = tp.Shutdown(b.Context())
				})
			}
			call := noopBench(b, "noop.echo", 1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
