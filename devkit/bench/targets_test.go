package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTargets: each target reads its ratio from the field measured
// against its own baseline (raw, raw's lazy floor, or the floor of
// derived ids), holds it to the bound in the right direction,
// and is met exactly at the bound.
func TestTargets(t *testing.T) {
	peb := PebbleTargets(LedgerReport{Concurrency: 64, SeqRatio: 1.1, LazySeqOverRawLazyRatio: 1.31,
		ParOverFloorRatio: 0.59, LedgerParOverFloorRatio: 0.75, ParRatio: 0.9, LedgerParRatio: 0.9})
	pg := PostgresTargets(PostgresReport{Concurrency: 16, ExecuteSeqRatio: 1.2, ExecuteParRatio: 0.7, SeqRatio: 9, ParRatio: 0.1})
	type row struct {
		name   string
		ratio  float64
		bound  string
		met    bool
		atMost bool
	}
	var got []row
	for _, tg := range append(peb, pg...) {
		got = append(got, row{tg.Backend + ": " + tg.Name, tg.Ratio, tg.BoundText(), tg.Met, tg.AtMost})
	}
	require.Equal(t, []row{
		{"pebble: manual execute, sequential / raw two synced batches", 1.1, "≤ 1.1×", true, true},
		{"pebble: lazy execute, sequential / raw one synced + one unsynced batch", 1.31, "≤ 1.3×", false, true},
		{"pebble: manual execute, 64 callers / floor", 0.59, "≥ 0.6×", false, false},
		{"pebble: ledger writes, 64 callers / floor", 0.75, "≥ 0.75×", true, false},
		{"postgres: execute, sequential / raw two commits", 1.2, "≤ 1.5×", true, true},
		{"postgres: execute, 16 callers / raw two commits", 0.7, "≥ 0.6×", true, false},
	}, got)
}
