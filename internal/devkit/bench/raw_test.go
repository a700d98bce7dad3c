package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestRawSyncBench(t *testing.T) {
	perOp, perSec, err := RawSyncBench(context.Background(), t.TempDir(), 20, 4)
	if err != nil || perOp <= 0 || perSec <= 0 {
		t.Fatalf("RawSyncBench = %v, %v, %v", perOp, perSec, err)
	}
	if _, _, err := RawSyncBench(context.Background(), t.TempDir(), 0, 1); !errors.Is(err, errBadRun) {
		t.Fatalf("no ops: err = %v, want errBadRun", err)
	}
}

// BenchmarkRawSync is the baseline: two synced Pebble batch commits per op
// (what one ungated execution needs), on a real directory.
func BenchmarkRawSync(b *testing.B) {
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			_, perSec, err := RawSyncBench(context.Background(), b.TempDir(), b.N, conc)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(perSec, "ops/s")
		})
	}
}
