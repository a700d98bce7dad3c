package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
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

// TestFloorBench: the floor writes under derived ids, and its look-up is
// real: an operation under an id it wrote already fails.
func TestFloorBench(t *testing.T) {
	ctx := context.Background()
	fb, err := OpenFloorBench(t.TempDir())
	require.NoError(t, err)
	defer fb.Close()
	_, _, err = fb.Run(ctx, 3, 1)
	require.NoError(t, err)
	_, closer, err := fb.db.Get([]byte("r/" + ledger.ExecutionID("bench", "floor", "2")))
	require.NoError(t, err, "the floor's second operation is keyed by its derived id")
	require.NoError(t, closer.Close())
	fb.next.Store(1)
	_, _, err = fb.Run(ctx, 1, 1)
	require.ErrorContains(t, err, "exists already")
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
