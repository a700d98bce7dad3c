package bench

import (
	"context"
	"fmt"
)

// Target is one speed target, read from a run's figures: a ratio of
// connhost to the baseline measured in the same rounds, and whether it
// meets its bound.
type Target struct {
	// Name says what is compared, and at how many callers.
	Name string `json:"name"`
	// Backend is "pebble" or "postgres".
	Backend string `json:"backend"`
	// Ratio is the measured ratio (the median of the per-round ratios);
	// Bound the target it is held to: at most Bound if AtMost, else at
	// least.
	Ratio  float64 `json:"ratio"`
	Bound  float64 `json:"bound"`
	AtMost bool    `json:"at_most"`
	// Met says whether Ratio is within Bound.
	Met bool `json:"met"`
}

func target(backend, name string, ratio, bound float64, atMost bool) Target {
	met := ratio >= bound
	if atMost {
		met = ratio <= bound
	}
	return Target{Name: name, Backend: backend, Ratio: ratio, Bound: bound, AtMost: atMost, Met: met}
}

// BoundText is the target as text: "≤ 1.1×" or "≥ 0.6×".
func (t Target) BoundText() string {
	if t.AtMost {
		return fmt.Sprintf("≤ %.2g×", t.Bound)
	}
	return fmt.Sprintf("≥ %.2g×", t.Bound)
}

// PebbleTargets are the targets of the Pebble ledger, read from rep.
// Against raw Pebble's sequential keys no ledger keyed by derived ids
// reaches raw's throughput with many callers (its ids must be looked up
// and land at random places), so the targets with many callers are held
// against the floor measured in the same rounds (raw's batches under
// hashed ids, each looked up first); the sequential ones, where hashed ids
// cost almost nothing, against raw.
func PebbleTargets(rep LedgerReport) []Target {
	c := rep.Concurrency
	return []Target{
		target("pebble", "manual execute, sequential / raw two synced batches", rep.SeqRatio, 1.1, true),
		target("pebble", "lazy execute, sequential / raw one synced + one unsynced batch", rep.LazySeqOverRawLazyRatio, 1.3, true),
		target("pebble", fmt.Sprintf("manual execute, %d callers / floor", c), rep.ParOverFloorRatio, 0.6, false),
		target("pebble", fmt.Sprintf("ledger writes, %d callers / floor", c), rep.LedgerParOverFloorRatio, 0.75, false),
	}
}

// PostgresTargets are the targets of the PostgreSQL ledger, read from
// rep: an execution through the executor, one node of a fleet, against
// two committed single-row transactions on the same server.
func PostgresTargets(rep PostgresReport) []Target {
	return []Target{
		target("postgres", "execute, sequential / raw two commits", rep.ExecuteSeqRatio, 1.5, true),
		target("postgres", fmt.Sprintf("execute, %d callers / raw two commits", rep.Concurrency), rep.ExecuteParRatio, 0.6, false),
	}
}

// BothOptions configures RunBoth.
type BothOptions struct {
	// Pebble configures the Pebble measurement (RunLedger).
	Pebble LedgerOptions
	// Postgres configures the PostgreSQL one (RunPostgres); its DSN is
	// required.
	Postgres PostgresOptions
}

// BothReport is the result of RunBoth: each backend's report and every
// target, each read from the rounds of its own backend.
type BothReport struct {
	Pebble   LedgerReport   `json:"pebble"`
	Postgres PostgresReport `json:"postgres"`
	Targets  []Target       `json:"targets"`
}

// RunBoth measures the Pebble ledger against raw Pebble and the floor,
// then the PostgreSQL ledger against raw PostgreSQL, in one run, and
// reads every target from the figures.
func RunBoth(ctx context.Context, o BothOptions) (BothReport, error) {
	var rep BothReport
	var err error
	if rep.Pebble, err = RunLedger(ctx, o.Pebble); err != nil {
		return rep, err
	}
	if rep.Postgres, err = RunPostgres(ctx, o.Postgres); err != nil {
		return rep, err
	}
	rep.Targets = append(PebbleTargets(rep.Pebble), PostgresTargets(rep.Postgres)...)
	return rep, nil
}
