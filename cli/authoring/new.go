package authoring

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/sdk"
)

//go:embed scaffold/*.tmpl scaffold/rust/*.tmpl scaffold/assemblyscript/*.tmpl
var scaffoldFS embed.FS

// scaffoldFile is one file connhost new writes.
type scaffoldFile struct {
	tmpl string // template in scaffold/
	path string // relative to --dir
}

// scaffoldFiles lists what connhost new writes for a connector in lang.
func scaffoldFiles(lang wasmbuild.Lang, name string) []scaffoldFile {
	plugin := filepath.Join("plugins", name)
	shared := []scaffoldFile{
		{"manifest.toml.tmpl", filepath.Join("manifests", name+".toml")},
		{"probe.toml.tmpl", filepath.Join("manifests", name+".probe.toml")},
	}
	switch lang {
	case wasmbuild.LangRust:
		return append([]scaffoldFile{
			{"rust/Cargo.toml.tmpl", filepath.Join(plugin, "Cargo.toml")},
			{"rust/lib.rs.tmpl", filepath.Join(plugin, "src", "lib.rs")},
			{"rust/gitignore.tmpl", filepath.Join(plugin, ".gitignore")},
		}, shared...)
	case wasmbuild.LangAssemblyScript:
		return append([]scaffoldFile{
			{"assemblyscript/package.json.tmpl", filepath.Join(plugin, "package.json")},
			{"assemblyscript/asconfig.json.tmpl", filepath.Join(plugin, "asconfig.json")},
			{"assemblyscript/index.ts.tmpl", filepath.Join(plugin, "assembly", "index.ts")},
			{"assemblyscript/gitignore.tmpl", filepath.Join(plugin, ".gitignore")},
		}, shared...)
	}
	return append([]scaffoldFile{
		{"main.go.tmpl", filepath.Join(plugin, "main.go")},
		{"connector_test.go.tmpl", filepath.Join(plugin, name+"_test.go")},
	}, shared...)
}

// kitDirs are the kits connhost new vendors, by language: the directory
// under --dir and the directory in sdk.Kits.
var kitDirs = map[wasmbuild.Lang]string{
	wasmbuild.LangRust:           filepath.Join("sdk", "rust", "connhost-guest"),
	wasmbuild.LangAssemblyScript: filepath.Join("sdk", "assemblyscript"),
}

// vendorKit writes the kit of lang into dir/sdk/… unless one is there,
// and returns the files it wrote.
func vendorKit(dir string, lang wasmbuild.Lang) ([]string, error) {
	rel, ok := kitDirs[lang]
	if !ok {
		return nil, nil
	}
	target := filepath.Join(dir, rel)
	if _, err := os.Stat(target); err == nil {
		return nil, nil // the project's own copy (this repository's, or an earlier new's)
	}
	src := strings.TrimPrefix(filepath.ToSlash(rel), "sdk/")
	var written []string
	err := fs.WalkDir(sdk.Kits, src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sdk.Kits.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(dir, "sdk", filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		written = append(written, out)
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("new: vendor the %s kit: %w", lang, err)
	}
	return written, nil
}

func (k *kit) newCommand() *cobra.Command {
	var dir, lang string
	c := &cobra.Command{
		Use:   "new <name> [--lang go|assemblyscript|rust] [--dir DIR]",
		Short: "Scaffold a connector in Go, AssemblyScript or Rust: plugins/<name>/ and manifests/<name>.toml",
		Long: `new writes a connector to start from, in DIR (default: the current
directory). With --lang go (the default) DIR is the root of a Go module that
can import github.com/connhost/connhost, and new writes:

  plugins/<name>/main.go          package main with an empty main and two
                                  operations: create_item (a side effect:
                                  execute_with_key sending the host's key as
                                  Idempotency-Key, and reconcile looking the
                                  key up) and get_item (a read)
  plugins/<name>/<name>_test.go   unit tests with guesttest against a
                                  stand-in provider, and the manifest check
  manifests/<name>.toml           the manifest, every policy choice commented
  manifests/<name>.probe.toml     how connhost crashtest --probe observes the
                                  provider through its own API (the request
                                  to hold, how effects are counted, how a
                                  receipt is looked up, sample arguments)

With --lang rust, plugins/<name>/ is a cargo crate (Cargo.toml, src/lib.rs
with the same two operations and cargo tests against a stand-in provider)
on the kit sdk/rust/connhost-guest; with --lang assemblyscript, an npm
package (package.json pinning assemblyscript, asconfig.json,
assembly/index.ts) on the kit sdk/assemblyscript. When DIR has no copy of
the kit, new writes one there (no registry is needed to build). The
manifest and the probe config are the same in every language; docs/abi.md
is the contract the kits implement.

The directory name is the connector's name: connhost build plugins/<name>
--pin finds manifests/<name>.toml by it, and builds any of the three
languages. new refuses to overwrite anything.`,
		Example: `  connhost new webhook
  connhost new webhook --lang rust
  connhost new webhook --lang assemblyscript --dir ../my-connectors`,
		Args: cli.ExactArgs(1, "the connector's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !manifests.ValidConnectorName(name) {
				return cli.Usagef("connector name %q: use lower-case letters, digits, - and _, starting with a letter (at most 32)", name)
			}
			l := wasmbuild.Lang(lang)
			if !slices.Contains(wasmbuild.Langs, l) {
				return cli.Usagef("--lang %q: use go, assemblyscript or rust", lang)
			}
			written, err := writeScaffold(dir, name, scaffoldFiles(l, name))
			if err != nil {
				return err
			}
			kit, err := vendorKit(dir, l)
			if err != nil {
				return err
			}
			if k.JSON() {
				cli.WriteJSON(k.Stdout(), map[string]any{"connector": name, "language": l, "files": written, "kit": kit})
				return nil
			}
			fmt.Fprintf(k.Stdout(), "created connector %s (%s):\n", name, l)
			for _, f := range written {
				fmt.Fprintf(k.Stdout(), "  %s\n", f)
			}
			if len(kit) > 0 {
				fmt.Fprintf(k.Stdout(), "and a copy of the %s kit in %s\n", l, filepath.Join(dir, kitDirs[l]))
			}
			source, test := "plugins/"+name+"/main.go", "go test ./plugins/"+name+"/"
			switch l {
			case wasmbuild.LangRust:
				source, test = "plugins/"+name+"/src/lib.rs", "(cd plugins/"+name+" && cargo test)"
			case wasmbuild.LangAssemblyScript:
				source, test = "plugins/"+name+"/assembly/index.ts", "connhost abi check build/"+name+".wasm --manifest manifests/"+name+".toml (after step 3)"
			}
			fmt.Fprintf(k.Stdout(), `
next:
  1. point it at your provider: the default base URL in %[2]s,
     capabilities.http and [provider] in manifests/%[1]s.toml, and choose
     each operation's recovery policy (the comments there say what each needs)
  2. %[3]s
  3. connhost build plugins/%[1]s --pin
  4. connhost audit --strict manifests/%[1]s.toml
  5. run a test provider, fit manifests/%[1]s.probe.toml to its API (how
     crashtest holds a request, counts effects, looks a receipt up) and
     crash-test the policies against it:
     connhost crashtest --manifest manifests/%[1]s.toml --probe manifests/%[1]s.probe.toml \
       --provider-url http://127.0.0.1:PORT
`, name, source, test)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", ".", "directory to write plugins/ and manifests/ into")
	c.Flags().StringVar(&lang, "lang", "go", "the connector's language: go, assemblyscript or rust")
	return c
}

// writeScaffold renders files into dir. It writes nothing when any target
// exists.
func writeScaffold(dir, name string, files []scaffoldFile) ([]string, error) {
	data := struct {
		Name string
		// ManifestFromPlugin is the Go expression of the manifest's path
		// relative to plugins/<name>.
		ManifestFromPlugin string
		// KitFromPlugin is the path of sdk/ relative to plugins/<name>.
		KitFromPlugin string
	}{name, fmt.Sprintf(`"..", "..", "manifests", %q`, name+".toml"), "../../sdk"}
	var (
		out      []string
		rendered [][]byte
	)
	for _, f := range files {
		target := filepath.Join(dir, f.path)
		if _, err := os.Stat(target); err == nil {
			return nil, fmt.Errorf("new: %s exists; nothing was written (choose another name, or remove it)", target)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("new: %w", err)
		}
		t, err := template.ParseFS(scaffoldFS, "scaffold/"+f.tmpl)
		if err != nil {
			return nil, fmt.Errorf("new: %w", err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("new: %w", err)
		}
		rendered = append(rendered, b.Bytes())
		out = append(out, target)
	}
	// The manifest must be one the parser accepts.
	for i, f := range files {
		if f.tmpl != "manifest.toml.tmpl" {
			continue
		}
		if _, err := manifests.Parse(out[i], rendered[i]); err != nil {
			return nil, fmt.Errorf("new: the scaffolded manifest does not parse: %w", err)
		}
	}
	for i, target := range out {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, fmt.Errorf("new: %w", err)
		}
		if err := os.WriteFile(target, rendered[i], 0o644); err != nil {
			return nil, fmt.Errorf("new: %w", err)
		}
	}
	return out, nil
}
