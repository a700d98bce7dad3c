package wasmrt

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// Fixture connectors are built once per test process (and cached across
// processes by source hash): a Go wasm build takes seconds.
var fixtureNames = []string{"noop", "trap", "badenvelope", "httpprobe", "noreconcile", "badversion", "logflood"}

type builtFixture struct {
	path, digest string
	err          error
}

var fixtures = sync.OnceValue(func() map[string]builtFixture {
	out := make(map[string]builtFixture, len(fixtureNames))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range fixtureNames {
		wg.Go(func() {
			p, d, err := wasmbuild.Cached(context.Background(), "devkit/testing/testconnectors/"+name)
			mu.Lock()
			out[name] = builtFixture{p, d, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
})

// fixture returns the module path and digest of a test connector.
func fixture(tb testing.TB, name string) (path, digest string) {
	tb.Helper()
	f, ok := fixtures()[name]
	if !ok {
		tb.Fatalf("no fixture %q", name)
	}
	if f.err != nil {
		tb.Fatalf("build fixture %s: %v", name, f.err)
	}
	return f.path, f.digest
}

// ops returns manifest operations with the manual policy.
func ops(names ...string) []*manifests.Operation {
	out := make([]*manifests.Operation, len(names))
	for i, n := range names {
		out[i] = &manifests.Operation{Name: n, Effect: manifests.EffectExternal, Recovery: manifests.PolicyManual, MaxAttempts: 3}
	}
	return out
}

// testManifest is a pinned manifest for fixture with the given operations.
func testManifest(tb testing.TB, connector, fixtureName string, operations []*manifests.Operation) (*manifests.Manifest, LoadOptions) {
	tb.Helper()
	path, digest := fixture(tb, fixtureName)
	m := &manifests.Manifest{
		Connector:  manifests.Connector{Name: connector, Version: "1.0.0", ABI: abi.Version, Module: fixtureName + ".wasm", SHA256: digest},
		Limits:     manifests.Limits{MemoryMiB: 64, Timeout: 5 * time.Second, MaxOutputKiB: 256, Instances: 2},
		Operations: operations,
	}
	return m, LoadOptions{ModulePath: path}
}

// testCacheDir is a wazero compilation cache shared by the tests of this
// process and later runs (wazero writes entries atomically), so each test
// does not recompile the fixtures.
func testCacheDir(tb testing.TB) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "connhost", "wazero-test")
}

// newTestRuntime returns a runtime logging JSON into the returned buffer.
func newTestRuntime(tb testing.TB, opts Options) (*Runtime, *testenv.LogBuffer) {
	tb.Helper()
	logs := &testenv.LogBuffer{}
	if opts.CacheDir == "" {
		opts.CacheDir = testCacheDir(tb)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	rt, err := New(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			tb.Errorf("runtime close: %v", err)
		}
	})
	return rt, logs
}

func mustLoad(tb testing.TB, rt *Runtime, m *manifests.Manifest, lo LoadOptions) *Connector {
	tb.Helper()
	c, err := rt.Load(context.Background(), m, lo)
	if err != nil {
		tb.Fatalf("load %s: %v", m.Connector.Name, err)
	}
	return c
}

func execute(op string, args string) CallRequest {
	return CallRequest{Export: abi.ExportExecute, Operation: op, ExecutionID: "exec-1", Args: []byte(args)}
}

// wantCallError checks that err is a *CallError of kind for connector/op,
// unwrapping to the kind's sentinel, with a message naming both.
func wantCallError(tb testing.TB, err error, connector, op string, kind CallErrorKind) *CallError {
	tb.Helper()
	var ce *CallError
	if !errors.As(err, &ce) {
		tb.Fatalf("err = %v (%T), want *CallError", err, err)
	}
	if ce.Kind != kind {
		tb.Fatalf("kind = %s, want %s (err: %v)", ce.Kind, kind, err)
	}
	if !errors.Is(err, kind.Sentinel()) {
		tb.Fatalf("errors.Is(err, %v) = false (err: %v)", kind.Sentinel(), err)
	}
	msg := err.Error()
	for _, want := range []string{"connector[" + connector + "]", "op[" + op + "]", kind.String()} {
		if !strings.Contains(msg, want) {
			tb.Fatalf("error %q does not mention %q", msg, want)
		}
	}
	return ce
}

func contains(tb testing.TB, s, sub string) {
	tb.Helper()
	if !strings.Contains(s, sub) {
		tb.Fatalf("%q does not contain %q", s, sub)
	}
}
