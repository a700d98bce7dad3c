package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
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

// TestCrashtestKitTwins proves the guest kits the way an author would
// use them: the shipped payments connector, written again in Rust and in
// AssemblyScript (devkit/testing/kitconnectors), is scaffolded
// with connhost new --lang, its source put in, built and pinned with
// connhost build --pin, audited, and crash-tested with the Go original's
// manifest (renamed) and probe config against the same Stripe API
// (connhost sandbox's), over the cells TestCrashtestShippedThroughProbeConfigs
// runs for the Go one: each row must pass with the decision the Go
// connector gets, and every held request must be counted as the one
// effect. Under CI a missing toolchain fails, never skips.
func TestCrashtestKitTwins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Rust and AssemblyScript connectors and spawns connhost processes")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	sb, err := sandbox.Start(ctx, sandbox.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	goManifest, err := os.ReadFile(filepath.Join(root, "manifests", "payments.toml"))
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(root, "manifests", "payments.probe.toml")
	points := []string{crash.AfterDispatchRecord, crash.AfterPluginReturn, crash.AfterReconcileReturn, crashtest.PointInFlight}
	// The decisions the Go connector's rows reach, by operation.
	decisions := map[string]*regexp.Regexp{
		"create_payment": regexp.MustCompile(`^recover_retry$`),
		"refund_payment": regexp.MustCompile(`^reconciled_(applied|not_applied)$`),
		"get_payment":    regexp.MustCompile(`^recover_reread$`),
	}

	for _, tc := range []struct {
		lang, name string
		source     [2]string // twin source, its place in the scaffold
	}{
		{"rust", "payments-rust", [2]string{"rust/src/lib.rs", "src/lib.rs"}},
		{"assemblyscript", "payments-as", [2]string{"assemblyscript/assembly/index.ts", "assembly/index.ts"}},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			if tc.lang == "rust" {
				testenv.RustToolchain(t)
			} else {
				testenv.NPM(t)
			}
			proj := filepath.Join(dir, tc.lang)
			if code, _, errOut := runCLI(t, nil, "new", tc.name, "--lang", tc.lang, "--dir", proj); code != cli.ExitOK {
				t.Fatalf("new: exit %d %s", code, errOut)
			}
			src, err := os.ReadFile(filepath.Join(root, "devkit", "testing", "kitconnectors", tc.source[0]))
			if err != nil {
				t.Fatal(err)
			}
			plugin := filepath.Join(proj, "plugins", tc.name)
			writeFile(t, plugin, tc.source[1], string(src))
			// The Go connector's manifest under this connector's name,
			// unpinned: build --pin pins it.
			m := strings.Replace(string(goManifest), `name = "payments"`, `name = "`+tc.name+`"`, 1)
			m = strings.Replace(m, `module = "payments.wasm"`, `module = "`+tc.name+`.wasm"`, 1)
			m = regexp.MustCompile(`(?m)^sha256 = "[0-9a-f]*"`).ReplaceAllString(m, `sha256 = ""`)
			mans, mods := filepath.Join(proj, "manifests"), filepath.Join(proj, "build")
			manifest := writeFile(t, mans, tc.name+".toml", m)

			code, out, errOut := runCLI(t, nil, "--manifests", mans, "--modules", mods, "build", plugin, "--pin")
			if code != cli.ExitOK || !strings.Contains(out, "pinned") {
				t.Fatalf("build --pin: exit %d\n%s\n%s", code, out, errOut)
			}
			if code, out, _ := runCLI(t, nil, "abi", "check", filepath.Join(mods, tc.name+".wasm"), "--manifest", manifest); code != cli.ExitOK {
				t.Fatalf("abi check: exit %d\n%s", code, out)
			}
			// The audit finds in the twin what it finds in the Go original:
			// the manifest is the same, and so are the reviewer's questions.
			code, out, _ = runCLI(t, nil, "--modules", mods, "--data", filepath.Join(proj, "data"), "--json", "audit", mans)
			r := decodeAudit(t, out)
			if code == cli.ExitFailure || len(r.Connectors) != 1 || !r.Connectors[0].Module.Found || r.Connectors[0].Module.LoadError != "" {
				t.Fatalf("audit: exit %d\n%s", code, out)
			}

			args := []string{"--modules", mods, "--json", "crashtest", "--manifest", manifest, "--probe", probe,
				"--provider-url", sb.PaymentsURL(), "--set-env", "api_key=STRIPE_API_KEY"}
			for _, p := range points {
				args = append(args, "--point", p)
			}
			p, err := proc.Run(ctx, proc.Cmd{Path: bin, Args: args, Env: append(os.Environ(), "STRIPE_API_KEY="+sandbox.DefaultAPIKey), DieWithParent: true})
			if err != nil {
				t.Fatal(err)
			}
			var rep crashtest.Report
			if err := json.Unmarshal(p.Stdout, &rep); err != nil {
				t.Fatalf("%s, no report: %v\nstdout %s\nstderr %s", p, err, p.Stdout, p.Stderr)
			}
			var table strings.Builder
			_ = rep.WriteTable(&table)
			t.Logf("connhost %s\n%s", strings.Join(args[3:], " "), table.String())
			if p.Code != cli.ExitOK || !rep.OK() {
				t.Fatalf("exit %d, %d failed cells\nstderr %s", p.Code, rep.Totals.Failed, p.Stderr)
			}
			mf, err := manifests.Load(manifest)
			if err != nil {
				t.Fatal(err)
			}
			held := map[string]int{}
			for _, r := range rep.Rows {
				if !r.Reached {
					continue
				}
				op := strings.TrimPrefix(r.Operation, tc.name+".")
				if want := decisions[op]; want == nil || !want.MatchString(r.Decision) {
					t.Errorf("%s × %s gated=%t: decision %q, the Go connector's is %v", r.Point, op, r.Gated, r.Decision, want)
				}
				if o, _ := mf.Operation(op); o.Effect == manifests.EffectExternal && r.Point == crashtest.PointInFlight {
					held[op]++
					if r.Effects != 1 {
						t.Errorf("in_flight × %s gated=%t: %d effects counted, want 1", op, r.Gated, r.Effects)
					}
				}
			}
			if held["create_payment"] != 2 || held["refund_payment"] != 2 {
				t.Errorf("in-flight rows that held the request: %v, want 2 per external operation", held)
			}
			if rep.Totals.Kills == 0 || rep.Totals.Duplicates != 0 || rep.Totals.Lost != 0 || rep.Totals.Cells < 16 {
				t.Errorf("totals %+v", rep.Totals)
			}
		})
	}
}
