package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Show a crash between a payment and its record, and what recovery does",
		Long: `demo walks through the story connhost exists for: a payment whose process
is killed after the provider applied it but before the outcome was recorded,
and how each recovery policy answers on restart.`,
		Example: `  connhost demo`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// TODO(lead): wire the demo.
			return fmt.Errorf("demo: %w", errNotImplemented)
		},
	}
}
