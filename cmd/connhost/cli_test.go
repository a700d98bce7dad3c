package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
)

func TestUsageErrorsExit2(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"unknown flag", []string{"ls", "--colour"}, "unknown flag"},
		{"missing required flags", []string{"exec", "--session", "s"}, "required flag"},
		{"history without id", []string{"history"}, "needs an execution id"},
		{"resolve without decision", []string{"resolve", "ex_1", "--by", "o", "--reason", "r"}, "applied"},
		{"resolve not-applied alone", []string{"resolve", "ex_1", "--not-applied", "--by", "o", "--reason", "r"}, "--retry or --abandon"},
		{"bad args json", []string{"exec", "--session", "s", "--tool-call", "c", "--tool", "noop.echo", "--args", "{"}, "not valid JSON"},
		{"tools bad format", []string{"tools", "--format", "gemini"}, "unknown format"},
		{"bad ls state", []string{"ls", "--state", "done"}, "unknown state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, tt.args...)
			if code != cli.ExitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, cli.ExitUsage, errOut)
			}
			if out != "" || !strings.HasPrefix(errOut, "connhost: ") || !strings.Contains(errOut, tt.want) {
				t.Fatalf("stdout %q stderr %q, want one connhost: line containing %q", out, errOut, tt.want)
			}
			if strings.Count(errOut, "connhost: ") != 1 {
				t.Errorf("error printed more than once: %q", errOut)
			}
		})
	}
}

// TestMistypedFlagSuggests: a mistyped flag gets suggestions as a
// mistyped command does, among the command's own flags and the global
// ones; a flag like no other gets none.
func TestMistypedFlagSuggests(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // "" for no suggestion
	}{
		{[]string{"ls", "--stat", "recovery_required"}, "\n\n  Did you mean this?\n      --state\n"},
		{[]string{"--jsn", "ls"}, "\n\n  Did you mean this?\n      --json\n"},
		{[]string{"history", "ex_1", "--dat", "x"}, "\n\n  Did you mean this?\n      --data\n"},
		{[]string{"exec", "--sesion", "s1"}, "\n\n  Did you mean this?\n      --session\n"},
		{[]string{"ls", "--colour"}, ""},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, nil, tt.args...)
			if code != cli.ExitUsage || !strings.HasPrefix(errOut, "connhost: unknown flag: ") {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if got := strings.Contains(errOut, "Did you mean"); tt.want == "" && got {
				t.Errorf("a suggestion for a flag like no other: %q", errOut)
			}
			if tt.want != "" && !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr %q lacks %q", errOut, tt.want)
			}
		})
	}
}

// TestMissingPathExit2: a --config, --manifests or --data path that does
// not exist is a usage error (exit 2, as connhost help exit-codes says),
// and the commands that act on recorded executions leave no data
// directory behind where there was none.
func TestMissingPathExit2(t *testing.T) {
	dir := t.TempDir()
	nope := filepath.Join(dir, "nope")
	for _, tt := range []struct {
		name string
		args []string
		flag string
	}{
		{"config of ls", []string{"--config", nope + ".toml", "ls"}, "--config"},
		{"config of exec", []string{"--manifests", "../../manifests", "--config", nope + ".toml", "exec", "--session", "s1",
			"--tool-call", "call_1", "--tool", "payments.get_payment", "--args", `{"payment_intent":"pi_1"}`}, "--config"},
		{"manifests of tools", []string{"--manifests", nope, "tools"}, "--manifests"},
		{"manifests of exec", []string{"--manifests", nope, "exec", "--session", "s1", "--tool-call", "call_1",
			"--tool", "payments.get_payment", "--args", `{"payment_intent":"pi_1"}`}, "--manifests"},
		{"data of ls", []string{"--data", nope, "ls"}, "--data"},
		{"data of history", []string{"--data", nope, "history", "ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz"}, "--data"},
		{"data of recover", []string{"--manifests", "../../manifests", "--data", nope, "recover"}, "--data"},
		{"data of prune", []string{"--manifests", "../../manifests", "--data", nope, "prune", "--older-than", "720h"}, "--data"},
		{"data of approve", []string{"--manifests", "../../manifests", "--data", nope, "approve", "ap_njtcv4fzn2kmhrfcdjtcxw6umukudvcz",
			"--digest", "aac26fb6d9462554018b1c41f639c64b28d04f602ab7b2f54b9f2b7f334bd1ba"}, "--data"},
		{"data of resolve", []string{"--manifests", "../../manifests", "--data", nope, "resolve", "ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz",
			"--applied", "--reason", "seen"}, "--data"},
		{"data of cancel", []string{"--manifests", "../../manifests", "--data", nope, "cancel", "ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz"}, "--data"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, tt.args...)
			want := "connhost: " + tt.flag + " " + nope
			if code != cli.ExitUsage || out != "" || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "no such file or directory") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, cli.ExitUsage, want)
			}
			if _, err := os.Stat(nope); !os.IsNotExist(err) {
				t.Errorf("%s exists after the refusal: %v", nope, err)
			}
		})
	}
}

func TestUsageErrorJSON(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "--json", "history")
	if code != cli.ExitUsage || errOut != "" {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil || p["code"] != "bad_request" {
		t.Fatalf("stdout %q: %v", out, err)
	}
}

// TestBenchLedgerRefusesBadSizes: the benchmark itself is run by hand
// (it takes minutes); its flags are checked here.
func TestBenchLedgerRefusesBadSizes(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "ledger", "--pending", "0"}, {"bench", "ledger", "--concurrency", "0"}, {"bench", "ledger", "--history", "-1"},
	} {
		code, _, errOut := runCLI(t, nil, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, "bench ledger needs") {
			t.Errorf("%v: exit %d stderr %q", args, code, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "ledger", "--backend", "postgres"}, "--backend postgres needs --dsn"},
		{[]string{"bench", "ledger", "--backend", "sqlite"}, `--backend is pebble, postgres or both, not "sqlite"`},
		{[]string{"bench", "ledger", "--dsn", "postgres://localhost"}, "--dsn needs --backend postgres"},
	} {
		code, _, errOut := runCLI(t, nil, c.args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d stderr %q, want %q", c.args, code, errOut, c.want)
		}
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProblemForRecoveryRequired: the CLI reports Cancel's refusal of a
// recovery_required execution with the HTTP API's code, not as internal.
func TestProblemForRecoveryRequired(t *testing.T) {
	err := withResult(fmt.Errorf("%w: execution[ex_1] … (connhost resolve ex_1)", host.ErrRecoveryRequired),
		host.Result{ExecutionID: "ex_1", Status: host.StatusRecoveryRequired})
	p := problemFor(err, false)
	if p.Code != httpapi.CodeRecoveryRequired || p.Execution == nil || p.ExecutionID != "ex_1" || !strings.Contains(p.Detail, "connhost resolve") {
		t.Fatalf("problem: %+v", p)
	}
}

func TestServeRefusesPublicWithoutToken(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "connhost.toml", "[server]\nlisten = \"0.0.0.0:0\"\n")
	code, _, errOut := runCLI(t, nil, "serve", "--config", cfg, "--data", filepath.Join(dir, "data"))
	if code != cli.ExitFailure || !strings.Contains(errOut, "non-loopback") {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
}

// TestServeRefusesShortTokensOffLoopback: a token of a few characters
// was taken silently on any listen address, where whoever reaches the
// port may guess it. Off loopback serve now refuses to start, naming each
// short token's principal and length (never the token); a token of 32
// characters passes that check (here to the next one, the missing
// manifests). On loopback it warns (TestDoorsThroughServe).
func TestServeRefusesShortTokensOffLoopback(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "connhost.toml", `
[server]
listen = "0.0.0.0:0"
behind_tls_proxy = true
token = "abc"

[[principals]]
name = "rita"
roles = ["approver"]
token = "0123456789abcdef0123456789abcdef"
`)
	code, _, errOut := runCLI(t, nil, "serve", "--config", cfg, "--data", filepath.Join(dir, "data"))
	if code != cli.ExitFailure || !strings.Contains(errOut, "shorter than 32 characters") || !strings.Contains(errOut, "runtime (3 characters)") ||
		strings.Contains(errOut, "rita") || strings.Contains(errOut, `"abc"`) {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	long := writeFile(t, dir, "long.toml", "[server]\nlisten = \"0.0.0.0:0\"\nbehind_tls_proxy = true\ntoken = \"0123456789abcdef0123456789abcdef\"\n")
	code, _, errOut = runCLI(t, nil, "serve", "--config", long, "--data", filepath.Join(dir, "data"), "--manifests", filepath.Join(dir, "none"))
	if code == cli.ExitOK || strings.Contains(errOut, "shorter than") || !strings.Contains(errOut, "--manifests") {
		t.Fatalf("a 32-character token: exit %d stderr %q", code, errOut)
	}
}

type dirs struct{ data, modules string }

// testDirs returns a fresh data dir and a modules dir holding noop.wasm
// (devkit/testing/testconnectors/noop), the module of testdata/manifests.
func testDirs(t *testing.T) dirs {
	t.Helper()
	wasm, _, err := wasmbuild.Cached(context.Background(), "devkit/testing/testconnectors/noop")
	if err != nil {
		t.Fatalf("build noop connector: %v", err)
	}
	dir := t.TempDir()
	d := dirs{data: filepath.Join(dir, "data"), modules: filepath.Join(dir, "modules")}
	if err := os.MkdirAll(d.modules, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, d.modules, "noop.wasm", string(b))
	return d
}

// testApp returns an app on a temporary data dir with the noop test
// connectors (see testdata/manifests) and their module.
func testApp(t *testing.T) *app {
	t.Helper()
	d := testDirs(t)
	a := newApp(strings.NewReader(""), nil, nil)
	a.open = func(ctx context.Context, o openOptions) (*host.Executor, error) {
		a.g.data, a.g.manifests, a.g.modules = d.data, "testdata/manifests", d.modules
		o.allowUnpinned = true // test manifests pin no digest
		return a.openExecutor(ctx, o)
	}
	a.openLedger = func(ctx context.Context) (ledger.Ledger, error) {
		a.g.data = d.data
		return a.openLedgerDirect(ctx)
	}
	return a
}

func TestExecEndToEnd(t *testing.T) {
	a := testApp(t)
	exec := func(session, call, tool, args string, extra ...string) (int, string, string) {
		return runCLI(t, a, append([]string{"--json", "exec", "--session", session, "--tool-call", call, "--tool", tool, "--args", args}, extra...)...)
	}
	code, out, errOut := exec("s1", "c1", "noop.echo", `{"msg":"hi"}`)
	var res host.Result
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusSucceeded {
		t.Fatalf("exec: %d %q %q", code, out, errOut)
	}

	// The name the tool definitions list is the same tool.
	code, out, _ = exec("s1", "c1", "noop_echo", `{"msg":"hi"}`)
	var again host.Result
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &again) != nil || again.ExecutionID != res.ExecutionID || !again.Recorded {
		t.Fatalf("exec by the listed name: %d %q", code, out)
	}

	code, out, _ = exec("s1", "c1", "noop.echo", `{"msg":"other"}`)
	var p map[string]any
	if code != cli.ExitFailure || json.Unmarshal([]byte(out), &p) != nil || p["code"] != "intent_mismatch" || p["recorded_digest"] == "" {
		t.Fatalf("mismatch: %d %q", code, out)
	}

	code, out, _ = exec("s1", "c2", "gated.echo", `{}`)
	if code != cli.ExitNotSucceeded || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated: %d %q", code, out)
	}
	ap := res.Approval
	code, out, _ = runCLI(t, a, "--json", "approve", ap.ID, "--by", "rita", "--digest", ap.ArgsDigest)
	if code != cli.ExitOK || !strings.Contains(out, `"pending"`) {
		t.Fatalf("approve: %d %q", code, out)
	}
	if code, out, _ = exec("s1", "c2", "gated.echo", `{}`); code != cli.ExitOK {
		t.Fatalf("re-drive: %d %q", code, out)
	}

	code, out, _ = exec("old", "c1", "noop.echo", `{}`, "--resumed")
	if code != cli.ExitRecoveryRequired || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusRecoveryRequired {
		t.Fatalf("resumed: %d %q", code, out)
	}
	uncertain := res.ExecutionID

	code, out, errOut = runCLI(t, a, "exec", "--session", "old", "--tool-call", "c2", "--tool", "noop.echo", "--args", `{}`)
	if code != cli.ExitRecoveryRequired || out != "" || !strings.Contains(errOut, "code: session_fenced") || !strings.Contains(errOut, uncertain) {
		t.Fatalf("fenced: %d %q %q", code, out, errOut)
	}

	code, out, _ = runCLI(t, a, "recover")
	if code != cli.ExitRecoveryRequired || !strings.Contains(out, uncertain) {
		t.Fatalf("recover: %d %q", code, out)
	}

	code, out, _ = runCLI(t, a, "ls", "--state", "recovery_required")
	if code != cli.ExitOK || !strings.Contains(out, uncertain) || strings.Count(out, "\n") != 2 {
		t.Fatalf("ls: %d %q", code, out)
	}

	code, out, errOut = runCLI(t, a, "resolve", uncertain, "--not-applied", "--abandon", "--by", "olga", "--reason", "no trace at the provider")
	if code != cli.ExitOK || !strings.Contains(out, "abandoned") {
		t.Fatalf("resolve: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, a, "history", uncertain)
	if code != cli.ExitOK || !strings.Contains(out, "operator_abandon") || !strings.Contains(out, "resumed_without_record") {
		t.Fatalf("history: %d %q", code, out)
	}
	code, _, errOut = runCLI(t, a, "history", "ex_nope")
	if code != cli.ExitFailure || !strings.Contains(errOut, "code: not_found") {
		t.Fatalf("history unknown: %d %q", code, errOut)
	}
	if code, _, _ = runCLI(t, a, "recover"); code != cli.ExitOK {
		t.Fatalf("recover after resolve: %d", code)
	}
}

func TestToolsCommand(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "--manifests", "testdata/manifests", "tools", "--format", "anthropic")
	if code != cli.ExitOK {
		t.Fatalf("exit %d %q", code, errOut)
	}
	golden(t, "tools_anthropic", []byte(out))
}

// TestSandboxCommand runs the real emulators and stops them.
func TestSandboxCommand(t *testing.T) {
	pr, pw := io.Pipe()
	a := newApp(strings.NewReader(""), pw, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- a.execute(ctx, []string{"sandbox", "--json"})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("startup line: %v", err)
	}
	var urls map[string]string
	if err := json.Unmarshal([]byte(line), &urls); err != nil || !strings.HasPrefix(urls["payments"], "http://127.0.0.1:") || !strings.HasPrefix(urls["email"], "http://127.0.0.1:") {
		t.Fatalf("startup line %q: %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	cancel()
	if code := <-done; code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
}

// TestPruneKeepsTheIDFenced: a pruned execution is gone from the ledger but
// its tool call is never executed again as new.
func TestPruneKeepsTheIDFenced(t *testing.T) {
	a := testApp(t)
	if code, out, errOut := runCLI(t, a, "--json", "exec", "--session", "s1", "--tool-call", "c1", "--tool", "noop.echo", "--args", `{"msg":"hi"}`); code != cli.ExitOK {
		t.Fatalf("exec: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, a, "prune"); code != cli.ExitUsage || !strings.Contains(errOut, "--older-than") {
		t.Fatalf("prune without an age: %d %q", code, errOut)
	}
	time.Sleep(10 * time.Millisecond) // the execution must be older than the age below
	code, out, errOut := runCLI(t, a, "--json", "prune", "--older-than", "1ms")
	var rep struct{ Pruned int }
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Pruned != 1 {
		t.Fatalf("prune: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, a, "--json", "exec", "--session", "s1", "--tool-call", "c1", "--tool", "noop.echo", "--args", `{"msg":"hi"}`)
	var p map[string]any
	if code != cli.ExitFailure || json.Unmarshal([]byte(out), &p) != nil || p["code"] != "pruned" {
		t.Fatalf("re-issued pruned call: %d %q", code, out)
	}
}

// TestExecRefusesAmbiguousInput: exec's identity flags and --args are held
// to the same rules as the HTTP envelope: an id that is not valid UTF-8 or
// holds a control character, and arguments that name a key twice or are
// not valid UTF-8, are refused with a message naming the field, and
// nothing is recorded.
func TestExecRefusesAmbiguousInput(t *testing.T) {
	a := testApp(t)
	for _, tc := range []struct {
		name                string
		session, call, args string
		want                string
	}{
		{"tool call not UTF-8", "s1", "call_\xff", `{}`, "tool_call_id is not valid UTF-8 (byte 0xff at offset 5)"},
		{"session with newline", "s1\nforged", "c1", `{}`, "session_id holds the control character U+000A at offset 2"},
		{"args key twice", "s1", "c1", `{"msg":"a","msg":"b"}`, `the key "msg" is named twice in the top-level object`},
		{"args not UTF-8", "s1", "c1", "{\"msg\":\"\xfe\"}", "not valid UTF-8 (byte 0xfe at offset 8)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, a, "exec", "--session", tc.session, "--tool-call", tc.call, "--tool", "noop.echo", "--args", tc.args)
			if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d stdout %q stderr %q, want exit %d and %q", code, out, errOut, cli.ExitUsage, tc.want)
			}
		})
	}
	if code, out, _ := runCLI(t, a, "ls"); code != cli.ExitOK || strings.TrimSpace(out) != "no executions" {
		t.Fatalf("ls after refused calls: %d %q", code, out)
	}
}

// TestExecRefusedCallExit2: a call the executor refuses before recording
// anything is a command-line mistake, as `connhost help exit-codes` says:
// exit 2, with a message that says what is wrong in words (no chain of Go
// package prefixes); an unknown tool's message lists the tools there are,
// as text and as the --json problem.
func TestExecRefusedCallExit2(t *testing.T) {
	a := testApp(t)
	for _, tc := range []struct {
		name, tool, args string
		want             []string
	}{
		{"unknown tool", "nope.echo", `{}`, []string{`unknown tool "nope.echo"`, "the available tools are: gated.echo, noop.echo, noop.keyed", "code: unknown_tool"}},
		{"unknown operation", "noop.nope", `{}`, []string{`connector "noop" has no operation "nope"`, "noop.echo, noop.keyed"}},
		{"arguments fail the schema", "noop.echo", `{"msg":3}`, []string{"the arguments do not match the input schema of noop.echo: /msg: ", "code: invalid_arguments"}},
		{"arguments not an object", "noop.echo", `[1]`, []string{"the arguments of noop.echo are refused: must be a JSON object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, a, "exec", "--session", "s1", "--tool-call", "c1", "--tool", tc.tool, "--args", tc.args)
			if code != cli.ExitUsage || out != "" {
				t.Fatalf("exit %d stdout %q stderr %q, want exit %d", code, out, errOut, cli.ExitUsage)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
			for _, chain := range []string{"host:", "manifests:", "ledger:"} {
				if strings.Contains(strings.TrimPrefix(errOut, "connhost: "), chain) {
					t.Errorf("stderr carries a Go error chain: %q", errOut)
				}
			}
		})
	}
	code, out, _ := runCLI(t, a, "--json", "exec", "--session", "s1", "--tool-call", "c1", "--tool", "nope.echo", "--args", `{}`)
	var p httpapi.Problem
	if code != cli.ExitUsage || json.Unmarshal([]byte(out), &p) != nil || p.Code != httpapi.CodeUnknownTool ||
		strings.Join(p.AvailableTools, " ") != "gated.echo noop.echo noop.keyed" {
		t.Fatalf("--json: exit %d %q", code, out)
	}
	if code, out, _ := runCLI(t, a, "ls"); code != cli.ExitOK || strings.TrimSpace(out) != "no executions" {
		t.Fatalf("ls after refused calls: %d %q", code, out)
	}
}

// TestSandboxCommandState: `connhost sandbox --state DIR` keeps what the
// emulators did across a restart, and refuses a state file it cannot read.
func TestSandboxCommandState(t *testing.T) {
	state := t.TempDir()
	start := func() (urls map[string]string, stop func()) {
		pr, pw := io.Pipe()
		a := newApp(strings.NewReader(""), pw, io.Discard)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- a.execute(ctx, []string{"sandbox", "--json", "--state", state})
			pw.Close()
		}()
		line, err := bufio.NewReader(pr).ReadString('\n')
		if err != nil || json.Unmarshal([]byte(line), &urls) != nil {
			t.Fatalf("startup line %q: %v", line, err)
		}
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		return urls, func() {
			cancel()
			if code := <-done; code != cli.ExitOK {
				t.Errorf("sandbox exit %d", code)
			}
		}
	}
	urls, stop := start()
	req, _ := http.NewRequest(http.MethodPost, urls["payments"]+"/v1/payment_intents",
		strings.NewReader("amount=500&currency=usd&confirm=true&payment_method=pm_card_visa"))
	req.Header.Set("Authorization", "Bearer "+sandbox.DefaultAPIKey)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("create payment intent: %v %v", resp, err)
	}
	resp.Body.Close()
	stop()

	urls, stop = start()
	n, err := sandbox.NewClient(urls["payments"], urls["email"]).CountPaymentIntents(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("payment intents after the restart: %d %v", n, err)
	}
	stop()

	writeFile(t, state, sandbox.StripeStateFile, "{")
	code, _, errOut := runCLI(t, nil, "sandbox", "--state", state)
	if code != cli.ExitFailure || !strings.Contains(errOut, "corrupt state file") || !strings.Contains(errOut, sandbox.StripeStateFile) {
		t.Fatalf("corrupt state: exit %d %q", code, errOut)
	}
}

// TestApproveShowsTheCall: approve without --digest shows the call as a
// reviewer must see it (every argument decoded, control and bidi
// characters as escapes, never raw on the terminal), decides nothing and
// exits 2 with the command that approves exactly that call; --json gives
// the approval view of GET /v1/approvals/{id}. history and ls show the
// arguments the same way.
func TestApproveShowsTheCall(t *testing.T) {
	a := testApp(t)
	code, out, errOut := runCLI(t, a, "--json", "exec", "--session", "s1", "--tool-call", "c1", "--tool", "gated.echo",
		"--args", `{"msg":"pay \u202etxt.exe\u001b[2J"}`)
	var res host.Result
	if code != cli.ExitNotSucceeded || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated: %d %q %q", code, out, errOut)
	}
	ap := res.Approval
	code, out, errOut = runCLI(t, a, "approve", ap.ID)
	if code != cli.ExitUsage {
		t.Fatalf("approve without --digest: exit %d %q %q", code, out, errOut)
	}
	wantLine := `  msg = "pay \u202Etxt.exe\u001B[2J"` + "\n"
	if !strings.HasPrefix(out, "Tool: gated.echo\nArguments:\n"+wantLine) || strings.ContainsAny(out, "\u202e\x1b") {
		t.Fatalf("approve without --digest shows %q", out)
	}
	if !strings.Contains(errOut, "nothing was decided: to approve exactly the call shown above, run connhost approve "+ap.ID+" --digest "+ap.ArgsDigest) {
		t.Fatalf("approve without --digest says %q", errOut)
	}
	code, out, _ = runCLI(t, a, "--json", "approve", ap.ID)
	var view host.ApprovalView
	if code != cli.ExitUsage || json.Unmarshal([]byte(out), &view) != nil || view.ArgsDigest != ap.ArgsDigest || len(view.Fields) != 1 || !view.Fields[0].Escaped {
		t.Fatalf("approve --json without --digest: %d %q", code, out)
	}

	code, out, _ = runCLI(t, a, "ls")
	if code != cli.ExitOK || !strings.Contains(out, "(1 awaiting approval: connhost approve <approval-id> without --digest shows each call whole)") {
		t.Fatalf("ls: %d %q", code, out)
	}
	code, out, _ = runCLI(t, a, "history", res.ExecutionID)
	if code != cli.ExitOK || !strings.Contains(out, "arguments (1, every one as a reviewer is shown it):\nArguments:\n"+wantLine) || strings.ContainsAny(out, "\u202e\x1b") {
		t.Fatalf("history: %d %q", code, out)
	}

	if code, out, _ = runCLI(t, a, "approve", ap.ID, "--by", "rita", "--digest", ap.ArgsDigest); code != cli.ExitOK {
		t.Fatalf("approve: %d %q", code, out)
	}
	code, _, errOut = runCLI(t, a, "approve", ap.ID)
	if code != cli.ExitUsage || !strings.Contains(errOut, "is approved") || !strings.Contains(errOut, "there is nothing to approve") {
		t.Fatalf("approve an approved call without --digest: %d %q", code, errOut)
	}
}
