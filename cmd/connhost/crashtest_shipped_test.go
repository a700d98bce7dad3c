package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host/crashtest"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// shippedProbeEnv, set to "full", runs TestCrashtestShippedThroughProbeConfigs
// over every cell instead of the cells where a broken promise shows.
const shippedProbeEnv = "CONNHOST_CRASHTEST_PROBE"

// TestCrashtestShippedThroughProbeConfigs proves the shipped connectors
// the way a connector author proves theirs: `connhost crashtest --manifest
// manifests/X.toml --probe manifests/X.probe.toml --provider-url URL`,
// observed only through the providers' own APIs (a Stripe API — connhost
// sandbox's — and a real Mailpit relaying to itself), never through an
// emulator's control API. The Stripe key comes from the environment
// (--set-env). It runs the cells where a broken promise shows — the kill
// after the dispatch was recorded, after the connector returned (and after
// reconcile answered), and the in-flight row, where the proxy holds the
// original request while the call is re-driven — or with
// $CONNHOST_CRASHTEST_PROBE=full every cell.
func TestCrashtestShippedThroughProbeConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes against a real Mailpit")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	mods := filepath.Join(dir, "build")
	sb, err := sandbox.Start(ctx, sandbox.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	mailpit := testenv.MailpitRelayingToSelf(t)
	// The probe config's own requests authenticate with $STRIPE_API_KEY,
	// as manifests/payments.probe.toml says, and so does the connector.

	points := []string{crash.AfterDispatchRecord, crash.AfterPluginReturn, crash.AfterReconcileReturn, crashtest.PointInFlight}
	if os.Getenv(shippedProbeEnv) == "full" {
		points = nil
	}
	for _, tc := range []struct {
		name, url string
		extra     []string
	}{
		{"payments", sb.PaymentsURL(), []string{"--set-env", "api_key=STRIPE_API_KEY"}},
		{"email", mailpit, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := wasmbuild.Build(ctx, filepath.Join(root, "plugins", tc.name), filepath.Join(mods, tc.name+".wasm")); err != nil {
				t.Fatal(err)
			}
			manifest := filepath.Join(root, "manifests", tc.name+".toml")
			probe := filepath.Join(root, "manifests", tc.name+".probe.toml")
			args := []string{"--modules", mods, "--json", "crashtest", "--manifest", manifest, "--probe", probe, "--provider-url", tc.url}
			for _, p := range points {
				args = append(args, "--point", p)
			}
			p, err := proc.Run(ctx, proc.Cmd{
				Path:          bin,
				Args:          append(args, tc.extra...),
				Env:           append(os.Environ(), "STRIPE_API_KEY="+sandbox.DefaultAPIKey),
				DieWithParent: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			var rep crashtest.Report
			if err := json.Unmarshal(p.Stdout, &rep); err != nil {
				t.Fatalf("%s, no report: %v\nstdout %s\nstderr %s", p, err, p.Stdout, p.Stderr)
			}
			var table strings.Builder
			_ = rep.WriteTable(&table)
			t.Logf("connhost %s\n%s", strings.Join(args[4:], " "), table.String())
			if p.Code != cli.ExitOK || !rep.OK() {
				t.Errorf("exit %d, %d failed cells\nstderr %s", p.Code, rep.Totals.Failed, p.Stderr)
			}
			if strings.Contains(string(p.Stderr), sandbox.DefaultAPIKey) {
				t.Error("the API key was printed")
			}
			m, err := manifests.Load(manifest)
			if err != nil {
				t.Fatal(err)
			}
			// Every external operation was held in flight (gated and not),
			// and the held request, once released, was counted through the
			// provider's own API as the one effect.
			held := map[string]int{}
			for _, r := range rep.Rows {
				if op, _ := m.Operation(r.Operation); op.Effect != manifests.EffectExternal || r.Point != crashtest.PointInFlight || !r.Reached {
					continue
				}
				held[r.Operation]++
				if r.Effects != 1 {
					t.Errorf("in_flight × %s gated=%t: %d effects counted, want 1", r.Operation, r.Gated, r.Effects)
				}
			}
			for _, op := range m.Operations {
				if op.Effect == manifests.EffectExternal && held[op.Name] != 2 {
					t.Errorf("%s: %d in-flight rows held its request, want 2", op.Name, held[op.Name])
				}
			}
			if rep.Totals.Kills == 0 || rep.Totals.Duplicates != 0 || rep.Totals.Lost != 0 {
				t.Errorf("totals %+v", rep.Totals)
			}
		})
	}
}
