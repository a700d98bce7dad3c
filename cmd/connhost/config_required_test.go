package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// TestExecRefusesWithoutRequiredConfig runs the shipped payments connector
// against the Stripe emulator. Without its api_key, exec used to record
// the intent, consume the approval and end failed ("config key has no
// value"); now every command that opens the executor refuses to start,
// says which key and how to give it, and leaves the ledger as it was.
func TestExecRefusesWithoutRequiredConfig(t *testing.T) {
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
	copyTo := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Dir(to), filepath.Base(to), string(b))
	}
	copyTo(wasm, filepath.Join(mods, "payments.wasm"))
	// The shipped manifest, pinned to the module built from today's
	// sources (TestShippedModulesAreBuiltFromPlugins checks the shipped pin).
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
	cfg := writeFile(t, dir, "connhost.toml", fmt.Sprintf(`
[connectors.payments]
api_key = "sk_test_config_required"
base_url = %q
allow_http = [%q]
`, sb.PaymentsURL(), sb.PaymentsURL()))

	runCLI := func(withConfig bool, args ...string) (int, string, string) {
		base := []string{"--data", filepath.Join(dir, "data"), "--manifests", mans, "--modules", mods}
		if withConfig {
			base = append(base, "--config", cfg)
		}
		return runCLI(t, nil, append(base, args...)...)
	}
	pay := func(withConfig bool, call string) (int, string, string) {
		args := []string{"exec", "--session", "s1", "--tool-call", call, "--tool", "payments.create_payment",
			"--args", `{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`}
		if withConfig {
			args = append([]string{"--json"}, args...)
		}
		return runCLI(withConfig, args...)
	}
	intents := func() int {
		n, err := sb.Client().CountPaymentIntents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wantRefusal := func(code int, errOut string) {
		t.Helper()
		for _, want := range []string{
			"refusing to start: required connector config has no value (nothing was recorded)",
			`connector payments needs "api_key" (capabilities.config of ` + filepath.Join(mans, "payments.toml") + ")",
			"--config FILE", "[connectors.payments]", `api_key_env = "PAYMENTS_API_KEY"`,
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%s", want, errOut)
			}
		}
		if code != cli.ExitFailure {
			t.Errorf("exit %d, want %d", code, cli.ExitFailure)
		}
	}

	// A new call without the config (exec prints problems on stderr
	// without --json): refused, nothing recorded.
	code, out, errOut := pay(false, "c0")
	wantRefusal(code, errOut)
	if out != "" {
		t.Errorf("stdout %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "ledger")); !os.IsNotExist(err) {
		t.Fatalf("the refused command created a ledger: %v", err)
	}

	// A gated call recorded and approved with the config…
	code, out, errOut = pay(true, "c1")
	var res host.Result
	if code != cli.ExitNotSucceeded || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("exec with config: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(true, "approve", res.Approval.ID, "--by", "rita", "--digest", res.Approval.ArgsDigest); code != cli.ExitOK {
		t.Fatalf("approve: %d %q %q", code, out, errOut)
	}
	// …is not dispatched without it: the approval stays unconsumed.
	code, _, errOut = pay(false, "c1")
	wantRefusal(code, errOut)
	code, out, errOut = runCLI(true, "--json", "history", res.ExecutionID)
	if code != cli.ExitOK || !strings.Contains(out, `"state": "approved"`) || strings.Contains(out, `"dispatched"`) {
		t.Fatalf("history after the refused re-drive: %d %s %s", code, out, errOut)
	}
	if n := intents(); n != 0 {
		t.Fatalf("%d payment intents at the provider before dispatch", n)
	}
	// With the config the approved call runs once.
	code, out, errOut = pay(true, "c1")
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusSucceeded || !strings.HasPrefix(res.Receipt, "pi_") {
		t.Fatalf("re-drive with config: %d %q %q", code, out, errOut)
	}
	if n := intents(); n != 1 {
		t.Fatalf("%d payment intents, want 1", n)
	}
}
