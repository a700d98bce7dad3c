package rtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connhost/connhost/clients/go/internal/rtest/rt"
	"github.com/connhost/connhost/clients/go/internal/scripted"
	"github.com/connhost/connhost/clients/go/internal/testkit"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/fault"
)

// shared is what every test of the package uses, set up once by TestMain:
// the payments connector and its manifests, the Stripe emulator that
// counts the charges (it outlives every process the tests start and
// kill), the runtime programs and the connhost binary.
var shared struct {
	env      *testkit.Env
	dir      string
	cache    string
	bin      map[string]string // runtime name → program
	connhost string
}

// The tokens of the API the runtimes serve and of the serve fixture.
const (
	tokenRuntime = "tok-runtime-0123456789" // calls tools, never approves
	tokenRita    = "tok-rita-0123456789"    // rita, an approver
)

func TestMain(m *testing.M) {
	code, err := runMain(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rtest: setup: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func runMain(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env, err := testkit.Start(ctx)
	if err != nil {
		return 0, err
	}
	defer env.Close()
	shared.env = env
	shared.dir = filepath.Join(env.Dir, "bin")
	shared.cache = filepath.Join(env.Dir, "cache")
	shared.bin = map[string]string{"adk": filepath.Join(shared.dir, "adkrt"), "eino": filepath.Join(shared.dir, "einort")}
	shared.connhost = filepath.Join(shared.dir, "connhost")
	build := exec.CommandContext(ctx, "go", "build", "-o", shared.dir+"/", "./adkrt", "./einort")
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("go build the runtimes: %v\n%s", err, out)
	}
	build = exec.CommandContext(ctx, "go", "build", "-o", shared.connhost, "./cmd/connhost")
	build.Dir = env.Root
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("go build ./cmd/connhost: %v\n%s", err, out)
	}
	defer stopServe()
	return m.Run(), nil
}

// runtimes are the frameworks the tests drive.
var runtimes = []string{"adk", "eino"}

// charges is how many charges the emulator has made.
func charges() int { return shared.env.Charges() }

// app is one application's state across its processes: the executor's
// data directory and the framework's saved state.
type app struct {
	name    string
	dir     string
	session string
	gated   bool
}

func newApp(t *testing.T, name string, gated bool) *app {
	// The session (and so the idempotency keys) is the test's own: the
	// emulator outlives the tests.
	session := "s-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return &app{name: name, dir: t.TempDir(), session: session, gated: gated}
}

func (a *app) config(phase string) rt.Config {
	m := shared.env.Ungated
	if a.gated {
		m = shared.env.Gated
	}
	state := filepath.Join(a.dir, "sessions.db")
	if a.name == "eino" {
		state = filepath.Join(a.dir, "checkpoints")
	}
	return rt.Config{Phase: phase, Data: filepath.Join(a.dir, "data"), Manifests: m, Modules: shared.env.Modules,
		Stripe: shared.env.SB.PaymentsURL(), Cache: shared.cache, State: state, Session: a.session,
		CallID: "call-" + a.name + "-1", CountFile: filepath.Join(a.dir, "model-requests")}
}

// withAPI makes the runtime serve connhost's HTTP API over its executor.
func (a *app) withAPI(c rt.Config) rt.Config {
	c.APIFile = filepath.Join(a.dir, "api-url")
	c.RuntimeToken, c.ApproverToken = tokenRuntime, tokenRita
	_ = os.Remove(c.APIFile)
	return c
}

// modelRequests is how many requests the model was asked by every
// process of the application, killed ones included.
func (a *app) modelRequests() int {
	return scripted.CountedRequests(filepath.Join(a.dir, "model-requests"))
}

// proc is one runtime process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan error
}

func (a *app) start(t *testing.T, c rt.Config) *proc {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(shared.bin[a.name], string(b))
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s %s stderr:\n%s", a.name, c.Phase, p.stderr.String())
		}
	})
	return p
}

// run starts the runtime and waits for its report.
func (a *app) run(t *testing.T, c rt.Config) rt.Report {
	t.Helper()
	return a.start(t, c).wait(t)
}

func (p *proc) wait(t *testing.T) rt.Report {
	t.Helper()
	select {
	case err := <-p.done:
		var rep rt.Report
		if jerr := json.Unmarshal([]byte(lastLine(p.stdout.String())), &rep); err != nil || jerr != nil {
			t.Fatalf("runtime: %v (report: %v)\nstdout: %s\nstderr: %s", err, jerr, p.stdout.String(), p.stderr.String())
		}
		return rep
	case <-time.After(5 * time.Minute):
		t.Fatalf("the runtime did not finish\nstderr: %s", p.stderr.String())
	}
	return rt.Report{}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill(t *testing.T) {
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
	c := shared.env.SB.Client()
	if err := c.AddPaymentsFault(ctx, fault.Rule{Kind: fault.Hold, Method: http.MethodPost, Path: "/v1/payment_intents"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.ClearFaults(ctx)
		_ = c.ReleaseHeld(ctx)
	})
}

// awaitHeld waits until the emulator holds the runtime's charge.
func awaitHeld(t *testing.T, p *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for {
		n, err := shared.env.SB.Client().Held(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the runtime finished before its charge reached the provider: %v\nstdout: %s\nstderr: %s", err, p.stdout.String(), p.stderr.String())
		case <-ctx.Done():
			t.Fatal("the charge never reached the provider")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func releaseHeld(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := shared.env.SB.Client()
	if err := c.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ReleaseHeld(ctx); err != nil {
		t.Fatal(err)
	}
}

// api is the connhost HTTP API a runtime serves.
type api struct{ url string }

// awaitAPI waits for the runtime p to serve its API.
func awaitAPI(t *testing.T, c rt.Config, p *proc) api {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(c.APIFile); err == nil {
			return api{url: string(b)}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the runtime ended before it served its API: %v\nstderr: %s", err, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the runtime never served its API")
	return api{}
}

// pendingApproval is an execution awaiting approval, as the API lists it.
type pendingApproval struct {
	ExecutionID string `json:"execution_id"`
	Approval    *struct {
		ID         string `json:"id"`
		ArgsDigest string `json:"args_digest"`
	} `json:"approval"`
}

// awaitAwaiting waits until the API lists one execution awaiting approval
// while the runtime p still runs (it waits for the decision).
func (a api) awaitAwaiting(t *testing.T, p *proc) pendingApproval {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var out struct {
			Executions []pendingApproval `json:"executions"`
		}
		a.do(t, http.MethodGet, "/v1/executions?state=awaiting_approval", tokenRuntime, nil, &out)
		if len(out.Executions) == 1 && out.Executions[0].Approval != nil {
			return out.Executions[0]
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the runtime ended while its payment should wait for a reviewer: %v\nstdout: %s\nstderr: %s", err, p.stdout.String(), p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("no execution came to await approval")
	return pendingApproval{}
}

// decide approves or rejects as rita, through the API.
func (a api) decide(t *testing.T, ap pendingApproval, verb, reason string) {
	t.Helper()
	body := map[string]string{"digest": ap.Approval.ArgsDigest, "reason": reason}
	a.do(t, http.MethodPost, "/v1/approvals/"+ap.Approval.ID+"/"+verb, tokenRita, body, nil)
}

func (a api) do(t *testing.T, method, path, token string, body, out any) {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// connhostConfig writes a connhost.toml for the connhost CLI and serve on
// the emulator: the payments connector's config, the emulator's origin
// allowed, and (serve) the runtime's token.
func connhostConfig(t *testing.T, dir string, serve bool) string {
	t.Helper()
	stripe := shared.env.SB.PaymentsURL()
	u, _ := url.Parse(stripe)
	cfg := fmt.Sprintf("[connectors.payments]\napi_key = %q\nbase_url = %q\nallow_http = [%q]\n",
		sandbox.DefaultAPIKey, stripe, u.Scheme+"://"+u.Host)
	if serve {
		cfg = fmt.Sprintf("[server]\ntoken = %q\n\n", tokenRuntime) + cfg
	}
	path := filepath.Join(dir, "connhost.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// approveOnLedger approves with `connhost approve` on a stopped
// runtime's ledger.
func approveOnLedger(t *testing.T, c rt.Config, id, digest string) {
	t.Helper()
	cfg := connhostConfig(t, t.TempDir(), false)
	out, err := exec.Command(shared.connhost, "approve", id, "--digest", digest, "--by", "rita", "--data", c.Data,
		"--manifests", c.Manifests, "--modules", c.Modules, "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("connhost approve %s: %v\n%s", id, err, out)
	}
}

// serveFixture is one connhost serve (ungated payments, a runtime token)
// for the tests without the adapter.
var serveFixture struct {
	once sync.Once
	url  string
	err  error
	log  *syncBuffer
	cmd  *exec.Cmd
	dir  string
}

// stopServe stops the serve fixture, if a test started it.
func stopServe() {
	if c := serveFixture.cmd; c != nil {
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = c.Process.Kill()
			<-done
		}
	}
	if serveFixture.dir != "" {
		_ = os.RemoveAll(serveFixture.dir)
	}
}

// serveURL starts connhost serve once and returns its base URL.
func serveURL(t *testing.T) string {
	t.Helper()
	serveFixture.once.Do(func() {
		dir, err := os.MkdirTemp("", "connhost-goadapters-serve-")
		if err != nil {
			serveFixture.err = err
			return
		}
		serveFixture.dir = dir
		cfg := connhostConfig(t, dir, true)
		serveFixture.log = &syncBuffer{}
		cmd := exec.Command(shared.connhost, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
			"--manifests", shared.env.Ungated, "--modules", shared.env.Modules)
		cmd.Stderr = serveFixture.log
		if serveFixture.err = cmd.Start(); serveFixture.err != nil {
			return
		}
		serveFixture.cmd = cmd
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			var info struct {
				URL string `json:"url"`
			}
			if b, err := os.ReadFile(filepath.Join(dir, "data", "server.json")); err == nil && json.Unmarshal(b, &info) == nil && info.URL != "" {
				serveFixture.url = info.URL
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		serveFixture.err = fmt.Errorf("connhost serve never wrote server.json:\n%s", serveFixture.log.String())
	})
	if serveFixture.err != nil {
		t.Fatal(serveFixture.err)
	}
	return serveFixture.url
}

// syncBuffer is a buffer safe for a process's writes and the test's reads.
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
