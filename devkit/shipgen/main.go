// Command shipgen regenerates the shipped connectors embedded in every
// connhost build (package connhost, shipped.go): it builds plugins/email
// and plugins/payments as `connhost build` does (reproducibly: the same
// sources and Go version give the same bytes), pins each digest in its
// manifest (manifests/<name>.toml, as `connhost build --pin`), and writes
// the module gzip-compressed to plugins/<name>.wasm.gz.
//
//	go generate github.com/connhost/connhost   (from the repository root: go generate .)
//
// TestShippedModulesAreBuiltFromPlugins fails until it is run after a
// change to a connector or to the SDK it compiles in.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "shipgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "connhost-shipgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, name := range []string{"email", "payments"} {
		wasm := filepath.Join(tmp, name+".wasm")
		digest, err := wasmbuild.Build(ctx, filepath.Join(root, "plugins", name), wasm)
		if err != nil {
			return err
		}
		mpath := filepath.Join(root, "manifests", name+".toml")
		text, err := os.ReadFile(mpath)
		if err != nil {
			return err
		}
		pinned, err := manifests.SetSHA256(text, digest)
		if err != nil {
			return fmt.Errorf("%s: %w", mpath, err)
		}
		if !bytes.Equal(pinned, text) {
			if err := os.WriteFile(mpath, pinned, 0o644); err != nil {
				return err
			}
			fmt.Printf("%s: pinned %s\n", mpath, digest)
		}
		b, err := os.ReadFile(wasm)
		if err != nil {
			return err
		}
		var gz bytes.Buffer
		w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		out := filepath.Join(root, "plugins", name+".wasm.gz")
		if err := os.WriteFile(out, gz.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: %d bytes (%d uncompressed), sha256 %s\n", out, gz.Len(), len(b), digest)
	}
	return nil
}
