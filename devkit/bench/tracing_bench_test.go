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
//	go test ./devkit/bench -run '^$' -bench ExecuteTracing -benchtime 3000x -count 8
//
// It reports the process's CPU time per call (cpu-ns/op) beside the wall
// time.
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
			cpu := processCPU()
			for range b.N {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time per call (the span exporter's
			// goroutine included): on a shared machine far steadier than
			// the wall time, which the ledger's fsync dominates.
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
