package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/host"
)

func (a *app) pruneCommand() *cobra.Command {
	var olderThan time.Duration
	c := &cobra.Command{
		Use:   "prune --older-than DURATION",
		Short: "Delete terminal executions older than a retention age",
		Long: `prune deletes the records and audit trails of executions that became
terminal (succeeded, failed, rejected, expired, abandoned, cancelled) more
than --older-than ago. Each pruned execution id keeps a tombstone, so the
same tool call is never executed again as new: re-issuing it is refused
with "pruned". Pending and recovery_required executions are never pruned.
It also deletes the console sessions that expired more than --older-than
ago (revoked or not: an expired session opens nothing).`,
		Example: `  connhost prune --config docs/connhost.example.toml --older-than 720h
  connhost prune --config docs/connhost.example.toml --older-than 2160h --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan <= 0 {
				return usagef("prune needs --older-than with a positive duration, e.g. 720h")
			}
			var n int
			err := a.withExecutor(cmd.Context(), openOptions{existing: true}, func(ex *host.Executor) error {
				var err error
				n, err = ex.Ledger().Prune(cmd.Context(), time.Now().Add(-olderThan))
				return err
			})
			if err != nil {
				return err
			}
			if a.g.json {
				writeJSON(a.stdout, map[string]any{"pruned": n, "older_than": olderThan.String()})
				return nil
			}
			fmt.Fprintf(a.stdout, "pruned %d terminal execution(s) older than %s\n", n, olderThan)
			return nil
		},
	}
	c.Flags().DurationVar(&olderThan, "older-than", 0, "retention age: prune executions terminal for longer than this")
	return c
}
