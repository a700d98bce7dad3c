// Package connhost holds the connectors connhost ships, payments (the
// Stripe API) and email (the Mailpit API), embedded in every build: their
// manifests as committed in manifests/, and their modules, built
// reproducibly from plugins/ and stored gzip-compressed beside them
// (plugins/<name>.wasm.gz), each verified against its manifest's pinned
// sha256 before it is handed out.
//
// `connhost dev` and `connhost demo` run on them from an empty directory,
// so the binary alone is enough to try connhost; a Go program that embeds
// connhost's executor can open it on them without a source tree:
//
//	ms, err := connhost.Manifests()
//	…
//	err = connhost.WriteModules(moduleDir)
//	…
//	ex, err := host.Open(ctx, host.Options{Manifests: ms, ModuleDir: moduleDir, …})
//
// After a change to a connector (or to the SDK it compiles in), `go
// generate .` at the repository root rebuilds the modules and pins them
// (devkit/shipgen); a test fails until it has.
package connhost

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/connhost/connhost/manifests"
)

//go:generate go run ./devkit/shipgen

//go:embed manifests/email.toml manifests/payments.toml plugins/email.wasm.gz plugins/payments.wasm.gz
var shipped embed.FS

// shippedNames are the shipped connectors, in the order Manifests returns
// them.
var shippedNames = []string{"email", "payments"}

// maxModuleBytes bounds a decompressed module.
const maxModuleBytes = 64 << 20

// ErrNotShipped is returned by Module for a connector connhost does not
// ship.
var ErrNotShipped = errors.New("connhost: no such shipped connector")

// Manifests returns the shipped connectors' manifests, parsed and
// validated. Each Path names its embedded file ("manifests/payments.toml"),
// so that a module is looked up in the module directory a caller names
// (host.Options.ModuleDir), never next to it.
func Manifests() ([]*manifests.Manifest, error) {
	out := make([]*manifests.Manifest, 0, len(shippedNames))
	for _, name := range shippedNames {
		path := "manifests/" + name + ".toml"
		text, err := shipped.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("connhost: shipped %s: %w", path, err)
		}
		m, err := manifests.Parse(path, text)
		if err != nil {
			return nil, fmt.Errorf("connhost: shipped %s: %w", path, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// ManifestText returns the shipped connector name's manifest as
// committed in manifests/<name>.toml.
func ManifestText(name string) ([]byte, error) {
	for _, n := range shippedNames {
		if n == name {
			return shipped.ReadFile("manifests/" + name + ".toml")
		}
	}
	return nil, fmt.Errorf("%w: %q (shipped: %v)", ErrNotShipped, name, shippedNames)
}

// Module returns the module of the shipped connector name, decompressed
// and verified against the sha256 its manifest pins.
func Module(name string) ([]byte, error) {
	ms, err := Manifests()
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.Connector.Name == name {
			return module(m)
		}
	}
	return nil, fmt.Errorf("%w: %q (shipped: %v)", ErrNotShipped, name, shippedNames)
}

func module(m *manifests.Manifest) ([]byte, error) {
	path := "plugins/" + m.Connector.Name + ".wasm.gz"
	gz, err := shipped.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("connhost: shipped %s: %w", path, err)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("connhost: shipped %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(r, maxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("connhost: shipped %s: %w", path, err)
	}
	if len(b) > maxModuleBytes {
		return nil, fmt.Errorf("connhost: shipped %s: more than %d bytes decompressed", path, maxModuleBytes)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != m.Connector.SHA256 {
		return nil, fmt.Errorf("connhost: shipped %s has sha256 %s, but %s pins %s (run go generate at the repository root)", path, got, m.Path, m.Connector.SHA256)
	}
	return b, nil
}

// WriteModules writes every shipped connector's module into dir (created
// if missing) under the name its manifest gives (payments.wasm,
// email.wasm), verified against its pin. A file already there with the
// pinned digest is left as it is; any other is replaced, through a
// temporary file renamed into place.
func WriteModules(dir string) error {
	ms, err := Manifests()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("connhost: %w", err)
	}
	for _, m := range ms {
		dst := m.ModulePath(dir)
		if cur, err := os.ReadFile(dst); err == nil {
			sum := sha256.Sum256(cur)
			if hex.EncodeToString(sum[:]) == m.Connector.SHA256 {
				continue
			}
		}
		b, err := module(m)
		if err != nil {
			return err
		}
		tmp, err := os.CreateTemp(dir, filepath.Base(dst)+".*")
		if err != nil {
			return fmt.Errorf("connhost: %w", err)
		}
		// Modules are no secret: readable by whoever runs the host, as
		// a build writes them (CreateTemp makes the file its owner's).
		werr := tmp.Chmod(0o644)
		if werr == nil {
			_, werr = tmp.Write(b)
		}
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), dst)
		}
		if werr != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("connhost: write %s: %w", dst, werr)
		}
	}
	return nil
}
