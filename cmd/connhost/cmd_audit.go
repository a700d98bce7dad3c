package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) auditCommand() *cobra.Command {
	var strict bool
	var html string
	var diff []string
	c := &cobra.Command{
		Use:   "audit [--strict] [--html FILE] [--diff OLD NEW] <manifest or dir>...",
		Short: "Check manifests against what their modules really do",
		Long: `audit cross-checks each manifest with its module (exports, declared
recovery policies, capabilities) and reports findings. It exits 3 when it
finds problems (with --strict, warnings count too).`,
		Example: `  connhost audit manifests/
  connhost audit --strict --html report.html manifests/payments.toml
  connhost audit --diff old/payments.toml manifests/payments.toml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(diff) == 0 {
				return usagef("audit needs at least one manifest or directory")
			}
			// TODO(lead): wire the audit (internal/audit).
			return fmt.Errorf("audit: %w", errNotImplemented)
		},
	}
	c.Flags().BoolVar(&strict, "strict", false, "treat warnings as findings")
	c.Flags().StringVar(&html, "html", "", "also write an HTML report to FILE")
	c.Flags().StringSliceVar(&diff, "diff", nil, "compare two manifests: --diff OLD --diff NEW (or --diff OLD,NEW)")
	return c
}
