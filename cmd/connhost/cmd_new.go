package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/template"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/manifests"
)

//go:embed scaffold/*.tmpl
var scaffoldFS embed.FS

// scaffoldFile is one file connhost new writes.
type scaffoldFile struct {
	tmpl string // template in scaffold/
	path string // relative to --dir
}

func (a *app) newCommand() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "new <name> [--dir DIR]",
		Short: "Scaffold a connector: plugins/<name>/ and manifests/<name>.toml",
		Long: `new writes a connector to start from, in DIR (default: the current
directory, the root of a Go module that can import
github.com/connhost/connhost):

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

The directory name is the connector's name: connhost build plugins/<name>
--pin finds manifests/<name>.toml by it. new refuses to overwrite anything.`,
		Example: `  connhost new webhook
  connhost new webhook --dir ../my-connectors`,
		Args: exactArgs(1, "the connector's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !manifests.ValidConnectorName(name) {
				return usagef("connector name %q: use lower-case letters, digits, - and _, starting with a letter (at most 32)", name)
			}
			files := []scaffoldFile{
				{"main.go.tmpl", filepath.Join("plugins", name, "main.go")},
				{"connector_test.go.tmpl", filepath.Join("plugins", name, name+"_test.go")},
				{"manifest.toml.tmpl", filepath.Join("manifests", name+".toml")},
				{"probe.toml.tmpl", filepath.Join("manifests", name+".probe.toml")},
			}
			written, err := writeScaffold(dir, name, files)
			if err != nil {
				return err
			}
			if a.g.json {
				writeJSON(a.stdout, map[string]any{"connector": name, "files": written})
				return nil
			}
			fmt.Fprintf(a.stdout, "created connector %s:\n", name)
			for _, f := range written {
				fmt.Fprintf(a.stdout, "  %s\n", f)
			}
			fmt.Fprintf(a.stdout, `
next:
  1. point it at your provider: defaultBaseURL in plugins/%[1]s/main.go,
     capabilities.http and [provider] in manifests/%[1]s.toml, and choose
     each operation's recovery policy (the comments there say what each needs)
  2. go test ./plugins/%[1]s/
  3. connhost build plugins/%[1]s --pin
  4. connhost audit --strict manifests/%[1]s.toml
  5. run a test provider, fit manifests/%[1]s.probe.toml to its API (how
     crashtest holds a request, counts effects, looks a receipt up) and
     crash-test the policies against it:
     connhost crashtest --manifest manifests/%[1]s.toml --probe manifests/%[1]s.probe.toml \
       --provider-url http://127.0.0.1:PORT
`, name)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", ".", "directory to write plugins/ and manifests/ into")
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
	}{name, fmt.Sprintf(`"..", "..", "manifests", %q`, name+".toml")}
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
