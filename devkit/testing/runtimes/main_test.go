package runtimes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// env is what every test of the package shares, set up once by TestMain:
// the connhost binary, the payments connector with two manifests pinned
// to it, and the Stripe emulator that counts the charges.
type env struct {
	root    string
	dir     string
	bin     string
	modules string
	// gated holds the shipped payments.toml (create_payment needs
	// approval); ungated the same with create_payment not gated, the
	// case where a retry would charge at once.
	gated, ungated string
	sb             *sandbox.Sandbox
	jsDir          string
}

var shared env

func TestMain(m *testing.M) {
	code, err := runMain(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "runtimes: setup: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func runMain(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "connhost-runtimes-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	shared.root, shared.dir = root, dir
	shared.jsDir = filepath.Join(root, "clients", "js")
	shared.modules = filepath.Join(dir, "modules")
	shared.gated = filepath.Join(dir, "gated")
	shared.ungated = filepath.Join(dir, "ungated")
	for _, d := range []string{shared.modules, shared.gated, shared.ungated} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	wasm, digest, err := wasmbuild.Cached(ctx, "plugins/payments")
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(wasm)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(shared.modules, "payments.wasm"), data, 0o644); err != nil {
		return 0, err
	}
	src, err := os.ReadFile(filepath.Join(root, "manifests", "payments.toml"))
	if err != nil {
		return 0, err
	}
	if src, err = manifests.SetSHA256(src, digest); err != nil {
		return 0, err
	}
	// create_payment's requires_approval is the first in the file.
	ungated := strings.Replace(string(src), "requires_approval = true", "requires_approval = false", 1)
	if ungated == string(src) {
		return 0, fmt.Errorf("manifests/payments.toml: no requires_approval = true to lift")
	}
	for d, b := range map[string][]byte{shared.gated: src, shared.ungated: []byte(ungated)} {
		if err := os.WriteFile(filepath.Join(d, "payments.toml"), b, 0o644); err != nil {
			return 0, err
		}
	}
	shared.bin = filepath.Join(dir, "connhost")
	build := exec.CommandContext(ctx, "go", "build", "-o", shared.bin, "./cmd/connhost")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("go build ./cmd/connhost: %v\n%s", err, out)
	}
	// The emulator outlives every runtime and connhost process the tests
	// start and kill: it is the provider that counts what happened.
	sb, err := sandbox.Start(context.Background(), sandbox.Options{})
	if err != nil {
		return 0, err
	}
	defer sb.Close()
	shared.sb = sb
	return m.Run(), nil
}

// needNode returns node once the runtimes' packages are installed in
// clients/js (see testenv.Node).
func needNode(t *testing.T) string {
	t.Helper()
	return testenv.Node(t, shared.jsDir, "@openai/agents", "@langchain/langgraph", "@langchain/langgraph-checkpoint-sqlite", "@langchain/mcp-adapters")
}

// charges is how many charges the Stripe emulator has made.
func charges() int { return shared.sb.Payments().Stats().ChargesSucceeded }

// The tokens of the serve fixture's principals.
const (
	tokenRuntime = "tok-runtime-0123456789" // the runtime's: calls tools, never approves
	tokenRita    = "tok-rita-0123456789"    // rita, an approver
)

// connhost is one connhost deployment on its own data directory: a
// serve or dev process, or (stdio) the arguments of the connhost mcp
// that each runtime process launches.
type connhost struct {
	kind      string // "stdio", "serve", "dev"
	data      string
	manifests string
	config    string
	url       string // serve, dev: the API's base URL
	log       *syncBuffer
}

// newConnhost prepares connhost over kind with the manifests in dir and
// starts it (serve, dev).
func newConnhost(t *testing.T, kind, dir string) *connhost {
	t.Helper()
	c := &connhost{kind: kind, data: t.TempDir(), manifests: dir, log: &syncBuffer{}}
	stripe := shared.sb.PaymentsURL()
	u, _ := url.Parse(stripe)
	cfg := fmt.Sprintf("[connectors.payments]\napi_key = %q\nbase_url = %q\nallow_http = [%q]\n",
		sandbox.DefaultAPIKey, stripe, u.Scheme+"://"+u.Host)
	if kind == "serve" {
		cfg = fmt.Sprintf("[server]\ntoken = %q\n\n[[principals]]\nname = \"rita\"\nroles = [\"approver\"]\ntoken = %q\n\n", tokenRuntime, tokenRita) + cfg
	}
	c.config = filepath.Join(c.data, "connhost.toml")
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("connhost (%s) log:\n%s", kind, c.log.String())
		}
	})
	switch kind {
	case "serve":
		c.start(t, "serve", "--config", c.config, "--listen", "127.0.0.1:0")
	case "dev":
		c.start(t, "dev", "--json", "--listen", "127.0.0.1:0", "--payments-url", stripe, "--email-url", shared.sb.EmailURL())
	}
	return c
}

// start runs connhost's command until the test ends and waits for its
// API's URL (server.json in the data directory).
func (c *connhost) start(t *testing.T, args ...string) {
	t.Helper()
	args = append(args, "--data", c.data, "--manifests", c.manifests, "--modules", shared.modules)
	cmd := exec.Command(shared.bin, args...)
	cmd.Stderr = c.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var info struct {
			URL string `json:"url"`
		}
		if b, err := os.ReadFile(filepath.Join(c.data, "server.json")); err == nil && json.Unmarshal(b, &info) == nil && info.URL != "" {
			c.url = info.URL
			return
		}
		select {
		case <-done:
			t.Fatalf("connhost %s exited before it served:\n%s", args[0], c.log.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("connhost %s never wrote server.json:\n%s", args[0], c.log.String())
		}
	}
}

// target is how a runtime process reaches this connhost.
func (c *connhost) target(cfg map[string]any) {
	switch c.kind {
	case "stdio":
		cfg["transport"] = "stdio"
		cfg["command"] = shared.bin
		cfg["args"] = []string{"mcp", "--data", c.data, "--manifests", c.manifests, "--modules", shared.modules, "--config", c.config}
	default:
		cfg["transport"] = "http"
		cfg["url"] = c.url + "/mcp"
		cfg["token"] = tokenRuntime
	}
}

// awaitStdioExit waits until no connhost mcp on this data directory runs:
// the one a killed runtime launched sees its stdin close, finishes what it
// was doing and exits, and the next one needs the ledger's lock.
func (c *connhost) awaitStdioExit(t *testing.T) {
	t.Helper()
	if c.kind != "stdio" {
		return
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if !processWithArg(c.data) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("a connhost mcp on %s still runs", c.data)
}

// processWithArg reports whether a process of this user has arg among its
// command-line arguments (Linux: /proc).
func processWithArg(arg string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				return true
			}
		}
	}
	return false
}

// decide approves (or rejects) an approval out of band: through the API
// of serve (with rita's token) or dev (its loopback reviewer), or, for
// stdio once no connhost mcp runs, with connhost approve (reject) on the
// ledger.
func (c *connhost) decide(t *testing.T, id, digest string, approve bool) {
	t.Helper()
	verb := "reject"
	if approve {
		verb = "approve"
	}
	switch c.kind {
	case "serve", "dev":
		c.decideVia(t, c.reviewerToken(), verb, id, digest)
	case "stdio":
		c.awaitStdioExit(t)
		args := []string{verb, id, "--by", "rita", "--data", c.data, "--manifests", c.manifests, "--modules", shared.modules, "--config", c.config}
		if approve {
			args = append(args, "--digest", digest)
		} else {
			args = append(args, "--reason", "not this one")
		}
		out, err := exec.Command(shared.bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("connhost %s %s: %v\n%s", verb, id, err, out)
		}
	default:
		t.Fatalf("decide over %s", c.kind)
	}
}

// approve approves an approval out of band (see decide).
func (c *connhost) approve(t *testing.T, id, digest string) {
	t.Helper()
	c.decide(t, id, digest, true)
}

// reviewerToken is the token of a reviewer of this deployment: rita's on
// serve, none on dev (its loopback reviewer).
func (c *connhost) reviewerToken() string {
	if c.kind == "serve" {
		return tokenRita
	}
	return ""
}

// report is what a scenario script prints.
type report struct {
	// Outputs are the tool results the model read, in order.
	Outputs []string `json:"outputs"`
	// Final is the run's last answer.
	Final string `json:"final"`
	// ModelCalls is how many requests the scripted model answered in
	// this process.
	ModelCalls int `json:"modelCalls"`
	// Awaiting are the approvals the run paused for.
	Awaiting []approvalRef `json:"awaiting"`
}

// approvalRef is an approval a paused run reports.
type approvalRef struct {
	ApprovalID string `json:"approvalId"`
	ArgsDigest string `json:"argsDigest"`
	ToolCallID string `json:"toolCallId"`
}

// runtimeProc is one scenario script's process.
type runtimeProc struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan error
}

// startRuntime starts a runtime's scenario script with cfg.
func startRuntime(t *testing.T, node, script string, cfg map[string]any) *runtimeProc {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &runtimeProc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(node, filepath.Join("test", script), string(b))
	p.cmd.Dir = shared.jsDir
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	// The runtime's stdio connhost inherits its stderr, and Wait would
	// wait for every writer of that pipe: after a SIGKILL of the runtime,
	// for the orphaned connhost to finish the call it is in (the test holds
	// that call at the provider until the kill returns). Stop waiting for
	// the pipe shortly after the runtime itself exits.
	p.cmd.WaitDelay = 2 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s %s stderr:\n%s", script, cfg["phase"], p.stderr.String())
		}
	})
	return p
}

// wait waits for the script to finish and returns its report.
func (p *runtimeProc) wait(t *testing.T) report {
	t.Helper()
	select {
	case err := <-p.done:
		var rep report
		if jerr := json.Unmarshal([]byte(strings.TrimSpace(lastLine(p.stdout.String()))), &rep); err != nil || jerr != nil {
			t.Fatalf("runtime: %v (report: %v)\nstdout: %s\nstderr: %s", err, jerr, p.stdout.String(), p.stderr.String())
		}
		return rep
	case <-time.After(10 * time.Minute):
		t.Fatalf("runtime did not finish\nstderr: %s", p.stderr.String())
	}
	return report{}
}

// waitKilled waits for a script that kills itself (SIGKILL) at a point
// of its run.
func (p *runtimeProc) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the runtime ended with %v, want killed by SIGKILL\nstdout: %s\nstderr: %s", err, p.stdout.String(), p.stderr.String())
		}
	case <-time.After(10 * time.Minute):
		t.Fatalf("the runtime did not die\nstderr: %s", p.stderr.String())
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *runtimeProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// holdNextCharge makes the emulator hold the next payment intent it
// creates, once it has begun (the charge is made when released).
func holdNextCharge(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shared.sb.Client().AddPaymentsFault(ctx, fault.Rule{Kind: fault.Hold, Method: http.MethodPost, Path: "/v1/payment_intents"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = shared.sb.Client().ClearFaults(ctx)
		_ = shared.sb.Client().ReleaseHeld(ctx)
	})
}

// awaitHeld waits until the emulator holds a request: the call is at the
// provider, in the middle of its effect. A runtime that finished first
// fails the test.
func awaitHeld(t *testing.T, p *runtimeProc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for {
		n, err := shared.sb.Client().Held(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the runtime finished before its call reached the provider: %v\nstdout: %s\nstderr: %s", err, p.stdout.String(), p.stderr.String())
		case <-ctx.Done():
			t.Fatalf("the call never reached the provider\nstderr: %s", p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func releaseHeld(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shared.sb.Client().ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if err := shared.sb.Client().ReleaseHeld(ctx); err != nil {
		t.Fatal(err)
	}
}

// approvalRE finds the approval id and digest in the text the model read.
var approvalRE = regexp.MustCompile(`approval (ap_[a-z0-9]+), arguments digest ([0-9a-f]{64})`)

// syncBuffer is a bytes buffer safe for a process's writes and the
// test's reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count is how many lines of s contain substr.
func count(s, substr string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			n++
		}
	}
	return n
}

// approveVia approves through the API with token ("" for dev's loopback
// reviewer).
func (c *connhost) approveVia(t *testing.T, token, id, digest string) {
	t.Helper()
	c.decideVia(t, token, "approve", id, digest)
}

// decideVia approves or rejects (verb) through the API with token (""
// for dev's loopback reviewer).
func (c *connhost) decideVia(t *testing.T, token, verb, id, digest string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url+"/v1/approvals/"+id+"/"+verb, strings.NewReader(fmt.Sprintf(`{"digest":%q,"reason":"decided in a test"}`, digest)))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s", verb, id, resp.Status)
	}
}

// listed is an execution as the API lists it.
type listed struct {
	ExecutionID string `json:"execution_id"`
	SessionID   string `json:"session_id"`
	Approval    *struct {
		ID         string `json:"id"`
		ArgsDigest string `json:"args_digest"`
	} `json:"approval"`
}

// executions lists the executions of a serve or dev process in state (""
// for all).
func (c *connhost) executions(t *testing.T, state string) []listed {
	t.Helper()
	u := c.url + "/v1/executions"
	if state != "" {
		u += "?state=" + state
	}
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if tok := c.reviewerToken(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Executions []listed `json:"executions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Executions
}

func (c *connhost) countExecutions(t *testing.T) int { return len(c.executions(t, "")) }

// awaitAwaiting waits until the server holds one execution awaiting
// approval while the runtime p still waits for its call.
func (c *connhost) awaitAwaiting(t *testing.T, p *runtimeProc) listed {
	t.Helper()
	return c.awaitAwaitingIn(t, p, "")
}

// awaitAwaitingIn waits until the server holds one execution of session
// ("" for any) awaiting approval while the runtime p still waits for its
// call.
func (c *connhost) awaitAwaitingIn(t *testing.T, p *runtimeProc, session string) listed {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var mine []listed
		for _, ex := range c.executions(t, "awaiting_approval") {
			if session == "" || ex.SessionID == session {
				mine = append(mine, ex)
			}
		}
		if len(mine) == 1 && mine[0].Approval != nil {
			return mine[0]
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the runtime finished while its gated call should be held: %v\nstdout: %s", err, p.stdout.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("no execution came to await approval")
	return listed{}
}
