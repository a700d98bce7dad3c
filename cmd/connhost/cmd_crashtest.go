package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) crashtestCommand() *cobra.Command {
	var manifest, operation string
	c := &cobra.Command{
		Use:   "crashtest --manifest FILE [--operation X]",
		Short: "Kill connhost at every crash point and check the provider saw no duplicate",
		Long: `crashtest runs the fault-injection matrix for a connector: for each crash
point it starts a real connhost process with CONNHOST_CRASH_AT set, lets it
die, restarts it on the same data directory and checks what the provider
saw against the operation's declared recovery policy. It exits 3 when a
policy's promise is broken.`,
		Example: `  connhost crashtest --manifest manifests/payments.toml
  connhost crashtest --manifest manifests/email.toml --operation send --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// TODO(lead): wire the crash matrix.
			return fmt.Errorf("crashtest: %w", errNotImplemented)
		},
	}
	c.Flags().StringVar(&manifest, "manifest", "", "the connector's manifest (required)")
	c.Flags().StringVar(&operation, "operation", "", "only this operation")
	_ = c.MarkFlagRequired("manifest")
	return c
}
