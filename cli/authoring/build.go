package authoring

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// buildResult is the output of connhost build.
type buildResult struct {
	Module string `json:"module"`
	// Language is the connector's: go, rust or assemblyscript.
	Language string `json:"language"`
	SHA256   string `json:"sha256"`
	Manifest string `json:"manifest,omitempty"`
	// Pinned is true when --pin rewrote the manifest's sha256.
	Pinned bool `json:"pinned"`
	// PinnedBefore is the digest the manifest pinned before the build.
	PinnedBefore string `json:"pinned_before,omitempty"`
}

// findManifest returns the manifest of connector name in dir: dir/name.toml
// if it declares that connector, else any manifest in dir that does.
func findManifest(dir, name string) (*manifests.Manifest, error) {
	if m, err := manifests.Load(filepath.Join(dir, name+".toml")); err == nil && m.Connector.Name == name {
		return m, nil
	}
	ms, err := manifests.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.Connector.Name == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no manifest for connector %q in %s", name, dir)
}

func (k *kit) buildCommand() *cobra.Command {
	var (
		pin bool
		out string
	)
	c := &cobra.Command{
		Use:   "build plugins/<name> [--pin] [--out DIR]",
		Short: "Build a connector (Go, Rust or AssemblyScript) to a wasm module and print its sha256",
		Long: `build compiles a connector to a wasm module, reproducibly, writes it to --out
(default --modules) under the module name its manifest declares, and prints
the module's sha256. The directory's files say the language:

  Go              *.go: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
                  -trimpath -buildvcs=false, from the Go module's root
  Rust            Cargo.toml: cargo build --release --offline for
                  wasm32-wasip1, or wasm32-wasi (Debian 12's rustc 1.63 with
                  libstd-rust-dev-wasm32); source paths are remapped so the
                  bytes do not depend on where the sources lie
  AssemblyScript  package.json: the package's own asc (npm ci, or npm
                  install, first when node_modules lacks it) compiles
                  assembly/index.ts with asconfig.json's release target

With --pin it also rewrites the sha256 in the connector's manifest (in
--manifests), keeping everything else in the file byte for byte.`,
		Example: `  connhost build plugins/payments --pin
  connhost build plugins/email --out /tmp/modules --json
  connhost build plugins/mine-in-rust --pin`,
		Args: cli.ExactArgs(1, "a connector package directory (plugins/<name>)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := filepath.Clean(args[0])
			if st, err := os.Stat(src); err != nil || !st.IsDir() {
				return cli.Usagef("%s is not a directory", src)
			}
			name := filepath.Base(src)
			m, merr := findManifest(k.Manifests(), name)
			if pin && merr != nil {
				return fmt.Errorf("--pin: %w", merr)
			}
			if out == "" {
				out = k.Modules()
			}
			module := name + ".wasm"
			if m != nil {
				module = m.Connector.Module
			}
			res := buildResult{Module: filepath.Join(out, module)}
			d, lang, err := wasmbuild.BuildAny(cmd.Context(), src, res.Module)
			if err != nil {
				return err
			}
			res.SHA256, res.Language = d, string(lang)
			if m != nil {
				res.Manifest, res.PinnedBefore = m.Path, m.Connector.SHA256
				if pin && m.Connector.SHA256 != d {
					if err := manifests.PinFile(m.Path, d); err != nil {
						return err
					}
					res.Pinned = true
				}
			}
			if k.JSON() {
				cli.WriteJSON(k.Stdout(), res)
				return nil
			}
			fmt.Fprintf(k.Stdout(), "built   %s (%s)\nsha256  %s\n", res.Module, res.Language, res.SHA256)
			switch {
			case res.Pinned:
				fmt.Fprintf(k.Stdout(), "pinned  %s\n", res.Manifest)
			case res.Manifest != "" && res.PinnedBefore == res.SHA256:
				fmt.Fprintf(k.Stdout(), "%s already pins this digest\n", res.Manifest)
			case res.Manifest != "":
				fmt.Fprintf(k.Stderr(), "note: %s pins %s; run with --pin to pin the new digest\n", res.Manifest, cli.OrDash(res.PinnedBefore))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&pin, "pin", false, "rewrite the sha256 in the connector's manifest")
	c.Flags().StringVar(&out, "out", "", "output directory (default --modules)")
	return c
}
