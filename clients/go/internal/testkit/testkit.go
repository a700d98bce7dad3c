// Package testkit sets up what the adapters' examples and tests run
// against: the shipped payments connector, built from plugins/payments and
// pinned, with its manifest as shipped (create_payment needs approval) and
// with that gate lifted, and the Stripe emulator that counts the charges.
package testkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// Env is the connector, its manifests and the emulator.
type Env struct {
	// Root is the connhost repository.
	Root string
	// Dir holds Modules, Gated and Ungated; Close removes it.
	Dir string
	// Modules holds payments.wasm.
	Modules string
	// Gated holds the shipped payments.toml; Ungated the same with
	// create_payment not gated.
	Gated, Ungated string
	// SB is the Stripe emulator.
	SB *sandbox.Sandbox
}

// Root returns the connhost repository that holds the working directory.
func Root() (string, error) {
	for d, _ := wasmbuild.ModuleRoot(""); d != "" && d != filepath.Dir(d); d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/connhost/connhost\n") {
			return d, nil
		}
	}
	return "", errors.New("testkit: not inside the connhost repository")
}

// Start builds (or takes from the build cache) the payments connector,
// writes its manifests and starts the emulator.
func Start(ctx context.Context) (*Env, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "connhost-goadapters-")
	if err != nil {
		return nil, err
	}
	e := &Env{Root: root, Dir: dir, Modules: filepath.Join(dir, "modules"),
		Gated: filepath.Join(dir, "gated"), Ungated: filepath.Join(dir, "ungated")}
	if err := e.write(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if e.SB, err = sandbox.Start(ctx, sandbox.Options{}); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return e, nil
}

func (e *Env) write(ctx context.Context) error {
	for _, d := range []string{e.Modules, e.Gated, e.Ungated} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	wasm, digest, err := wasmbuild.Cached(ctx, filepath.Join(e.Root, "plugins", "payments"))
	if err != nil {
		return err
	}
	data, err := os.ReadFile(wasm)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(e.Modules, "payments.wasm"), data, 0o644); err != nil {
		return err
	}
	src, err := os.ReadFile(filepath.Join(e.Root, "manifests", "payments.toml"))
	if err != nil {
		return err
	}
	if src, err = manifests.SetSHA256(src, digest); err != nil {
		return err
	}
	// create_payment's requires_approval is the first in the file.
	ungated := strings.Replace(string(src), "requires_approval = true", "requires_approval = false", 1)
	if ungated == string(src) {
		return errors.New("testkit: manifests/payments.toml has no requires_approval = true to lift")
	}
	if err := os.WriteFile(filepath.Join(e.Gated, "payments.toml"), src, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.Ungated, "payments.toml"), []byte(ungated), 0o644)
}

// Close stops the emulator and removes Dir.
func (e *Env) Close() {
	_ = e.SB.Close()
	_ = os.RemoveAll(e.Dir)
}

// Charges is how many charges the emulator made.
func (e *Env) Charges() int { return e.SB.Payments().Stats().ChargesSucceeded }

// Open opens an executor on dataDir with the manifests in manifestDir,
// its payments connector pointed at the emulator: what an application
// that embeds connhost writes.
func (e *Env) Open(ctx context.Context, dataDir, manifestDir string) (*host.Executor, error) {
	return Open(ctx, dataDir, manifestDir, e.Modules, e.SB.PaymentsURL(), "")
}

// Open opens an executor on dataDir with the manifests in manifestDir and
// the modules in modules, its payments connector pointed at the Stripe
// API (or emulator) at stripeURL; cacheDir ("": dataDir/cache) is the
// compilation cache, which processes may share.
func Open(ctx context.Context, dataDir, manifestDir, modules, stripeURL, cacheDir string) (*host.Executor, error) {
	ms, err := manifests.LoadDir(manifestDir)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(stripeURL)
	if err != nil {
		return nil, fmt.Errorf("testkit: stripe URL: %w", err)
	}
	for _, m := range ms { // the provider's origin joins the manifest's allowlist
		m.Capabilities.HTTP = append(m.Capabilities.HTTP, u.Scheme+"://"+u.Host)
	}
	return host.Open(ctx, host.Options{
		DataDir: dataDir, Manifests: ms, ModuleDir: modules, CacheDir: cacheDir,
		Config: func(connector, key string) (string, bool) {
			switch key {
			case "api_key":
				return sandbox.DefaultAPIKey, true
			case "base_url":
				return stripeURL, true
			}
			return "", false
		},
		Logger: slog.New(slog.DiscardHandler),
	})
}
