package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/internal/crashtest"
	"github.com/connhost/connhost/internal/sandbox"
	"github.com/connhost/connhost/manifests"
)

// The providers crashtest can stand in for with its in-process emulators.
const (
	providerPayments = "payments" // the Stripe API subset
	providerEmail    = "email"    // the Mailpit API subset
)

func (a *app) crashtestCommand() *cobra.Command {
	var manifest, operation, args, provider string
	c := &cobra.Command{
		Use:   "crashtest --manifest FILE [--operation X] [--args JSON]",
		Short: "Kill connhost at every crash point and check the provider saw no duplicate",
		Long: `crashtest runs the fault-injection matrix for a connector: for each crash
point it starts a real connhost process with CONNHOST_CRASH_AT set, lets it
die, restarts it on the same data directory and checks what the provider
saw against the operation's declared recovery policy. It exits 3 when a
policy's promise is broken.

Every crash point × operation × approval variant (requires_approval on and
off; reads ungated only) runs in a fresh data directory against local
provider emulators (the Stripe and Mailpit API subsets of connhost sandbox),
with this binary as the connhost it kills. The connector's module comes from
--modules (built from plugins/<connector> when missing); an unpinned
manifest is pinned to that module in a temporary copy. The provider is the
Stripe emulator when the manifest allowlists api.stripe.com, else the
Mailpit one (--provider overrides).

The shipped operations have built-in sample arguments; give others with
--args (for --operation, or for every operation without defaults).`,
		Example: `  connhost crashtest --manifest manifests/payments.toml
  connhost crashtest --manifest manifests/email.toml --operation send --json
  connhost crashtest --manifest manifests/payments.toml --operation create_payment \
      --args '{"amount":100,"currency":"eur","payment_method":"pm_card_visa"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			m, err := manifests.Load(manifest)
			if err != nil {
				return err
			}
			if operation != "" {
				if _, ok := m.Operation(operation); !ok {
					return usagef("--operation: connector %s has no operation %q", m.Connector.Name, operation)
				}
			}
			var given json.RawMessage
			if args != "" {
				raw, err := a.readArg(args)
				if err != nil {
					return usagef("--args: %v", err)
				}
				if !json.Valid(raw) {
					return usagef("--args is not valid JSON")
				}
				given = raw
			}
			if provider == "" {
				provider = providerFor(m)
			}
			if provider != providerPayments && provider != providerEmail {
				return usagef("--provider must be %s or %s", providerPayments, providerEmail)
			}
			if err := a.buildMissing(ctx, []*manifests.Manifest{m}); err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("crashtest: find own binary: %w", err)
			}
			rep, err := a.runCrashtest(ctx, m, self, provider, operation, given)
			if err != nil {
				return err
			}
			if a.g.json {
				writeJSON(a.stdout, rep)
			} else if err := rep.WriteTable(a.stdout); err != nil {
				return err
			}
			if !rep.OK() {
				if !a.g.json {
					fmt.Fprintf(a.stderr, "connhost: crashtest: %d cell(s) break the declared recovery policy\n", rep.Totals.Failed)
				}
				return &exitError{code: ExitFindings}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&manifest, "manifest", "", "the connector's manifest (required)")
	f.StringVar(&operation, "operation", "", "only this operation")
	f.StringVar(&args, "args", "", "sample arguments (JSON or @file) for --operation, or for operations without built-in ones")
	f.StringVar(&provider, "provider", "", "emulator the connector talks to: payments or email (default: from the manifest's http allowlist)")
	_ = c.MarkFlagRequired("manifest")
	return c
}

// providerFor picks the emulator from what the manifest allowlists.
func providerFor(m *manifests.Manifest) string {
	for _, o := range m.Capabilities.HTTP {
		if strings.Contains(o, "stripe.com") {
			return providerPayments
		}
	}
	return providerEmail
}

// runCrashtest starts the emulators, writes a connhost.toml pointing the
// connector at its emulator and runs the matrix.
func (a *app) runCrashtest(ctx context.Context, m *manifests.Manifest, binary, provider, operation string, given json.RawMessage) (crashtest.Report, error) {
	sb, err := sandbox.Start(ctx, sandbox.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		return crashtest.Report{}, fmt.Errorf("crashtest: start provider emulators: %w", err)
	}
	defer sb.Close()
	work, err := os.MkdirTemp("", "connhost-crashtest-")
	if err != nil {
		return crashtest.Report{}, fmt.Errorf("crashtest: %w", err)
	}
	defer os.RemoveAll(work)

	cfg := map[string]string{"base_url": sb.EmailURL()}
	if provider == providerPayments {
		cfg = map[string]string{"base_url": sb.PaymentsURL(), "api_key": sandbox.DefaultAPIKey}
	}
	for k := range cfg {
		if !slices.Contains(m.Capabilities.Config, k) {
			delete(cfg, k)
		}
	}
	cfgPath := filepath.Join(work, "connhost.toml")
	if err := crashtest.WriteConfig(cfgPath, map[string]map[string]string{m.Connector.Name: cfg}); err != nil {
		return crashtest.Report{}, fmt.Errorf("crashtest: %w", err)
	}
	prov := crashtest.NewProvider(sb.PaymentsURL(), sb.EmailURL())
	o := crashtest.Options{
		Binary:   binary,
		Manifest: m.Path,
		Modules:  a.g.modules,
		Config:   cfgPath,
		Effects:  prov.Effects,
		Exists:   prov.Exists,
		Hold:     prov,
		WorkDir:  work,
		Args: func(ctx context.Context, op string) (json.RawMessage, error) {
			if given != nil && (operation == "" || op == operation) {
				if sample, err := prov.Args(ctx, op); err == nil && operation == "" {
					return sample, nil // --args is for operations without defaults
				}
				return given, nil
			}
			return prov.Args(ctx, op)
		},
	}
	if operation != "" {
		o.Operations = []string{operation}
	}
	if a.isTerminal(a.stderr) && !a.g.json {
		o.Progress = func(r crashtest.Row) {
			fmt.Fprintf(a.stderr, "\r\033[K%s × %s gated=%t: %s", r.Point, r.Operation, r.Gated, r.Final)
		}
		defer fmt.Fprint(a.stderr, "\r\033[K")
	}
	return crashtest.Run(ctx, o)
}
