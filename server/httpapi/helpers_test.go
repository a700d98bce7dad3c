package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// cacheDir is a wasm compilation cache shared by the tests of this
// package, so each executor compiles the noop module once per run, not
// once per test.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "connhost-httpapi-cache-")
	if err != nil {
		panic(err)
	}
	cacheDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	if err := testenv.StopSharedPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

// testClock is a settable clock for approval expiry.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type testEnv struct {
	ex    *host.Executor
	reg   *prometheus.Registry
	clock *testClock
	dir   string
}

// newTestExecutor opens a real executor on a temporary data directory with
// the manifests in testdata/manifests (connectors "noop" and "gated", both
// backed by the devkit/testing/testconnectors/noop module, and "probe", backed by
// devkit/testing/testconnectors/httpprobe; extra manifests may use
// trap.wasm, devkit/testing/testconnectors/trap, too) and a Prometheus
// registry wired through NewObserver. extra manifests are loaded too. The
// executor is closed when the test ends.
func newTestExecutor(t *testing.T, extra ...*manifests.Manifest) *testEnv {
	t.Helper()
	return newTestExecutorWith(t, nil, extra...)
}

// newTestExecutorWith is newTestExecutor with the executor's options
// adjusted by adjust (if not nil) before it opens.
func newTestExecutorWith(t *testing.T, adjust func(*host.Options), extra ...*manifests.Manifest) *testEnv {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	modDir := filepath.Join(dir, "modules")
	if err := os.MkdirAll(modDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"noop", "httpprobe", "trap"} {
		wasm, _, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/"+pkg)
		if err != nil {
			t.Fatalf("build %s connector: %v", pkg, err)
		}
		b, err := os.ReadFile(wasm)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(modDir, pkg+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := manifests.LoadDir("testdata/manifests")
	if err != nil {
		t.Fatal(err)
	}
	ms = append(ms, extra...)
	env := &testEnv{reg: prometheus.NewRegistry(), clock: &testClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}, dir: dir}
	opts := host.Options{
		DataDir:       filepath.Join(dir, "data"),
		CacheDir:      cacheDir,
		Manifests:     ms,
		ModuleDir:     modDir,
		AllowUnpinned: true,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:           env.clock.Now,
		Observer:      NewObserver(env.reg),
	}
	if adjust != nil {
		adjust(&opts)
	}
	ex, err := host.Open(ctx, opts)
	if err != nil {
		t.Fatalf("open executor: %v", err)
	}
	t.Cleanup(func() { _ = ex.Close(context.Background()) })
	env.ex = ex
	return env
}

// serve starts a real listener over the API.
func (env *testEnv) serve(t *testing.T, opts Options) *httptest.Server {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = env.reg
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h, err := New(env.ex, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// devOptions are the options of `connhost dev`: no credentials, and the
// anonymous principal holds every role.
func devOptions() Options {
	anon := DevLoopback
	return Options{Anonymous: &anon}
}

type client struct {
	t     *testing.T
	base  string
	token string
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r response) result(t *testing.T) host.Result {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.status, r.body)
	}
	var res host.Result
	r.decode(t, &res)
	return res
}

func (r response) problem(t *testing.T, code Code) Problem {
	t.Helper()
	var p Problem
	r.decode(t, &p)
	want := codes[code]
	if r.status != want.status || p.Code != code {
		t.Fatalf("got %d %q, want %d %q: %s", r.status, p.Code, want.status, code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	if p.Type != ProblemTypePrefix+string(code) || p.Title == "" || p.Status != want.status {
		t.Errorf("problem shape: %+v", p)
	}
	return p
}

func (c client) do(method, path, contentType string, body []byte) response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (c client) get(path string) response { return c.do("GET", path, "", nil) }

func (c client) post(path string, v any) response {
	c.t.Helper()
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	return c.do("POST", path, "application/json", b)
}

func execReq(session, callID, tool, args string) map[string]any {
	return map[string]any{"session_id": session, "tool_call_id": callID, "tool": tool, "arguments": json.RawMessage(args)}
}
