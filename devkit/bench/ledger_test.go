package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunLedger runs the whole measurement at a small scale: every figure
// is measured (positive), and the scratch directory is removed.
func TestRunLedger(t *testing.T) {
	dir := t.TempDir() + "/scratch"
	require.NoError(t, os.Mkdir(dir, 0o755))
	var phases []string
	rep, err := RunLedger(context.Background(), LedgerOptions{
		Dir: dir, History: 300, Pending: 20, Concurrency: 4, SeqOps: 6, ParOps: 24, Rounds: 3, SyncCallers: []int{1, 4}, WitnessRun: 50 * time.Millisecond,
		Progress: func(p string) { phases = append(phases, p) },
	})
	require.NoError(t, err)
	for name, v := range map[string]float64{
		"raw_seq_us": rep.RawSeqMicros, "raw_par_per_s": rep.RawParPerSecond,
		"ledger_seq_us": rep.LedgerSeqMicros, "ledger_par_per_s": rep.LedgerParPerSecond,
		"ledger seq ratio": rep.LedgerSeqRatio, "ledger par ratio": rep.LedgerParRatio,
		"execute_seq_us": rep.ExecuteSeqMicros, "execute_par_per_s": rep.ExecuteParPerSecond,
		"recover_with_history_ms": rep.RecoverWithHistoryMs, "recover_pending_only_ms": rep.RecoverPendingOnlyMs,
		"bytes_per_execution": rep.BytesPerExecution,
		"seq ratio":           rep.SeqRatio, "par ratio": rep.ParRatio, "recover ratio": rep.RecoverRatio,
		"witness_seq_us": rep.WitnessSeqMicros, "no_witness_seq_us": rep.NoWitnessSeqMicros, "witness seq ratio": rep.WitnessSeqRatio,
		"witness_par_per_s": rep.WitnessParPerSecond, "no_witness_par_per_s": rep.NoWitnessParPerSecond, "witness par ratio": rep.WitnessParRatio,
		"witness bytes": float64(rep.WitnessBytes),
		"floor_seq_us":  rep.FloorSeqMicros, "floor_par_per_s": rep.FloorParPerSecond,
		"floor seq ratio": rep.FloorSeqRatio, "floor par ratio": rep.FloorParRatio,
		"ledger seq over floor": rep.LedgerSeqOverFloorRatio, "ledger par over floor": rep.LedgerParOverFloorRatio,
		"execute seq over floor": rep.SeqOverFloorRatio, "execute par over floor": rep.ParOverFloorRatio,
	} {
		require.Positive(t, v, name)
	}
	// The connector call is measured inside the execution it belongs to.
	for name, c := range map[string][2]float64{
		"manual": {rep.ExecuteSeqCallMicros, rep.ExecuteSeqMicros}, "lazy": {rep.LazySeqCallMicros, rep.LazySeqMicros},
	} {
		require.Positive(t, c[0], "%s: connector call µs per execution", name)
		require.Less(t, c[0], c[1], "%s: the connector call is part of the execution", name)
	}
	// The fsync counts are real: each synced commit waited for an fsync
	// of the log, so a run has at least one and at most one per commit.
	require.Len(t, rep.SyncShares, 2)
	for _, s := range rep.SyncShares {
		for name, v := range map[string]float64{
			"raw": s.RawCommitsPerSync, "execute": s.ExecuteCommitsPerSync, "lazy": s.LazyCommitsPerSync,
		} {
			require.GreaterOrEqual(t, v, 1.0, "%s commits per fsync at %d callers", name, s.Callers)
		}
		require.InDelta(t, 2, s.ExecuteCommitsPerOp, 0.01, "a manual execution commits its intent and its outcome")
		require.LessOrEqual(t, s.RawSyncsPerOp, 2.0)
		require.Positive(t, s.ExecuteBytesPerOp)
	}
	require.Equal(t, 3, rep.Rounds)
	require.Equal(t, 300, rep.History)
	require.Contains(t, phases, "round 3 of 3: raw, floor, ledger and execute, sequential and with 4 callers")
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "scratch directory left behind: %v", err)
}

func TestMedian(t *testing.T) {
	require.Equal(t, 0.0, median(nil))
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
}

// TestMedianShare: each figure of the summary is that figure's median
// over the rounds, taken field by field, not one round's row.
func TestMedianShare(t *testing.T) {
	got := medianShare([]SyncShare{
		{Callers: 16, RawPerSecond: 3, ExecutePerSecond: 10, LazyCPUMicrosPerOp: 7},
		{Callers: 16, RawPerSecond: 1, ExecutePerSecond: 30, LazyCPUMicrosPerOp: 9},
		{Callers: 16, RawPerSecond: 2, ExecutePerSecond: 20, LazyCPUMicrosPerOp: 8},
	})
	require.Equal(t, SyncShare{Callers: 16, RawPerSecond: 2, ExecutePerSecond: 20, LazyCPUMicrosPerOp: 8}, got)
}
