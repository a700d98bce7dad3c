package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) benchCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks",
	}
	var history, pending, concurrency int
	ledgerCmd := &cobra.Command{
		Use:   "ledger [--history N] [--pending M] [--concurrency C]",
		Short: "Measure durable executions and recovery time",
		Long: `bench ledger measures the cost of a durable execution (fsyncs per
execution under concurrency) and recovery time with N terminal executions of
history and M pending ones.`,
		Example: `  connhost bench ledger --history 1000000 --pending 1000 --concurrency 64 --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// TODO(lead): wire the ledger benchmark.
			return fmt.Errorf("bench ledger: %w", errNotImplemented)
		},
	}
	ledgerCmd.Flags().IntVar(&history, "history", 100000, "terminal executions in the history")
	ledgerCmd.Flags().IntVar(&pending, "pending", 1000, "pending executions to recover")
	ledgerCmd.Flags().IntVar(&concurrency, "concurrency", 16, "concurrent executions")
	c.AddCommand(ledgerCmd)
	return c
}
