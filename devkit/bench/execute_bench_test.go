package bench

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkExecuteParallel is Execute of a no-op operation, manual
// (noop.echo) and with a lazy outcome (noop.keyed), from 64 callers (at
// least: 64 rounded up to a multiple of GOMAXPROCS), as BenchmarkRawSync's
// conc=64 writes: the concurrent run of `connhost bench ledger`, as a Go
// benchmark so that a CPU profile of it says where an execution's CPU goes:
//
//	go test ./devkit/bench -run '^$' -bench ExecuteParallel -cpuprofile cpu.out
//	go tool pprof -top -cum cpu.out
func BenchmarkExecuteParallel(b *testing.B) {
	for _, tool := range []string{"noop.echo", "noop.keyed"} {
		b.Run(tool, func(b *testing.B) {
			call := noopBench(b, tool, 64)
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := call(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkExecute is the same Execute from one caller: the sequential run
// of `connhost bench ledger`, for a CPU profile of one execution's path
// without contention.
func BenchmarkExecute(b *testing.B) {
	for _, tool := range []string{"noop.echo", "noop.keyed"} {
		b.Run(tool, func(b *testing.B) {
			call := noopBench(b, tool, 1)
			b.ResetTimer()
			for range b.N {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// noopBench opens an executor with the no-op connector allowed instances
// instances (its pool filled), closed when b ends, and returns a call of
// tool with a new tool-call id each time.
func noopBench(b *testing.B, tool string, instances int) func() error {
	ctx := context.Background()
	ex, _, err := openNoop(ctx, b.TempDir(), instances, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ex.Close(ctx) })
	var seq atomic.Int64
	return noopCall(ctx, ex, tool, &seq)
}
