package commands

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/bench"
)

func (k *kit) benchCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure connhost on this machine against same-run baselines",
	}
	var o bench.LedgerOptions
	var backend, dsn string
	var pgConcurrency int
	ledgerCmd := &cobra.Command{
		Use:   "ledger [--history N] [--pending M] [--concurrency C] [--backend pebble|postgres|both --dsn DSN]",
		Short: "Measure durable executions and recovery time",
		Long: `bench ledger measures, in one run and on this machine:

  raw       two synced Pebble batches per operation (the floor of an
            execution: intent+dispatch, then outcome), sequential and with
            --concurrency writers; and one synced batch followed by one
            unsynced one (the floor of a lazy outcome);
  floor     raw's operation under ids hashed as execution ids are, each
            looked up before it is written: what any ledger keyed by
            derived ids must do (raw's keys are sequential);
  ledger    the ledger's writes of an execution alone (Create, then Apply
            of the outcome), without parsing, validation or a connector
            call: what the ledger costs, apart from what the executor adds;
  execute   Execute with a no-op connector, sequential and with
            --concurrency callers: a manual operation (outcome synced) and
            an idempotent-retry one (outcome_durability lazy), and how much
            of a sequential execution its connector call takes;
  fsyncs    at 16 and 64 callers, how many commits each fsync of the
            write-ahead log made durable, and the CPU time per operation,
            for raw, a manual execute and a lazy one: whether many callers
            wait for fsyncs or for the CPU;
  recovery  opening the ledger and running recovery with --pending pending
            executions, alone and behind --history terminal ones (bulk-loaded,
            so the setup is quick).

Raw, floor, ledger and execute runs alternate in --rounds short rounds, so
all see the same machine load, and the two recovery ledgers are opened
alternately seven times each; each figure is a median and each ratio the
median of the per-round ratios.

It prints each figure and its ratio to the baseline. It needs the source
tree (it builds the no-op test connector) and writes only to a temporary
directory.

With --backend postgres it measures the PostgreSQL ledger on the database
--dsn names instead, in schemas of its own that it drops afterwards: raw
is two committed single-row transactions per operation on the same
server, ledger is Create + Apply, execute is Execute as one node of a
fleet on that server, and recovery is opening the ledger and reading the
pending executions. It counts the commits of the ledger's writes and of
an execution, beside the three DBOS documents for a one-step workflow,
and the share of outcomes PostgreSQL wrote as HOT updates. --history
defaults to 100,000 there.

With --backend both it measures Pebble, then PostgreSQL (with
--postgres-concurrency callers), in one run. Every run ends with the
targets it measured, each a ratio to its baseline in the same rounds: on
Pebble, a sequential manual execution against raw (≤ 1.1×), a sequential
lazy one against one synced plus one unsynced batch (≤ 1.3×), and, with
many callers, where raw's sequential keys are out of any derived-id
ledger's reach, execute (≥ 0.6×) and the ledger's writes (≥ 0.75×) against
the floor; on PostgreSQL, execute against raw sequentially (≤ 1.5×) and
at 16 callers (≥ 0.6×).`,
		Example: `  connhost bench ledger
  connhost bench ledger --history 1000000 --pending 1000 --concurrency 64 --json
  connhost bench ledger --backend postgres --dsn postgres://connhost@127.0.0.1:5432/bench
  connhost bench ledger --backend both --dsn postgres://connhost@127.0.0.1:5432/bench --history 100000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.History < 0 || o.Pending < 1 || o.Concurrency < 1 || o.Rounds < 1 {
				return cli.Usagef("bench ledger needs --history >= 0, --pending >= 1, --concurrency >= 1 and --rounds >= 1")
			}
			if !k.JSON() {
				o.Progress = func(phase string) { fmt.Fprintf(k.Stderr(), "bench: %s\n", phase) }
			}
			// pgOpts are the PostgreSQL run's options: --history's
			// default is RunPostgres's own; with both backends, the
			// callers are --postgres-concurrency.
			pgOpts := func() bench.PostgresOptions {
				po := bench.PostgresOptions{DSN: dsn, LedgerOptions: o}
				switch {
				case !cmd.Flags().Changed("history"):
					po.History = 0 // RunPostgres's default
				case o.History == 0:
					po.History = -1 // explicitly none
				}
				if backend == "both" {
					po.Concurrency = pgConcurrency
				}
				return po
			}
			switch {
			case (backend == "postgres" || backend == "both") && dsn == "":
				return cli.Usagef("bench ledger --backend %s needs --dsn", backend)
			case backend == "postgres":
				return k.benchPostgres(cmd, pgOpts())
			case backend != "pebble" && backend != "both":
				return cli.Usagef("bench ledger --backend is pebble, postgres or both, not %q", backend)
			case backend == "pebble" && dsn != "":
				return cli.Usagef("bench ledger --dsn needs --backend postgres or both")
			case pgConcurrency < 1:
				return cli.Usagef("bench ledger needs --postgres-concurrency >= 1")
			}
			if o.History == 0 {
				o.History = -1 // RunLedger: explicit zero history
			}
			if backend == "both" {
				return k.benchBoth(cmd, bench.BothOptions{Pebble: o, Postgres: pgOpts()})
			}
			rep, err := bench.RunLedger(cmd.Context(), o)
			if err != nil {
				return err
			}
			if k.JSON() {
				cli.WriteJSON(k.Stdout(), rep)
				return nil
			}
			if err := k.printPebble(rep); err != nil {
				return err
			}
			return k.printTargets(bench.PebbleTargets(rep))
		},
	}
	f := ledgerCmd.Flags()
	f.IntVar(&o.History, "history", 1_000_000, "terminal executions in the history")
	f.IntVar(&o.Pending, "pending", 1000, "pending executions to recover")
	f.IntVar(&o.Concurrency, "concurrency", 64, "concurrent writers and callers")
	f.IntVar(&o.Rounds, "rounds", 5, "alternating rounds of raw and execute runs")
	f.StringVar(&backend, "backend", "pebble", "ledger backend to measure: pebble, postgres, or both in one run")
	f.StringVar(&dsn, "dsn", "", "PostgreSQL connection string (--backend postgres or both)")
	f.IntVar(&pgConcurrency, "postgres-concurrency", 16, "concurrent writers and callers of the PostgreSQL run with --backend both")
	c.AddCommand(ledgerCmd)
	return c
}

// share is part's percentage of whole, "-" without a whole.
func share(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*part/whole)
}

// printSyncShares prints how the write-ahead log's fsyncs were shared.
func (k *kit) printSyncShares(shares []bench.SyncShare) error {
	if len(shares) == 0 {
		return nil
	}
	fmt.Fprintf(k.Stdout(), "\nfsync sharing: rate; commits per WAL fsync; fsyncs and CPU per operation\n")
	w := tabwriter.NewWriter(k.Stdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "callers\traw\texecute (manual)\texecute (lazy)\texecute/raw\n")
	for _, s := range shares {
		fmt.Fprintf(w, "%d\t%.0f/s; %.1f; %.2f, %.0f µs\t%.0f/s; %.1f; %.2f, %.0f µs\t%.0f/s; %.1f; %.2f, %.0f µs\t%.2f×\n",
			s.Callers, s.RawPerSecond, s.RawCommitsPerSync, s.RawSyncsPerOp, s.RawCPUMicrosPerOp,
			s.ExecutePerSecond, s.ExecuteCommitsPerSync, s.ExecuteSyncsPerOp, s.ExecuteCPUMicrosPerOp,
			s.LazyPerSecond, s.LazyCommitsPerSync, s.LazySyncsPerOp, s.LazyCPUMicrosPerOp, s.ExecuteOverRawPerSecond)
	}
	return w.Flush()
}

// printPebble prints the Pebble ledger measurement.
func (k *kit) printPebble(rep bench.LedgerReport) error {
	w := tabwriter.NewWriter(k.Stdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "Pebble\tvalue\tbaseline\tratio\n")
	fmt.Fprintf(w, "lazy outcome, sequential\t%.0f µs/execution\t%.0f µs/op raw\t%.2f×\n", rep.LazySeqMicros, rep.RawSeqMicros, rep.LazySeqRatio)
	fmt.Fprintf(w, "  against one synced batch\t\t%.0f µs/op raw, 2nd unsynced\t%.2f× (target ≤ 1.3×)\n", rep.RawLazySeqMicros, rep.LazySeqOverRawLazyRatio)
	fmt.Fprintf(w, "  of which the connector call\t%.0f µs/execution\t\t%s of it\n", rep.LazySeqCallMicros, share(rep.LazySeqCallMicros, rep.LazySeqMicros))
	fmt.Fprintf(w, "lazy outcome, at %d\t%.0f executions/s\t%.0f ops/s raw\t%.2f×\n", rep.Concurrency, rep.LazyParPerSecond, rep.RawParPerSecond, rep.LazyParRatio)
	fmt.Fprintf(w, "synced outcome (manual), sequential\t%.0f µs/execution\t%.0f µs/op raw\t%.2f× (target ≤ 1.1×)\n", rep.ExecuteSeqMicros, rep.RawSeqMicros, rep.SeqRatio)
	fmt.Fprintf(w, "  ledger writes alone\t%.0f µs/execution\t\t%.2f×\n", rep.LedgerSeqMicros, rep.LedgerSeqRatio)
	fmt.Fprintf(w, "  against the floor\t\t%.0f µs/op floor (%.2f× raw)\t%.2f× (ledger writes %.2f×)\n", rep.FloorSeqMicros, rep.FloorSeqRatio, rep.SeqOverFloorRatio, rep.LedgerSeqOverFloorRatio)
	fmt.Fprintf(w, "  of which the connector call\t%.0f µs/execution\t\t%s of it\n", rep.ExecuteSeqCallMicros, share(rep.ExecuteSeqCallMicros, rep.ExecuteSeqMicros))
	fmt.Fprintf(w, "synced outcome (manual), at %d\t%.0f executions/s\t%.0f ops/s raw\t%.2f×\n", rep.Concurrency, rep.ExecuteParPerSecond, rep.RawParPerSecond, rep.ParRatio)
	fmt.Fprintf(w, "  ledger writes alone\t%.0f executions/s\t\t%.2f×\n", rep.LedgerParPerSecond, rep.LedgerParRatio)
	fmt.Fprintf(w, "  against the floor\t\t%.0f ops/s floor (%.2f× raw)\t%.2f× (target ≥ 0.6× at 64; ledger writes %.2f×, target ≥ 0.75× at 64)\n", rep.FloorParPerSecond, rep.FloorParRatio, rep.ParOverFloorRatio, rep.LedgerParOverFloorRatio)
	fmt.Fprintf(w, "open + recover\t%.1f ms with %d history\t%.1f ms pending only\t%.2f× (target ≤ 1.5×)\n", rep.RecoverWithHistoryMs, rep.History, rep.RecoverPendingOnlyMs, rep.RecoverRatio)
	fmt.Fprintf(w, "disk\t%.0f bytes/execution\t\t\n", rep.BytesPerExecution)
	fmt.Fprintf(w, "witness, sequential\t%.0f µs/execution\t%.0f µs without\t%.2f×\n", rep.WitnessSeqMicros, rep.NoWitnessSeqMicros, rep.WitnessSeqRatio)
	fmt.Fprintf(w, "witness, at %d\t%.0f executions/s\t%.0f without\t%.2f×\n", rep.Concurrency, rep.WitnessParPerSecond, rep.NoWitnessParPerSecond, rep.WitnessParRatio)
	fmt.Fprintf(w, "  (the ledger's writes, a session each; witness of %d bytes)\t\t\t\n", rep.WitnessBytes)
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(k.Stdout(), "(medians of %d rounds; GOMAXPROCS %d on %d CPUs)\n", rep.Rounds, rep.GOMAXPROCS, rep.CPUs)
	return k.printSyncShares(rep.SyncShares)
}

// printTargets prints each target, its ratio in this run, and whether it
// is met.
func (k *kit) printTargets(ts []bench.Target) error {
	fmt.Fprintf(k.Stdout(), "\ntargets (each ratio against its baseline in the same rounds)\n")
	w := tabwriter.NewWriter(k.Stdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "backend\tcompared\tratio\ttarget\t\n")
	for _, t := range ts {
		met := "missed"
		if t.Met {
			met = "met"
		}
		fmt.Fprintf(w, "%s\t%s\t%.2f×\t%s\t%s\n", t.Backend, t.Name, t.Ratio, t.BoundText(), met)
	}
	return w.Flush()
}

// benchBoth runs and prints both backends' measurements and the targets.
func (k *kit) benchBoth(cmd *cobra.Command, o bench.BothOptions) error {
	rep, err := bench.RunBoth(cmd.Context(), o)
	if err != nil {
		return err
	}
	if k.JSON() {
		cli.WriteJSON(k.Stdout(), rep)
		return nil
	}
	if err := k.printPebble(rep.Pebble); err != nil {
		return err
	}
	fmt.Fprintln(k.Stdout())
	if err := k.printPostgres(rep.Postgres); err != nil {
		return err
	}
	return k.printTargets(rep.Targets)
}

// benchPostgres runs and prints the PostgreSQL ledger measurement.
func (k *kit) benchPostgres(cmd *cobra.Command, o bench.PostgresOptions) error {
	rep, err := bench.RunPostgres(cmd.Context(), o)
	if err != nil {
		return err
	}
	if k.JSON() {
		cli.WriteJSON(k.Stdout(), rep)
		return nil
	}
	if err := k.printPostgres(rep); err != nil {
		return err
	}
	return k.printTargets(bench.PostgresTargets(rep))
}

// printPostgres prints the PostgreSQL ledger measurement.
func (k *kit) printPostgres(rep bench.PostgresReport) error {
	w := tabwriter.NewWriter(k.Stdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "PostgreSQL\tvalue\tbaseline\tratio\n")
	fmt.Fprintf(w, "ledger sequential latency\t%.0f µs/execution\t%.0f µs/op raw\t%.2f×\n", rep.LedgerSeqMicros, rep.RawSeqMicros, rep.SeqRatio)
	fmt.Fprintf(w, "ledger throughput at %d\t%.0f executions/s\t%.0f ops/s raw\t%.2f×\n", rep.Concurrency, rep.LedgerParPerSecond, rep.RawParPerSecond, rep.ParRatio)
	fmt.Fprintf(w, "execute sequential latency\t%.0f µs/execution\t%.0f µs/op raw\t%.2f× (target ≤ 1.5×)\n", rep.ExecuteSeqMicros, rep.RawSeqMicros, rep.ExecuteSeqRatio)
	fmt.Fprintf(w, "execute throughput at %d\t%.0f executions/s\t%.0f ops/s raw\t%.2f× (target ≥ 0.6× at 16)\n", rep.Concurrency, rep.ExecuteParPerSecond, rep.RawParPerSecond, rep.ExecuteParRatio)
	fmt.Fprintf(w, "outcomes written as HOT updates\t%.0f%%\t\t\n", 100*rep.HOTUpdateShare)
	fmt.Fprintf(w, "open + pending scan\t%.1f ms with %d history\t%.1f ms pending only\t%.2f× (target ≤ 1.5×)\n", rep.RecoverWithHistoryMs, rep.History, rep.RecoverPendingOnlyMs, rep.RecoverRatio)
	fmt.Fprintf(w, "storage\t%.0f bytes/execution (tables + indexes)\t%.0f WAL bytes/execution\t\n", rep.BytesPerExecution, rep.WALBytesPerExecution)
	fmt.Fprintf(w, "commits, ledger writes\t%.2f per execution\t\t\n", rep.CommitsPerExecution)
	fmt.Fprintf(w, "commits, execute\t%.2f per execution\tDBOS: %.0f per one-step workflow (published)\t\n", rep.ExecuteCommitsPerExecution, rep.DBOSCommitsPerStep)
	fmt.Fprintf(w, "witness, sequential\t%.0f µs/execution\t%.0f µs without\t%.2f×\n", rep.WitnessSeqMicros, rep.NoWitnessSeqMicros, rep.WitnessSeqRatio)
	fmt.Fprintf(w, "witness, at %d\t%.0f executions/s\t%.0f without\t%.2f×\n", rep.Concurrency, rep.WitnessParPerSecond, rep.NoWitnessParPerSecond, rep.WitnessParRatio)
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(k.Stdout(), "(PostgreSQL %s; medians of %d rounds; %d connections; GOMAXPROCS %d on %d CPUs)\n", rep.ServerVersion, rep.Rounds, rep.MaxConns, rep.GOMAXPROCS, rep.CPUs)
	return nil
}
