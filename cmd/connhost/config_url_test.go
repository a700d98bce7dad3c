package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// TestExecRefusesBaseURLOutsideAllowlist: a connhost.toml that points the
// payments connector at a provider its manifest does not let it reach used
// to start, record the call and fail three attempts with "denied" at the
// first dispatch. Now every command that opens the executor refuses to
// start, names the origin and says how to allow a test provider.
func TestExecRefusesBaseURLOutsideAllowlist(t *testing.T) {
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	wasm, digest, err := wasmbuild.Cached(ctx, "plugins/payments")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mods, mans := filepath.Join(dir, "modules"), filepath.Join(dir, "manifests")
	for _, d := range []string{mods, mans} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, mods, "payments.wasm", string(b))
	src, err := os.ReadFile(filepath.Join(root, "manifests", "payments.toml"))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := manifests.SetSHA256(src, digest)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, mans, "payments.toml", string(pinned))
	sb, err := sandbox.Start(ctx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	origin := strings.TrimSuffix(sb.PaymentsURL(), "/")
	cfg := writeFile(t, dir, "connhost.toml", fmt.Sprintf("[connectors.payments]\napi_key = \"sk_test_x\"\nbase_url = %q\n", sb.PaymentsURL()))

	code, out, errOut := runCLI(t, nil, "--data", filepath.Join(dir, "data"), "--manifests", mans, "--modules", mods, "--config", cfg,
		"exec", "--session", "s1", "--tool-call", "c1", "--tool", "payments.create_payment",
		"--args", `{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`)
	if code != cli.ExitFailure || out != "" {
		t.Fatalf("exit %d (want %d), stdout %q", code, cli.ExitFailure, out)
	}
	for _, want := range []string{
		"refusing to start: a configured URL is outside its connector's allowlist (nothing was recorded)",
		"connector payments: base_url points at " + origin + "; the manifest allows https://api.stripe.com:443",
		"[connectors.payments]", `allow_http = ["` + origin + `"]`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "ledger")); !os.IsNotExist(err) {
		t.Fatalf("the refused command created a ledger: %v", err)
	}
	if n, err := sb.Client().CountPaymentIntents(ctx); err != nil || n != 0 {
		t.Fatalf("%d payment intents (%v)", n, err)
	}
}
