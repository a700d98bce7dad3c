package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
)

// buildConnhost builds ./cmd/connhost into dir.
func buildConnhost(t *testing.T, dir string) string {
	t.Helper()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "connhost")
	build := exec.Command("go", "build", "-o", bin, "./cmd/connhost")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// pinnedManifests copies testdata/manifests into dir with the noop
// module's digest pinned, as serve requires.
func pinnedManifests(t *testing.T, dir, module string) string {
	t.Helper()
	digest, err := wasmbuild.FileDigest(module)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"noop.toml", "gated.toml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "manifests", name))
		if err != nil {
			t.Fatal(err)
		}
		pinned, err := manifests.SetSHA256(b, digest)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, out, name, string(pinned))
	}
	return out
}

// serverProcess is a connhost serve or dev process under test.
type serverProcess struct {
	*proc.Process
	log  *bytes.Buffer // its stderr, complete once it has ended
	logs chan string   // its log lines while it runs
	// startup are its log lines up to the ready one.
	startup []string
}

// startServer starts bin with args and env and returns once the log line
// containing ready appears (serve and dev log it after they wrote the
// discovery file). The process is killed when the test ends.
func startServer(t *testing.T, bin string, env []string, ready string, args ...string) *serverProcess {
	t.Helper()
	return startServerAt(t, bin, env, "", ready, args...)
}

// startServerAt is startServer with the crash point crashAt armed ("":
// none; see proc.Cmd.CrashAt).
func startServerAt(t *testing.T, bin string, env []string, crashAt, ready string, args ...string) *serverProcess {
	t.Helper()
	pr, pw := io.Pipe()
	s := &serverProcess{log: &bytes.Buffer{}, logs: make(chan string, 1024)}
	p, err := proc.Start(proc.Cmd{Path: bin, Args: args, Env: env, CrashAt: crashAt, Stderr: io.MultiWriter(s.log, pw), DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Process = p
	t.Cleanup(p.Kill)
	go func() {
		<-p.Done()
		pw.Close()
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case s.logs <- sc.Text():
			default:
			}
		}
		close(s.logs)
	}()
	var seen []string
	for line := range s.logs {
		seen = append(seen, line)
		if strings.Contains(line, ready) {
			s.startup = seen
			return s
		}
	}
	t.Fatalf("%s exited before %q:\n%s", bin, ready, strings.Join(seen, "\n"))
	return nil
}

// stop ends the server with SIGTERM, as an operator would, and fails the
// test unless it shut down cleanly.
func (s *serverProcess) stop(t *testing.T) {
	t.Helper()
	s.Stop(processBound)
	if res, err := s.Wait(t.Context()); err != nil || res.Signal != 0 || res.Code != 0 {
		t.Fatalf("shutdown: %s %v\n%s", res, err, s.log)
	}
}

// cliEnv is the environment of CLI runs: the test's, without any token.
func cliEnv(extra ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, DefaultTokenEnv+"=") })
	return append(env, extra...)
}

// runBin runs the built CLI and returns its exit code, stdout and stderr.
func runBin(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	res, err := proc.Run(t.Context(), proc.Cmd{Path: bin, Args: args, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return res.Code, string(res.Stdout), string(res.Stderr)
}

// apiCall posts (or gets, with a nil body) path on base with token.
func apiCall(t *testing.T, base, token, path string, body any, out any) int {
	t.Helper()
	method, rd := "GET", io.Reader(nil)
	if body != nil {
		b, _ := json.Marshal(body)
		method, rd = "POST", bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// TestDecisionsThroughARunningServer runs connhost serve (with a runtime
// token and an approver) and connhost dev as real processes and approves
// their calls with the real CLI: the CLI finds the server through its
// discovery file and goes through its API with the approver's token; the
// recorded reviewer is the token's principal. Without a token, with the
// runtime's token, or with the ledger held by a process that announced no
// API, it says so in one line — never "resource temporarily unavailable".
func TestDecisionsThroughARunningServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it")
	}
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	global := []string{"--data", d.data, "--manifests", mdir, "--modules", d.modules}
	const runtimeTok, ritaTok = "tok-runtime-0123456789", "tok-rita-0123456789"
	cfg := writeFile(t, tmp, "connhost.toml", `
[server]
token_env = "T_RUNTIME"

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"
`)
	srv := startServer(t, bin, cliEnv("T_RUNTIME="+runtimeTok, "T_RITA="+ritaTok), "serving the HTTP API",
		append([]string{"--json", "serve", "--config", cfg, "--listen", "127.0.0.1:0"}, global...)...)
	si, err := readServerInfo(d.data)
	if err != nil || si.PID != srv.Pid() || si.Command != "serve" || !si.Auth {
		t.Fatalf("discovery file %+v: %v", si, err)
	}

	gated := func(call string) host.Result {
		t.Helper()
		var res host.Result
		apiCall(t, si.URL, runtimeTok, "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": call, "tool": "gated.echo", "arguments": map[string]string{"msg": call}}, &res)
		if res.Status != host.StatusAwaitingApproval {
			t.Fatalf("gated call: %+v", res)
		}
		return res
	}
	approve := func(env []string, res host.Result, extra ...string) (int, string, string) {
		t.Helper()
		return runBin(t, bin, env, append(append([]string{"approve", res.Approval.ID, "--digest", res.Approval.ArgsDigest}, global...), extra...)...)
	}
	oneLine := func(what, errOut string, want ...string) {
		t.Helper()
		t.Logf("%s: %s", what, errOut)
		if strings.Contains(errOut, "resource temporarily unavailable") || strings.Count(errOut, "connhost: ") != 1 {
			t.Errorf("%s: stderr %q", what, errOut)
		}
		for _, w := range want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", what, w, errOut)
			}
		}
	}

	c1 := gated("c1")
	code, _, errOut := approve(cliEnv(), c1)
	oneLine("without a token", errOut, "connhost serve (pid "+strconv.Itoa(srv.Pid())+")", "holds the ledger", DefaultTokenEnv)
	if code != cli.ExitFailure {
		t.Errorf("without a token: exit %d", code)
	}
	code, _, errOut = approve(cliEnv(DefaultTokenEnv+"="+runtimeTok), c1)
	oneLine("with the runtime's token", errOut, "needs role approver", "code: forbidden_role")
	if code != cli.ExitFailure {
		t.Errorf("with the runtime's token: exit %d", code)
	}
	code, _, errOut = approve(cliEnv(DefaultTokenEnv+"="+ritaTok), c1, "--by", "ceo")
	oneLine("signing as another", errOut, "code: identity_mismatch")
	if code != cli.ExitFailure {
		t.Errorf("signing as another: exit %d", code)
	}
	var view httpapi.Execution
	apiCall(t, si.URL, runtimeTok, "/v1/executions/"+c1.ExecutionID, nil, &view)
	if view.State != "awaiting_approval" {
		t.Fatalf("refused approvals changed the execution: %s", view.State)
	}

	code, out, errOut := approve(cliEnv(DefaultTokenEnv+"="+ritaTok), c1, "--json")
	var res host.Result
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusPending {
		t.Fatalf("approve with rita's token: exit %d %q %q", code, out, errOut)
	}
	apiCall(t, si.URL, runtimeTok, "/v1/executions/"+c1.ExecutionID, nil, &view)
	last := view.Events[len(view.Events)-1]
	if view.Approval.By != "rita" || last.Actor != "rita" {
		t.Fatalf("recorded reviewer %q, actor %q", view.Approval.By, last.Actor)
	}

	// ls, history and recover read through the server too, with any
	// principal's token (recover: a runtime's or an operator's).
	code, _, errOut = runBin(t, bin, cliEnv(), append([]string{"ls"}, global...)...)
	oneLine("ls without a token", errOut, "connhost serve (pid "+strconv.Itoa(srv.Pid())+")", "needs a bearer token", "any principal's may read")
	if strings.Contains(errOut, "an approver's") {
		t.Errorf("ls without a token asks for a decision's token: %s", errOut)
	}
	if code != cli.ExitFailure {
		t.Errorf("ls without a token: exit %d", code)
	}
	code, out, errOut = runBin(t, bin, cliEnv(DefaultTokenEnv+"="+ritaTok), append([]string{"ls"}, global...)...)
	if code != cli.ExitOK || !strings.Contains(out, c1.ExecutionID+"  approved  gated.echo  s1") {
		t.Fatalf("ls through serve: exit %d %q %q", code, out, errOut)
	}
	var list httpapi.ListResponse
	code, out, errOut = runBin(t, bin, cliEnv(DefaultTokenEnv+"="+ritaTok), append([]string{"--json", "ls", "--state", "approved"}, global...)...)
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &list) != nil || len(list.Executions) != 1 || list.Executions[0].ExecutionID != c1.ExecutionID {
		t.Fatalf("ls --json through serve: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut = runBin(t, bin, cliEnv(DefaultTokenEnv+"="+ritaTok), append([]string{"history", c1.ExecutionID}, global...)...)
	if code != cli.ExitOK || !strings.Contains(out, "idempotency key  "+view.IdempotencyKey+"\n") || view.IdempotencyKey == "" ||
		!strings.Contains(out, "approved by rita") || !strings.Contains(out, `msg = "c1"`) {
		t.Fatalf("history through serve: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut = runBin(t, bin, cliEnv(DefaultTokenEnv+"="+runtimeTok), append([]string{"--json", "recover"}, global...)...)
	var rep host.RecoveryReport
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Pending == 0 {
		t.Fatalf("recover through serve: exit %d %q %q", code, out, errOut)
	}

	// A holder that announced no API: the CLI names its pid.
	if err := os.Remove(filepath.Join(d.data, serverInfoFile)); err != nil {
		t.Fatal(err)
	}
	c2 := gated("c2")
	code, _, errOut = approve(cliEnv(DefaultTokenEnv+"="+ritaTok), c2)
	oneLine("no discovery file", errOut, "is in use by process "+strconv.Itoa(srv.Pid()), "announced no API", "--server URL")
	if code != cli.ExitFailure {
		t.Errorf("no discovery file: exit %d", code)
	}
	// A stale discovery file: its pid is gone.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := serverInfo{URL: "http://127.0.0.1:1", PID: gone.Process.Pid, Command: "serve", Auth: true}
	if _, err := writeServerInfo(d.data, stale); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = approve(cliEnv(DefaultTokenEnv+"="+ritaTok), c2)
	oneLine("stale discovery file", errOut, "is in use by process "+strconv.Itoa(srv.Pid()), "which does not answer")
	if code != cli.ExitFailure {
		t.Errorf("stale discovery file: exit %d", code)
	}
	// --server, or $CONNHOST_SERVER, reaches it anyway.
	code, out, errOut = runBin(t, bin, cliEnv(DefaultTokenEnv+"="+ritaTok, ServerEnv+"="+si.URL), append([]string{"ls", "--state", "awaiting_approval"}, global...)...)
	if code != cli.ExitOK || !strings.Contains(out, c2.ExecutionID) {
		t.Fatalf("ls with $%s: exit %d %q %q", ServerEnv, code, out, errOut)
	}
	code, _, errOut = approve(cliEnv(DefaultTokenEnv+"="+ritaTok), c2, "--server", si.URL)
	if code != cli.ExitOK {
		t.Fatalf("--server: exit %d %q", code, errOut)
	}

	// A clean shutdown removes only its own discovery file (the stale one
	// above is not its own) and releases the ledger: the CLI then opens
	// it directly and records the local user, or --by.
	srv.stop(t)
	if cur, err := readServerInfo(d.data); err != nil || cur.PID != stale.PID {
		t.Errorf("serve removed a discovery file not its own: %+v %v", cur, err)
	}
	if strings.Contains(srv.log.String(), "approvals disabled") || strings.Contains(srv.log.String(), ritaTok) {
		t.Errorf("serve log:\n%s", srv.log)
	}
	code, out, errOut = runBin(t, bin, cliEnv(), append([]string{"--json", "exec", "--session", "s1", "--tool-call", "c3", "--tool", "gated.echo", "--args", "{}"}, global...)...)
	if code != cli.ExitNotSucceeded || json.Unmarshal([]byte(out), &res) != nil || res.Approval == nil {
		t.Fatalf("exec after shutdown: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut = approve(cliEnv(), res); code != cli.ExitOK {
		t.Fatalf("approve directly: exit %d %q %q", code, out, errOut)
	}
	if code, out, errOut = runBin(t, bin, cliEnv(), append([]string{"--json", "cancel", c2.ExecutionID, "--by", "olga"}, global...)...); code != cli.ExitOK {
		t.Fatalf("cancel directly: exit %d %q %q", code, out, errOut)
	}
	for id, want := range map[string]string{res.ExecutionID: localActor(), c2.ExecutionID: "olga"} {
		code, out, errOut = runBin(t, bin, cliEnv(), append([]string{"--json", "history", id}, global...)...)
		if code != cli.ExitOK || json.Unmarshal([]byte(out), &view) != nil {
			t.Fatalf("history: exit %d %q %q", code, out, errOut)
		}
		if last := view.Events[len(view.Events)-1]; last.Actor != want {
			t.Errorf("%s: actor %q, want %q", id, last.Actor, want)
		}
	}
}

// TestDecisionsThroughDev: connhost dev has no tokens; the CLI approves
// through it without one, and the recorded reviewer is dev-loopback with
// the claimed name in the reason. Its log says that anyone on the machine
// can approve.
func TestDecisionsThroughDev(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it")
	}
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	global := []string{"--data", d.data, "--manifests", "testdata/manifests", "--modules", d.modules}
	dev := startServer(t, bin, cliEnv(), "serving the HTTP API", append([]string{"--json", "dev", "--listen", "127.0.0.1:0"}, global...)...)
	si, err := readServerInfo(d.data)
	if err != nil || si.PID != dev.Pid() || si.Command != "dev" || si.Auth {
		t.Fatalf("discovery file %+v: %v", si, err)
	}
	var res host.Result
	apiCall(t, si.URL, "", "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": "c1", "tool": "gated.echo", "arguments": map[string]string{}}, &res)
	// Without --digest, approve shows the call, read through the server
	// (GET /v1/approvals/{id}), and decides nothing.
	code, out, errOut := runBin(t, bin, cliEnv(), append([]string{"approve", res.Approval.ID}, global...)...)
	if code != cli.ExitUsage || !strings.HasPrefix(out, "Tool: gated.echo\nArguments: none\n") ||
		!strings.Contains(errOut, "connhost approve "+res.Approval.ID+" --digest "+res.Approval.ArgsDigest) {
		t.Fatalf("approve without --digest through dev: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut = runBin(t, bin, cliEnv(), append([]string{"--json", "approve", res.Approval.ID, "--digest", res.Approval.ArgsDigest, "--by", "rita", "--reason", "fine"}, global...)...)
	if code != cli.ExitOK {
		t.Fatalf("approve through dev: exit %d %q %q", code, out, errOut)
	}
	var view httpapi.Execution
	apiCall(t, si.URL, "", "/v1/executions/"+res.ExecutionID, nil, &view)
	last := view.Events[len(view.Events)-1]
	if view.Approval.By != "dev-loopback" || last.Actor != "dev-loopback" || last.Reason != "claimed by rita: fine" {
		t.Fatalf("recorded approval %+v, event %+v", view.Approval, last)
	}
	dev.stop(t)
	if !strings.Contains(dev.log.String(), "anyone on this machine can approve, reject and resolve") {
		t.Errorf("dev log does not say who can approve:\n%s", dev.log)
	}
	if _, err := readServerInfo(d.data); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dev left its discovery file: %v", err)
	}
}

// TestServerInfo: the discovery file round-trips, a server removes only
// its own file, and an unspecified listen address is reached through
// loopback.
func TestServerInfo(t *testing.T) {
	dir := t.TempDir()
	if _, err := readServerInfo(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no file: %v", err)
	}
	mine := serverInfo{URL: "http://127.0.0.1:8420", PID: os.Getpid(), Command: "serve", Auth: true}
	remove, err := writeServerInfo(dir, mine)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readServerInfo(dir); err != nil || got != mine {
		t.Fatalf("read back %+v: %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, serverInfoFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the discovery file is %v (%v), want 0600: only its owner follows it", fi.Mode().Perm(), err)
	}
	next := serverInfo{URL: "http://127.0.0.1:8421", PID: os.Getpid() + 1, Command: "dev"}
	if _, err := writeServerInfo(dir, next); err != nil {
		t.Fatal(err)
	}
	remove() // not ours any more
	if got, err := readServerInfo(dir); err != nil || got != next {
		t.Fatalf("a successor's file was removed: %+v %v", got, err)
	}
	writeFile(t, dir, serverInfoFile, `{"url": ""}`)
	if _, err := readServerInfo(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file without url accepted: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}

}
