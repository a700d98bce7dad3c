package server

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// testDirs is a test server's directories: the noop test connector's
// manifests (testdata/manifests: noop, and gated, whose echo needs
// approval), pinned to its module in modules, and an empty data
// directory.
type testDirs struct{ data, manifests, modules string }

func newTestDirs(t *testing.T) testDirs {
	t.Helper()
	wasm, digest, err := wasmbuild.Cached(context.Background(), "devkit/testing/testconnectors/noop")
	if err != nil {
		t.Fatalf("build the noop connector: %v", err)
	}
	dir := t.TempDir()
	d := testDirs{data: filepath.Join(dir, "data"), manifests: filepath.Join(dir, "manifests"), modules: filepath.Join(dir, "modules")}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	write(t, d.modules, "noop.wasm", b)
	for _, name := range []string{"noop.toml", "gated.toml"} {
		src, err := os.ReadFile(filepath.Join("testdata", "manifests", name))
		if err != nil {
			t.Fatal(err)
		}
		pinned, err := manifests.SetSHA256(src, digest)
		if err != nil {
			t.Fatal(err)
		}
		write(t, d.manifests, name, pinned)
	}
	return d
}

func write(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testConfig parses the connhost.toml text (written into the data
// directory's parent) with env's variables, on d's directories.
func testConfig(t *testing.T, d testDirs, text string, env map[string]string) *Config {
	t.Helper()
	text = "[server]\ndata = " + quote(d.data) + "\nmanifests = " + quote(d.manifests) + "\nmodules = " + quote(d.modules) + "\n" + text
	path := write(t, filepath.Dir(d.data), "connhost.toml", []byte(text))
	cfg, err := LoadConfig(path, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func quote(s string) string { return "'" + s + "'" }

// syncBuffer is a log a server writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve starts a server of cfg in this process, serving on a loopback
// port until the test ends, and returns its base URL and its log.
func serve(t *testing.T, cfg *Config, opts Options) (string, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	opts.Config, opts.Logger = cfg, slog.New(slog.NewTextHandler(log, nil))
	ready := make(chan string, 1)
	opts.Ready = func(url string) { ready <- url }
	srv, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	select {
	case url := <-ready:
		return url, log
	case err := <-done:
		t.Fatalf("Serve: %v\n%s", err, log)
	}
	return "", nil
}
