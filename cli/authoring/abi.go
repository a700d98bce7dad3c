package authoring

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/manifests"
)

// abiCheckResult is the output of connhost abi check.
type abiCheckResult struct {
	Module   string `json:"module"`
	Manifest string `json:"manifest,omitempty"`
	wasmrt.CheckReport
}

func (k *kit) abiCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "abi",
		Short: "Check a connector module against the connector ABI (docs/abi.md)",
		Long: `abi holds the commands about the contract between the host and a connector
module, which docs/abi.md specifies for any language.`,
		Args: cobra.NoArgs,
	}
	c.AddCommand(k.abiCheckCommand())
	return c
}

func (k *kit) abiCheckCommand() *cobra.Command {
	var manifest string
	c := &cobra.Command{
		Use:   "check MODULE.wasm [--manifest M]",
		Short: "Check a module against docs/abi.md, and its manifest",
		Long: `check loads a connector module the way the host does and checks it against
the ABI (docs/abi.md), one rule at a time:

  imports      only connhost.* and wasi_snapshot_preview1.* functions the
               host offers, with their signatures
  exports      _initialize, connhost_abi_version, connhost_alloc,
               connhost_describe, and each call export with its signature
  initialize   the module instantiates and _initialize returns
  abi version  connhost_abi_version returns the host's version
  describe     the description decodes, and every entry point it claims
               is exported
  manifest     (with --manifest) every operation is implemented, every
               recovery policy has its entry point, the sha256 is pinned
  round trip   each call export answers an operation it does not know
               (permanent_error; reconcile: unknown), an input of 256 KiB
               (a new connhost_alloc), and every described operation
               with {} as arguments, with a valid outcome envelope

Every HTTP request of a round trip is denied and no config value is set,
so nothing reaches a provider. A failed rule says what is wrong and what
fixes it. The exit code is 0 when the module conforms, 3 otherwise.`,
		Example: `  connhost abi check build/payments.wasm --manifest manifests/payments.toml
  connhost abi check build/email.wasm --json`,
		Args: cli.ExactArgs(1, "a .wasm module"),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := os.ReadFile(args[0])
			if err != nil {
				return cli.Usagef("%v", err)
			}
			var m *manifests.Manifest
			if manifest != "" {
				if m, err = manifests.Load(manifest); err != nil {
					return cli.Usagef("--manifest: %v", err)
				}
			}
			res := abiCheckResult{Module: args[0], Manifest: manifest, CheckReport: wasmrt.Check(cmd.Context(), code, m)}
			if k.JSON() {
				cli.WriteJSON(k.Stdout(), res)
			} else {
				fmt.Fprintf(k.Stdout(), "%s: %d bytes, sha256 %s\n", res.Module, res.Size, res.SHA256)
				for _, s := range res.Steps {
					mark := "ok  "
					if !s.OK {
						mark = "FAIL"
					}
					subject := ""
					if s.Subject != "" {
						subject = " " + s.Subject
					}
					fmt.Fprintf(k.Stdout(), "%s %s%s: %s\n", mark, s.Check, subject, s.Detail)
				}
				if res.Conforms {
					fmt.Fprintln(k.Stdout(), "the module conforms to the connector ABI")
				} else {
					fmt.Fprintf(k.Stdout(), "%d problem(s); docs/abi.md says what each rule requires\n", len(res.Problems()))
				}
			}
			if !res.Conforms {
				return &cli.ExitError{Code: cli.ExitFindings}
			}
			return nil
		},
	}
	c.Flags().StringVar(&manifest, "manifest", "", "the connector's manifest, checked against the module")
	return c
}
