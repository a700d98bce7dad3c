//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// processBound keeps a hung process from hanging the test; it is not a
// performance assertion.
const processBound = 90 * time.Second

// TestDamagedLedgerProcess is issue #12's scenario with real processes: a
// `connhost dev` runs six calls of a manual operation (the effect test
// connector: every dispatch is a POST /apply that the test's provider
// counts, and nothing deduplicates it, so a call run twice is seen twice),
// is killed with SIGKILL once its mark covers them, and its data directory
// is damaged while it is stopped. Restarting dev, and the runtime
// re-sending its last call with `connhost exec`, must each exit 6 with one
// message saying what is missing, and the provider must see no new
// request. --init then starts a new ledger, keeping the old one aside.
func TestDamagedLedgerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	var requests atomic.Int64
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("X-Receipt", fmt.Sprint("r", requests.Load()))
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(prov.Close)
	wasm, digest, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/effect")
	if err != nil {
		t.Fatal(err)
	}
	modules, manifestDir := filepath.Join(dir, "modules"), filepath.Join(dir, "manifests")
	for _, d := range []string{modules, manifestDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyTo(t, wasm, filepath.Join(modules, "effect.wasm"))
	writeFile(t, manifestDir, "effect.toml", fmt.Sprintf(manualEffectManifest, digest, prov.URL))
	config := writeFile(t, dir, "connhost.toml", fmt.Sprintf("[connectors.effect]\nbase_url = %q\nallow_http = [%q]\n", prov.URL, prov.URL))

	global := func(data string) []string {
		return []string{"--data", data, "--manifests", manifestDir, "--modules", modules, "--config", config}
	}
	devArgs := func(data string) []string {
		return append(global(data), "--json", "dev", "--listen", "127.0.0.1:0",
			"--email-url", "http://127.0.0.1:9", "--payments-url", "http://127.0.0.1:9")
	}
	sendArgs := func(i int) (call string, args []string) {
		call = fmt.Sprint("call_", i)
		return call, []string{"--session", "s1", "--tool-call", call, "--tool", "effect.apply", "--args", fmt.Sprintf(`{"n":%d}`, i)}
	}

	// The run the damage is done to: six calls through dev's API, then
	// SIGKILL once the mark covers them (12 writes: each call is recorded
	// as dispatched, then succeeded).
	const calls = 6
	data := filepath.Join(dir, "data")
	dev, api := startDamagedDev(t, bin, devArgs(data))
	for i := range calls {
		call, _ := sendArgs(i)
		body := fmt.Sprintf(`{"session_id":"s1","tool_call_id":%q,"tool":"effect.apply","arguments":{"n":%d}}`, call, i)
		resp, err := http.Post(api+"/v1/executions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status": "succeeded"`) && !strings.Contains(string(b), `"status":"succeeded"`) {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, b)
		}
	}
	waitMark(t, filepath.Join(data, "ledger.mark"), 2*calls)
	dev.Kill()
	if n := requests.Load(); n != calls {
		t.Fatalf("the provider saw %d requests for %d calls", n, calls)
	}
	// Another ledger, for the swap (ls creates none without --init).
	other := filepath.Join(dir, "other")
	if r := runConnhost(t, bin, append(global(other), "--init", "ls")...); r.code != cli.ExitOK {
		t.Fatalf("ls on a new data dir: exit %d: %s", r.code, r.stderr)
	}

	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, ledgerDir string)
		says   string
	}{
		{"ledger directory deleted", func(t *testing.T, l string) {
			if err := os.RemoveAll(l); err != nil {
				t.Fatal(err)
			}
		}, "is missing"},
		{"four bytes flipped in the middle of the log", func(t *testing.T, l string) {
			log := newestLog(t, l)
			st, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(log, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "is damaged at byte"},
		{"log truncated to its first half", func(t *testing.T, l string) {
			log := newestLog(t, l)
			st, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(log, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "behind its mark"},
		{"another ledger's directory", func(t *testing.T, l string) {
			if err := os.RemoveAll(l); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(l, os.DirFS(filepath.Join(other, "ledger"))); err != nil {
				t.Fatal(err)
			}
		}, "replaced by another ledger's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "data")
			if err := os.CopyFS(d, os.DirFS(data)); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, filepath.Join(d, "ledger"))

			// dev --json: the problem document on stdout.
			r := runConnhost(t, bin, devArgs(d)...)
			var p struct{ Code, Detail string }
			if r.code != cli.ExitLedgerDamaged || json.Unmarshal([]byte(r.stdout), &p) != nil || p.Code != "ledger_damaged" {
				t.Fatalf("dev: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(p.Detail, tc.says) || !strings.Contains(p.Detail, filepath.Join(d, "ledger")) || !strings.Contains(p.Detail, "--init") {
				t.Errorf("detail %q does not say %q, name the directory and --init", p.Detail, tc.says)
			}
			// The runtime re-sends the last call: one line on stderr.
			call, args := sendArgs(calls - 1)
			r = runConnhost(t, bin, append(append(global(d), "exec"), args...)...)
			if r.code != cli.ExitLedgerDamaged || r.stdout != "" || strings.Count(r.stderr, "connhost: ") != 1 ||
				!strings.HasPrefix(r.stderr, "connhost: ledger: ") || !strings.Contains(r.stderr, "code: ledger_damaged") {
				t.Fatalf("exec %s again (text): exit %d, stdout %q, stderr %q", call, r.code, r.stdout, r.stderr)
			}
			if n := requests.Load(); n != calls {
				t.Fatalf("the provider saw %d requests, want %d: a call ran again", n, calls)
			}
		})
	}

	// --init starts a new, empty ledger where the old one is damaged, and
	// keeps the remains aside; on the new, healthy ledger it is refused.
	d := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(d, os.DirFS(data)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(d, "ledger")); err != nil {
		t.Fatal(err)
	}
	if r := runConnhost(t, bin, append(global(d), "--init", "ls")...); r.code != cli.ExitOK || !strings.Contains(r.stdout, "no executions") {
		t.Fatalf("--init ls: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if aside, _ := filepath.Glob(filepath.Join(d, "ledger.mark.aside-*")); len(aside) != 1 {
		t.Fatalf("old mark not kept aside: %v", aside)
	}
	if r := runConnhost(t, bin, append(global(d), "--init", "ls")...); r.code != cli.ExitFailure || !strings.Contains(r.stderr, "healthy ledger") {
		t.Fatalf("--init on a healthy ledger: exit %d, stderr %s", r.code, r.stderr)
	}
}

// manualEffectManifest declares the effect test connector's apply as a
// manual, ungated operation (module digest and provider URL to fill in).
const manualEffectManifest = `
[connector]
name = "effect"
version = "1.0.0"
abi = 1
module = "effect.wasm"
sha256 = "%s"

[capabilities]
http = ["%s"]
config = ["base_url"]

[[operation]]
name = "apply"
description = "Apply one countable effect."
effect = "external"
recovery = "manual"
requires_approval = false
max_attempts = 1
input_schema = '''{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}'''
`

func copyTo(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newestLog returns the newest write-ahead log of the ledger directory l.
func newestLog(t *testing.T, l string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(l, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no write-ahead log in %s (%v)", l, err)
	}
	sort.Strings(logs)
	return logs[len(logs)-1]
}

// waitMark waits until the mark at path records at least n writes.
func waitMark(t *testing.T, path string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(processBound)
	for {
		var m struct {
			HighWater uint64 `json:"high_water"`
		}
		b, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(b, &m) == nil && m.HighWater >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mark %s: %q (%v), want high_water >= %d", path, b, err, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startDamagedDev starts the `connhost dev` whose data directory the test
// damages, and returns it with its API URL once its startup line is out.
func startDamagedDev(t *testing.T, bin string, args []string) (*proc.Process, string) {
	t.Helper()
	p, err := proc.Start(proc.Cmd{Path: bin, Args: args, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	ctx, cancel := context.WithTimeout(t.Context(), processBound)
	defer cancel()
	var s struct{ API string }
	if err := p.DecodeLine(ctx, &s); err != nil || s.API == "" {
		t.Fatalf("dev startup line %+v (%v); stderr:\n%s", s, err, p.Stderr())
	}
	return p, s.API
}

type procRun struct {
	code           int
	stdout, stderr string
}

// runConnhost runs the binary to its end (at most processBound).
func runConnhost(t *testing.T, bin string, args ...string) procRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), processBound)
	defer cancel()
	res, err := proc.Run(ctx, proc.Cmd{Path: bin, Args: args})
	r := procRun{code: res.Code, stdout: string(res.Stdout), stderr: string(res.Stderr)}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("connhost %v: no end within %s; stderr %s", args, processBound, r.stderr)
	case err != nil:
		t.Fatal(err)
	}
	return r
}
