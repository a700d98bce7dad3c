package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host/crashtest"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// TestCrashtestRefuses: what crashtest cannot use is refused, never
// ignored, and a connector no built-in emulator serves is never wired to
// one.
func TestCrashtestRefuses(t *testing.T) {
	webhook := filepath.Join("..", "..", "host", "crashtest", "testdata", "webhook", "manifests", "webhook.toml")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a connector's own provider is needed", []string{"crashtest", "--manifest", webhook},
			"connector webhook reaches https://hooks.example.com:443, which no built-in emulator serves: run its test provider and name it with --provider-url URL"},
		{"--config", []string{"--config", "connhost.toml", "crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9"},
			"crashtest does not use --config: every cell gets a connhost.toml of its own; give config values with --set KEY=VALUE, secrets with --set-env KEY=VAR"},
		{"--set-env alone", []string{"crashtest", "--manifest", webhook, "--set-env", "base_url=X"}, "give --provider-url"},
		{"--probe alone", []string{"crashtest", "--manifest", webhook, "--probe", "p.toml"}, "give --provider-url"},
		{"--set-env without a variable", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--set-env", "base_url"},
			`--set-env "base_url": want KEY=VAR`},
		{"--set-env of an unset variable", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--set-env", "token=CONNHOST_TEST_UNSET_VARIABLE"},
			"--set-env token=CONNHOST_TEST_UNSET_VARIABLE: environment variable CONNHOST_TEST_UNSET_VARIABLE is not set"},
		{"--set-env of an undeclared key", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--set-env", "token=HOME"},
			`connector webhook does not declare config key "token"`},
		{"--set-env of the URL key", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--set-env", "base_url=HOME"},
			"--set-env base_url: the config key is given by --set or --url-key too"},
		{"--probe and --probe-url", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--probe", "p.toml", "--probe-url", "http://127.0.0.1:9/p"},
			"exclude each other"},
		{"an unknown point", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--point", "after_lunch"},
			`--point "after_lunch": not a crash point (known: before_intent, after_intent, after_approval, after_dispatch_record, after_plugin_return, after_outcome_record, after_reconcile_return, after_answer, in_flight, equal_args, key_kept, key_expired, provider_key)`},
		{"--record-proof without --probe", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--record-proof"},
			"--record-proof proves the manifest's [provider] claim by repeating the connector's requests through the probe's proxy: give --probe"},
		{"an unknown variant", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--variant", "both"},
			`--variant "both": want gated`},
		{"--data", []string{"--data", "d", "crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9"}, "crashtest does not use --data"},
		{"--probe-url alone", []string{"crashtest", "--manifest", webhook, "--probe-url", "http://127.0.0.1:9/p"}, "give --provider-url"},
		{"--set alone", []string{"crashtest", "--manifest", webhook, "--set", "base_url=x"}, "give --provider-url"},
		{"both providers", []string{"crashtest", "--manifest", webhook, "--provider", "email", "--provider-url", "http://127.0.0.1:9"}, "exclude each other"},
		{"an undeclared config key", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--set", "api_key=k"},
			`connector webhook does not declare config key "api_key" (capabilities.config: base_url)`},
		{"an undeclared URL key", []string{"crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--url-key", "endpoint"},
			`does not declare config key "endpoint"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, tc.args...)
			if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q (want %q)", code, cli.ExitUsage, out, errOut, tc.want)
			}
		})
	}
}

// TestCrashtestProbeConfigErrors: a probe config that does not fit is
// refused before anything runs, with its file and line; and an error of
// the run itself says "crashtest:" once.
func TestCrashtestProbeConfigErrors(t *testing.T) {
	webhook := filepath.Join("..", "..", "host", "crashtest", "testdata", "webhook", "manifests", "webhook.toml")
	module := filepath.Join("testdata", "help.golden") // any file: nothing runs
	probe := writeFile(t, t.TempDir(), "webhook.probe.toml", "[operation.deliver]\nhold = \"POST /v1/deliveries\"\nargs = '{\"topic\": \"t\"}'\n\n[operation.charge]\nargs = '{}'\n")
	code, out, errOut := runCLI(t, nil, "crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--module", module, "--probe", probe)
	for _, want := range []string{
		probe + ":1: operation.deliver.effects: deliver is external (idempotent-retry): say how its effects are counted",
		probe + ":5: operation.charge: connector webhook has no operation \"charge\"",
		probe + ": operation.get_delivery: no sample arguments",
	} {
		if code == cli.ExitOK || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stdout %q, stderr lacks %q:\n%s", code, out, want, errOut)
		}
	}
	code, _, errOut = runCLI(t, nil, "crashtest", "--manifest", webhook, "--provider-url", "http://127.0.0.1:9", "--module", module)
	if code == cli.ExitOK || !strings.Contains(errOut, "crashtest: the provider does not answer how many effects it holds") || strings.Contains(errOut, "crashtest: crashtest:") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestCrashtestOwnProvider runs `connhost crashtest --provider-url` as the
// built binary against the webhook fixture's own receiver, running as its
// own process: the honest connector passes, both broken variants are
// caught at the cells that reveal them, every row names the provider, and
// progress counts cells done/total on a stderr that is a pipe.
func TestCrashtestOwnProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(root, "host", "crashtest", "testdata", "webhook")
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	receiver := buildWebhookd(t, fixture, dir)
	manifest := mustReadFile(t, filepath.Join(fixture, "manifests", "webhook.toml"))
	reconciled := strings.Replace(manifest, `recovery = "idempotent-retry"`, "recovery = \"reconcile\"\nreconcile_settle = \"0s\"", 1)
	probeConfig := filepath.Join(fixture, "manifests", "webhook.probe.toml")

	for _, tc := range []struct {
		name, pkg, manifest string
		args                []string
		wantCode            int
		wantFailed          []string
	}{
		{"honest", "plugins/webhook", manifest, []string{"--operation", "deliver"}, cli.ExitOK, nil},
		// Observed through the receiver's own API, as its probe config
		// says, not through /_crashtest: every operation, the read too.
		{"honest, probe config", "plugins/webhook", manifest, []string{"--probe", probeConfig}, cli.ExitOK, nil},
		{"key ignored, probe config", "broken/keyignored", manifest, []string{"--probe", probeConfig, "--operation", "deliver",
			"--point", "after_plugin_return", "--point", "in_flight"}, cli.ExitFindings, []string{"after_plugin_return"}},
		{"key ignored", "broken/keyignored", manifest, []string{"--operation", "deliver"}, cli.ExitFindings, []string{"after_plugin_return"}},
		{"reconcile always not applied", "broken/notapplied", reconciled, []string{"--operation", "deliver"}, cli.ExitFindings,
			[]string{"after_plugin_return", "after_reconcile_return"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			mods, mans := filepath.Join(work, "build"), filepath.Join(work, "manifests")
			if err := os.MkdirAll(mans, 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := wasmbuild.Build(ctx, filepath.Join(fixture, tc.pkg), filepath.Join(mods, "webhook.wasm")); err != nil {
				t.Fatal(err)
			}
			m := writeFile(t, mans, "webhook.toml", tc.manifest)
			url := startReceiver(t, receiver)

			p, err := proc.Run(ctx, proc.Cmd{
				Path:          bin,
				Args:          append([]string{"--modules", mods, "--json", "crashtest", "--manifest", m, "--provider-url", url}, tc.args...),
				DieWithParent: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			if p.Signal != 0 {
				t.Fatalf("connhost crashtest %s\nstderr %s", p, p.Stderr)
			}
			code := p.Code
			stdout, stderr := string(p.Stdout), string(p.Stderr)
			var rep crashtest.Report
			if jerr := json.Unmarshal([]byte(stdout), &rep); jerr != nil {
				t.Fatalf("exit %d, no report: %v\nstdout %s\nstderr %s", code, jerr, stdout, stderr)
			}
			var table strings.Builder
			_ = rep.WriteTable(&table)
			t.Logf("exit %d\n%s", code, table.String())
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			failed := map[string]crashtest.Row{}
			for _, r := range rep.Failed() {
				failed[r.Point] = r
			}
			for _, p := range tc.wantFailed {
				if _, ok := failed[p]; !ok {
					t.Errorf("cell %s not caught", p)
				}
			}
			for _, r := range rep.Rows {
				if r.Provider != url {
					t.Errorf("%s: provider %q, want %s", r.Point, r.Provider, url)
				}
			}
			// Progress: one line per cell on a piped stderr, counting up
			// to the total.
			lines := regexp.MustCompile(`(?m)^crashtest: \[(\d+)/(\d+)\] `).FindAllStringSubmatch(stderr, -1)
			if len(lines) != len(rep.Rows) || len(lines) == 0 || lines[len(lines)-1][1] != lines[len(lines)-1][2] {
				t.Errorf("%d progress lines for %d cells:\n%s", len(lines), len(rep.Rows), stderr)
			}
		})
	}
}

// TestCrashtestPreflight: a connector that cannot work at all (its
// provider refuses it: 403) stops the run after one call without a crash,
// naming the connector's error, instead of running every cell into it.
func TestCrashtestPreflight(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(root, "host", "crashtest", "testdata", "webhook")
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	mods := filepath.Join(dir, "build")
	if _, err := wasmbuild.Build(ctx, filepath.Join(fixture, "plugins", "webhook"), filepath.Join(mods, "webhook.wasm")); err != nil {
		t.Fatal(err)
	}
	// A receiver that lists no deliveries and refuses every one.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" {
			_, _ = w.Write([]byte(`{"data": []}`))
			return
		}
		http.Error(w, "forbidden:\n\tthe token\nis not valid", http.StatusForbidden)
	}))
	defer srv.Close()
	p, err := proc.Run(ctx, proc.Cmd{
		Path: bin,
		Args: []string{"--modules", mods, "crashtest", "--manifest", filepath.Join(fixture, "manifests", "webhook.toml"),
			"--probe", filepath.Join(fixture, "manifests", "webhook.probe.toml"), "--provider-url", srv.URL, "--operation", "deliver"},
		DieWithParent: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	stderr := string(p.Stderr)
	if p.Code == cli.ExitOK || p.Code == cli.ExitFindings || !strings.Contains(stderr, "preflight call did not succeed: webhook.deliver") ||
		!strings.Contains(stderr, "status 403: forbidden: the token is not valid") || strings.Contains(stderr, "crashtest: [") {
		t.Fatalf("%s\nstdout %s\nstderr %s", p, p.Stdout, stderr)
	}
}

// startReceiver runs the webhook fixture's receiver as its own process
// and returns its URL.
func startReceiver(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		t.Fatalf("webhookd printed %q: %v", line, err)
	}
	return strings.TrimSpace(line)
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCrashtestRecordProof: what [provider] says a provider deduplicates
// by is shown to a reviewer as proven only after crashtest proved it
// against the provider. The webhook fixture's receiver deduplicates by a
// body's event_id and ignores a header X-Event-Id, which the bodykey
// connector sends too. A manifest naming that header (an invented key, as
// the header a first author guesses) fails the provider_key row, records
// nothing, removes an earlier proof of the claim, and `audit` keeps
// warning provider-key-unproven; a manifest naming event_id is proven,
// the proof lands next to the manifest, and the audit's verdict says who
// proved it against what.
func TestCrashtestRecordProof(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(root, "host", "crashtest", "testdata", "webhook")
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	receiver := buildWebhookd(t, fixture, dir)
	mods := filepath.Join(dir, "build")
	if _, err := wasmbuild.Build(ctx, filepath.Join(fixture, "broken", "bodykey"), filepath.Join(mods, "webhook.wasm")); err != nil {
		t.Fatal(err)
	}
	manifest := mustReadFile(t, filepath.Join(fixture, "manifests", "webhook.toml"))
	url := startReceiver(t, receiver)
	for _, tc := range []struct {
		name, claim string
		proven      bool
	}{
		{"an invented header", `idempotency_header = "X-Event-Id"`, false},
		{"the body field the receiver deduplicates by", `idempotency_field = "event_id"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mans := t.TempDir()
			m := writeFile(t, mans, "webhook.toml", strings.Replace(manifest, `idempotency_header = "Idempotency-Key"`, tc.claim, 1))
			proof := filepath.Join(mans, "webhook.proof.json")
			if !tc.proven {
				// An earlier proof of the same claim (a provider that
				// changed since): the failing run removes it.
				writeFile(t, mans, "webhook.proof.json", `{"connector": "webhook", "idempotency_header": "X-Event-Id", "provider": "http://old", "operations": ["deliver"], "proven_at": "2026-01-01T00:00:00Z"}`)
			}
			p, err := proc.Run(ctx, proc.Cmd{Path: bin, Args: []string{"--modules", mods, "--json", "crashtest", "--manifest", m, "--provider-url", url,
				"--probe", filepath.Join(fixture, "manifests", "webhook.probe.toml"), "--operation", "deliver", "--point", crashtest.PointProviderKey, "--record-proof"},
				DieWithParent: true})
			if err != nil {
				t.Fatal(err)
			}
			var rep crashtest.Report
			if err := json.Unmarshal(p.Stdout, &rep); err != nil || len(rep.Rows) != 1 {
				t.Fatalf("%s: %v\nstdout %s\nstderr %s", p, err, p.Stdout, p.Stderr)
			}
			_, statErr := os.Stat(proof)
			if tc.proven != (p.Code == cli.ExitOK) || tc.proven != (statErr == nil) || rep.Rows[0].Pass != tc.proven {
				t.Fatalf("exit %d, proof file: %v, row %+v\nstderr %s", p.Code, statErr, rep.Rows[0], p.Stderr)
			}
			_, out, _ := runCLI(t, nil, "--modules", mods, "audit", "--json", m)
			var r struct {
				Connectors []struct {
					Operations []struct {
						Verdict struct {
							ReliesOn string `json:"relies_on"`
						} `json:"verdict"`
					} `json:"operations"`
				} `json:"connectors"`
				Findings []struct{ Code string } `json:"findings"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Connectors) != 1 {
				t.Fatalf("audit: %v\n%s", err, out)
			}
			unproven := strings.Contains(out, `"code": "provider-key-unproven"`)
			reliesOn := r.Connectors[0].Operations[0].Verdict.ReliesOn
			if tc.proven == unproven || tc.proven != strings.Contains(reliesOn, "proven by connhost crashtest against "+url) {
				t.Errorf("audit after the run: provider-key-unproven raised %t; deliver relies on %q", unproven, reliesOn)
			}
		})
	}
}

// buildWebhookd builds the webhook fixture's receiver (cmd/webhookd of the
// module in fixture, from the module cache alone) into dir.
func buildWebhookd(t *testing.T, fixture, dir string) string {
	t.Helper()
	receiver := filepath.Join(dir, "webhookd")
	build := exec.Command("go", "build", "-o", receiver, "./cmd/webhookd")
	build.Dir = fixture
	build.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build webhookd: %v\n%s", err, out)
	}
	return receiver
}
