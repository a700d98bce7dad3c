package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/internal/bench"
)

func (a *app) benchCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure connhost on this machine against same-run baselines",
	}
	var o bench.LedgerOptions
	ledgerCmd := &cobra.Command{
		Use:   "ledger [--history N] [--pending M] [--concurrency C]",
		Short: "Measure durable executions and recovery time",
		Long: `bench ledger measures, in one run and on this machine:

  raw       two synced Pebble batches per operation (the floor of an
            execution: intent+dispatch, then outcome), sequential and with
            --concurrency writers;
  ledger    the ledger's writes of an execution alone (Create, then Apply
            of the outcome), without parsing, validation or a connector
            call: what the ledger costs, apart from what the executor adds;
  execute   Execute with a no-op connector, sequential and with
            --concurrency callers;
  recovery  opening the ledger and running recovery with --pending pending
            executions, alone and behind --history terminal ones (bulk-loaded,
            so the setup is quick).

Raw, ledger and execute runs alternate in --rounds short rounds, so all
three see the same machine load, and the two recovery ledgers are opened
alternately seven times each; each figure is a median and each ratio the
median of the per-round ratios.

It prints each figure and its ratio to the baseline. It needs the source
tree (it builds the no-op test connector) and writes only to a temporary
directory.`,
		Example: `  connhost bench ledger
  connhost bench ledger --history 1000000 --pending 1000 --concurrency 64 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.History < 0 || o.Pending < 1 || o.Concurrency < 1 || o.Rounds < 1 {
				return usagef("bench ledger needs --history >= 0, --pending >= 1, --concurrency >= 1 and --rounds >= 1")
			}
			if !a.g.json {
				o.Progress = func(phase string) { fmt.Fprintf(a.stderr, "bench: %s\n", phase) }
			}
			if o.History == 0 {
				o.History = -1 // RunLedger: explicit zero history
			}
			rep, err := bench.RunLedger(cmd.Context(), o)
			if err != nil {
				return err
			}
			if a.g.json {
				writeJSON(a.stdout, rep)
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "measure\tvalue\tbaseline\tratio\n")
			fmt.Fprintf(w, "lazy outcome, sequential\t%.0f µs/execution\t%.0f µs/op raw\t%.2f× (target ≤ 1.0×)\n", rep.LazySeqMicros, rep.RawSeqMicros, rep.LazySeqRatio)
			fmt.Fprintf(w, "  against one synced batch\t\t%.0f µs/op raw, 2nd unsynced\t%.2f× (target ≤ 1.3×)\n", rep.RawLazySeqMicros, rep.LazySeqOverRawLazyRatio)
			fmt.Fprintf(w, "lazy outcome, at %d\t%.0f executions/s\t%.0f ops/s raw\t%.2f× (target ≥ 0.5×)\n", rep.Concurrency, rep.LazyParPerSecond, rep.RawParPerSecond, rep.LazyParRatio)
			fmt.Fprintf(w, "synced outcome (manual), sequential\t%.0f µs/execution\t%.0f µs/op raw\t%.2f× (target ≤ 1.3×)\n", rep.ExecuteSeqMicros, rep.RawSeqMicros, rep.SeqRatio)
			fmt.Fprintf(w, "  ledger writes alone\t%.0f µs/execution\t\t%.2f×\n", rep.LedgerSeqMicros, rep.LedgerSeqRatio)
			fmt.Fprintf(w, "synced outcome (manual), at %d\t%.0f executions/s\t%.0f ops/s raw\t%.2f× (target ≥ 0.5×)\n", rep.Concurrency, rep.ExecuteParPerSecond, rep.RawParPerSecond, rep.ParRatio)
			fmt.Fprintf(w, "  ledger writes alone\t%.0f executions/s\t\t%.2f×\n", rep.LedgerParPerSecond, rep.LedgerParRatio)
			fmt.Fprintf(w, "open + recover\t%.1f ms with %d history\t%.1f ms pending only\t%.2f× (target ≤ 1.5×)\n", rep.RecoverWithHistoryMs, rep.History, rep.RecoverPendingOnlyMs, rep.RecoverRatio)
			fmt.Fprintf(w, "disk\t%.0f bytes/execution\t\t\n", rep.BytesPerExecution)
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "(medians of %d rounds; GOMAXPROCS %d on %d CPUs)\n", rep.Rounds, rep.GOMAXPROCS, rep.CPUs)
			return nil
		},
	}
	f := ledgerCmd.Flags()
	f.IntVar(&o.History, "history", 1_000_000, "terminal executions in the history")
	f.IntVar(&o.Pending, "pending", 1000, "pending executions to recover")
	f.IntVar(&o.Concurrency, "concurrency", 64, "concurrent writers and callers")
	f.IntVar(&o.Rounds, "rounds", 5, "alternating rounds of raw and execute runs")
	c.AddCommand(ledgerCmd)
	return c
}
