package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/console"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
)

// env is what every test of the package shares, set up once by TestMain:
// the connector modules (the shipped payments connector, the noop test
// connector), manifests pinned to them, and the Stripe emulator.
type env struct {
	root      string
	dir       string
	modules   string // payments.wasm, noop.wasm
	manifests string // payments.toml (shipped), noop, plain, gated: pinned copies
	sb        *sandbox.Sandbox
	stripe    string // the emulator's base URL
	effect    *effectProvider

	binOnce sync.Once
	bin     string
	binErr  error
}

var shared env

func TestMain(m *testing.M) {
	code, err := runMain(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcpserver: setup: %v\n", err)
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
	dir, err := os.MkdirTemp("", "connhost-mcpserver-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	shared.root, shared.dir = root, dir
	shared.modules = filepath.Join(dir, "modules")
	shared.manifests = filepath.Join(dir, "manifests")
	for _, d := range []string{shared.modules, shared.manifests} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	for _, mod := range []struct{ pkg, name string }{{"plugins/payments", "payments"}, {"devkit/testing/testconnectors/noop", "noop"}} {
		wasm, digest, err := wasmbuild.Cached(ctx, mod.pkg)
		if err != nil {
			return 0, err
		}
		if err := copyFile(wasm, filepath.Join(shared.modules, mod.name+".wasm")); err != nil {
			return 0, err
		}
		srcs := []string{filepath.Join(root, "manifests", "payments.toml")}
		if mod.name == "noop" {
			srcs = []string{"testdata/manifests/noop.toml", "testdata/manifests/plain.toml", "testdata/manifests/gated.toml",
				"testdata/manifests/mailish.toml"}
		}
		for _, src := range srcs {
			data, err := os.ReadFile(src)
			if err != nil {
				return 0, err
			}
			if data, err = manifests.SetSHA256(data, digest); err != nil {
				return 0, err
			}
			if err := os.WriteFile(filepath.Join(shared.manifests, filepath.Base(src)), data, 0o644); err != nil {
				return 0, err
			}
		}
	}
	// The effect connector (devkit/testing/testconnectors/effect) against a
	// provider this process controls, for retries.
	wasm, digest, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/effect")
	if err != nil {
		return 0, err
	}
	if err := copyFile(wasm, filepath.Join(shared.modules, "effect.wasm")); err != nil {
		return 0, err
	}
	shared.effect = newEffectProvider()
	defer shared.effect.srv.Close()
	if err := os.WriteFile(filepath.Join(shared.manifests, "effect.toml"),
		fmt.Appendf(nil, effectManifest, digest, shared.effect.srv.URL), 0o644); err != nil {
		return 0, err
	}
	// The emulator outlives every connhost process the tests start and
	// kill: it is the provider that counts what really happened.
	sb, err := sandbox.Start(context.Background(), sandbox.Options{})
	if err != nil {
		return 0, err
	}
	defer sb.Close()
	shared.sb, shared.stripe = sb, sb.PaymentsURL()
	return m.Run(), nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// binary builds cmd/connhost once per test binary.
func binary(t testing.TB) string {
	t.Helper()
	shared.binOnce.Do(func() {
		shared.bin = filepath.Join(shared.dir, "connhost")
		cmd := exec.Command("go", "build", "-o", shared.bin, "./cmd/connhost")
		cmd.Dir = shared.root
		if out, err := cmd.CombinedOutput(); err != nil {
			shared.binErr = fmt.Errorf("go build ./cmd/connhost: %v\n%s", err, out)
		}
	})
	if shared.binErr != nil {
		t.Fatal(shared.binErr)
	}
	return shared.bin
}

// charges is how many charges the Stripe emulator has made.
func charges() int { return shared.sb.Payments().Stats().ChargesSucceeded }

// The tokens of the HTTP fixture's principals.
const (
	tokenRuntime  = "tok-runtime"  // runtime: calls tools, never approves
	tokenRita     = "tok-rita"     // runtime and approver: approves in the client's dialog
	tokenApprover = "tok-approver" // approver only: may not use /mcp
)

// transport is how a test reaches the MCP server.
type transport string

const (
	overStdio transport = "stdio" // a `connhost mcp` process per client
	overHTTP  transport = "http"  // /mcp of an in-process HTTP API
)

var transports = []transport{overStdio, overHTTP}

// fixture is one connhost behind one transport, on its own data
// directory.
type fixture struct {
	t    testing.TB
	kind transport
	data string
	// http only:
	ex  *host.Executor
	srv *httptest.Server
	// stdio only: the process of the client connected last.
	cmd *exec.Cmd
	// log is the server's log (the last process's stderr over stdio).
	log *logWriter
	// mcpConfig is added to the [mcp] table of connhost mcp's config
	// (stdio).
	mcpConfig string
	// opts are the HTTP fixture's options, for restart.
	opts fixtureOpts
}

// fixtureOpts tunes newFixture.
type fixtureOpts struct {
	// extra manifests (parsed, already pinned or unpinned) for the HTTP
	// fixture, and their config.
	extra  []*manifests.Manifest
	config map[string]map[string]string
	// adjust changes the executor's options (HTTP fixture).
	adjust func(*host.Options)
	// mcp changes the MCP server's options (HTTP fixture).
	mcp func(*mcpserver.Options)
	// principals are added to the HTTP fixture's (clientOpts.token
	// connects as one of them).
	principals []httpapi.Principal
	// console serves the console at /ui/ of the HTTP fixture, and sets
	// the MCP server's console URL to the fixture's URL.
	console bool
}

func newFixture(t testing.TB, kind transport, fo ...fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, kind: kind, data: t.TempDir(), log: newLogWriter(t)}
	if kind == overStdio {
		binary(t)
		return f
	}
	if len(fo) > 0 {
		f.opts = fo[0]
	}
	f.open()
	return f
}

// open opens the HTTP fixture's executor, MCP server and HTTP API on its
// data directory.
func (f *fixture) open() {
	t, o := f.t, f.opts
	ms, err := manifests.LoadDir(shared.manifests)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Connector.Name == "payments" {
			m.Capabilities.HTTP = append(slices.Clone(m.Capabilities.HTTP), origin(t, shared.stripe))
		}
	}
	ms = append(ms, o.extra...)
	cfg := map[string]map[string]string{
		"payments": {"api_key": sandbox.DefaultAPIKey, "base_url": shared.stripe},
		"effect":   {"base_url": shared.effect.srv.URL},
	}
	for k, v := range o.config {
		cfg[k] = v
	}
	hopts := host.Options{
		DataDir: f.data, CacheDir: filepath.Join(os.TempDir(), "connhost-mcpserver-cache"),
		Manifests: ms, ModuleDir: shared.modules, AllowUnpinned: true,
		Config: func(connector, key string) (string, bool) { v, ok := cfg[connector][key]; return v, ok },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if o.adjust != nil {
		o.adjust(&hopts)
	}
	ex, err := host.Open(context.Background(), hopts)
	if err != nil {
		t.Fatal(err)
	}
	f.ex = ex
	t.Cleanup(func() { _ = ex.Close(context.Background()) })
	mopts := mcpserver.Options{Logger: slog.New(slog.NewTextHandler(f.log, nil))}
	if o.mcp != nil {
		o.mcp(&mopts)
	}
	ms2, err := mcpserver.New(ex, mopts)
	if err != nil {
		t.Fatal(err)
	}
	principals := append([]httpapi.Principal{
		{Name: "runtime", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: tokenRuntime},
		{Name: "rita", Roles: []httpapi.Role{httpapi.RoleRuntime, httpapi.RoleApprover}, Token: tokenRita},
		{Name: "olga", Roles: []httpapi.Role{httpapi.RoleApprover}, Token: tokenApprover},
	}, o.principals...)
	var ui http.Handler
	if o.console {
		if ui, err = console.New(console.Options{Executor: ex, Principals: principals, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := httpapi.New(ex, httpapi.Options{
		Principals: principals,
		MCP:        ms2.HTTPHandler(),
		Console:    ui,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	if o.console {
		ms2.SetConsoleURL(f.srv.URL) // as serve does with its listen URL
	}
}

// restart closes the HTTP fixture's server and executor, as a process
// that exits does, and opens new ones on the same data directory: a new
// process (a new URL, a new random key of its own), the same ledger and
// the same principals.
func (f *fixture) restart() {
	f.t.Helper()
	f.srv.Close()
	if err := f.ex.Close(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

func origin(t testing.TB, base string) string {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return u.Scheme + "://" + u.Host
}

// clientOpts tunes fixture.client.
type clientOpts struct {
	// approver connects as a user who may approve: rita's token over
	// HTTP, [mcp] approver = "rita" over stdio.
	approver bool
	// version is the protocol version the client asks for; "" is the
	// SDK's latest (over HTTP the server negotiates it down).
	version string
	// env adds environment variables to the connhost process (stdio).
	env []string
	// client are the SDK client's options.
	client *mcp.ClientOptions
	// token connects over HTTP with this token instead (a principal of
	// fixtureOpts.principals).
	token string
}

// client connects a new MCP client. Over stdio it starts `connhost mcp`
// on the fixture's data directory (one process at a time: close the
// previous client first).
func (f *fixture) client(co clientOpts) *mcp.ClientSession {
	t := f.t
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "connhost-test", Version: "0"}, co.client)
	var tr mcp.Transport
	switch f.kind {
	case overStdio:
		cmd := exec.Command(binary(t), f.stdioArgs(co.approver)...)
		cmd.Env = append(os.Environ(), co.env...)
		f.log = newLogWriter(t)
		cmd.Stderr = f.log
		f.cmd = cmd
		tr = &mcp.CommandTransport{Command: cmd}
	case overHTTP:
		tok := tokenRuntime
		switch {
		case co.token != "":
			tok = co.token
		case co.approver:
			tok = tokenRita
		}
		tr = &mcp.StreamableClientTransport{Endpoint: f.srv.URL + "/mcp", HTTPClient: bearerClient(tok)}
	}
	var so *mcp.ClientSessionOptions
	if co.version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: co.version}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, tr, so)
	if err != nil {
		t.Fatalf("connect over %s: %v", f.kind, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// stdioArgs writes the config of a `connhost mcp` process on the
// fixture's data directory and returns its arguments.
func (f *fixture) stdioArgs(approver bool) []string {
	t := f.t
	t.Helper()
	cfg := stdioConfig(t)
	if approver || f.mcpConfig != "" {
		cfg += "\n[mcp]\n" + f.mcpConfig
	}
	if approver {
		cfg += "approver = \"rita\"\n"
	}
	path := filepath.Join(f.data, "connhost.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"mcp", "--data", f.data, "--manifests", shared.manifests, "--modules", shared.modules, "--config", path}
}

// stdioConfig is the connectors' part of connhost mcp's config: the
// payments connector against the Stripe emulator, the effect connector
// against its provider.
func stdioConfig(t testing.TB) string {
	return fmt.Sprintf("[connectors.payments]\napi_key = %q\nbase_url = %q\nallow_http = [%q]\n\n[connectors.effect]\nbase_url = %q\n",
		sandbox.DefaultAPIKey, shared.stripe, origin(t, shared.stripe), shared.effect.srv.URL)
}

// logWriter keeps a connhost process's stderr, shown when the test
// fails.
type logWriter struct {
	mu      sync.Mutex
	buf     strings.Builder
	waiters []*logWaiter
}

func newLogWriter(t testing.TB) *logWriter {
	w := &logWriter{}
	t.Cleanup(func() {
		if t.Failed() {
			w.mu.Lock()
			t.Log("connhost stderr:\n" + w.buf.String())
			w.mu.Unlock()
		}
	})
	return w
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	for _, wt := range w.waiters {
		if strings.Contains(w.buf.String(), wt.substr) {
			wt.once.Do(func() { close(wt.ch) })
		}
	}
	return n, err
}

type logWaiter struct {
	substr string
	ch     chan struct{}
	once   sync.Once
}

// waitFor waits until the log holds substr: the server logs a decision
// once it is recorded, so a test waits for that line instead of
// sleeping.
func (w *logWriter) waitFor(t testing.TB, substr string) {
	t.Helper()
	wt := &logWaiter{substr: substr, ch: make(chan struct{})}
	w.mu.Lock()
	if strings.Contains(w.buf.String(), substr) {
		w.mu.Unlock()
		return
	}
	w.waiters = append(w.waiters, wt)
	w.mu.Unlock()
	select {
	case <-wt.ch:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the server never logged %q", substr)
	}
}

// bearerClient sends Authorization: Bearer tok with every request.
func bearerClient(tok string) *http.Client {
	return &http.Client{Transport: bearer{tok: tok, next: http.DefaultTransport}}
}

type bearer struct {
	tok  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.next.RoundTrip(r)
}

const effectManifest = `
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
recovery = "idempotent-retry"
max_attempts = 3
input_schema = '{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}'
`

// effectProvider is the service behind the effect connector: it applies
// one effect per key and answers 503 (refused before acting) to as many
// requests as the test asked.
type effectProvider struct {
	mu      sync.Mutex
	fail    int
	effects map[string]int
	srv     *httptest.Server
}

func newEffectProvider() *effectProvider {
	p := &effectProvider{effects: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.URL.Path != "/apply" {
			http.NotFound(w, r)
			return
		}
		if p.fail > 0 {
			p.fail--
			http.Error(w, "injected", http.StatusServiceUnavailable)
			return
		}
		key := r.Header.Get("X-Key")
		p.effects[key]++
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Receipt", "fx-"+key[:min(8, len(key))])
		_, _ = w.Write(body)
	}))
	return p
}

// failNext makes the next n requests fail with 503.
func (p *effectProvider) failNext(n int) {
	p.mu.Lock()
	p.fail = n
	p.mu.Unlock()
}

func (p *effectProvider) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.effects {
		n += c
	}
	return n
}

// String returns what the server logged so far.
func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
