package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

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
			"crashtest does not use --config: every cell gets a connhost.toml of its own; give config values with --set KEY=VALUE"},
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
			if code != ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q (want %q)", code, ExitUsage, out, errOut, tc.want)
			}
		})
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
	bin := filepath.Join(dir, "connhost")
	build := exec.Command("go", "build", "-o", bin, "./cmd/connhost")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	receiver := filepath.Join(dir, "webhookd")
	build = exec.Command("go", "build", "-o", receiver, "./cmd/webhookd")
	build.Dir = fixture
	build.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build webhookd: %v\n%s", err, out)
	}
	manifest := mustReadFile(t, filepath.Join(fixture, "manifests", "webhook.toml"))
	reconciled := strings.Replace(manifest, `recovery = "idempotent-retry"`, "recovery = \"reconcile\"\nreconcile_settle = \"0s\"", 1)

	for _, tc := range []struct {
		name, pkg, manifest string
		args                []string
		wantCode            int
		wantFailed          []string
	}{
		{"honest", "plugins/webhook", manifest, []string{"--operation", "deliver"}, ExitOK, nil},
		{"key ignored", "broken/keyignored", manifest, []string{"--operation", "deliver"}, ExitFindings, []string{"after_plugin_return"}},
		{"reconcile always not applied", "broken/notapplied", reconciled, []string{"--operation", "deliver"}, ExitFindings,
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
