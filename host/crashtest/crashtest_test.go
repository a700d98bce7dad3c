package crashtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/host/crashtest"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// gocmd runs the go command in dir, outside any workspace, with the module
// proxy the environment names: tidying the fixture reads the go.mod files
// of its whole module graph, test dependencies of dependencies included
// (e.g. what gogo/protobuf requires), which neither building nor testing
// this module downloads. The go.sum files decide what those downloads may
// contain; a warm module cache fetches nothing.
func gocmd(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// TestWebhookFixtureOwnModule runs the webhook fixture's own tests in a
// copy of its module outside this repository, the way its author would:
// a connector module that imports connhost only through public packages,
// whose test crash-tests it with this package against its own provider
// and catches both deliberately broken variants.
func TestWebhookFixtureOwnModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and three modules and spawns connhost processes")
	}
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "webhook")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "webhook"))); err != nil {
		t.Fatal(err)
	}
	// The fixture's go.sum plus connhost's: every module tidy reads has
	// its checksum there even when connhost's dependencies moved since.
	sum := append(mustRead(t, filepath.Join(dir, "go.sum")), mustRead(t, filepath.Join(root, "go.sum"))...)
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	gocmd(t, dir, nil, "mod", "edit", "-replace", "github.com/connhost/connhost="+root)
	gocmd(t, dir, []string{"GOFLAGS=-mod=mod"}, "mod", "tidy")
	gocmd(t, dir, nil, "vet", "./...")
	gocmd(t, dir, []string{"GOOS=wasip1", "GOARCH=wasm"}, "vet", "./plugins/...", "./broken/...", "./connector/")
	gocmd(t, dir, nil, "test", "-count=1", "./...")
}

// TestWebhookFixtureIsTidy: the fixture's committed go.mod and go.sum are
// what go mod tidy makes of them (run it in testdata/webhook when
// connhost's dependencies change).
func TestWebhookFixtureIsTidy(t *testing.T) {
	gocmd(t, filepath.Join("testdata", "webhook"), nil, "mod", "tidy", "-diff")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// probeServer serves a minimal probe contract: effects, and nothing
// optional.
func probeServer(t *testing.T, effects string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_crashtest/effects" {
			_, _ = w.Write([]byte(effects))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProbe(t *testing.T) {
	ctx := context.Background()
	srv := probeServer(t, `{"effects": 7}`)
	p := crashtest.NewProbe(srv.URL + "/_crashtest/")
	if n, err := p.Effects(ctx); err != nil || n != 7 {
		t.Fatalf("effects %d, %v", n, err)
	}
	if _, err := p.Exists(ctx, "r_1"); !errors.Is(err, crashtest.ErrUnsupported) {
		t.Errorf("exists without the route: %v", err)
	}
	if _, err := p.Args(ctx, "deliver"); !errors.Is(err, crashtest.ErrUnsupported) {
		t.Errorf("args without the route: %v", err)
	}
	if err := p.Arm(ctx, "deliver"); !errors.Is(err, crashtest.ErrCannotHold) {
		t.Errorf("hold without the route: %v", err)
	}
	bad := crashtest.NewProbe(probeServer(t, `{"count": 7}`).URL + "/_crashtest")
	if _, err := bad.Effects(ctx); err == nil || !strings.Contains(err.Error(), `no "effects"`) {
		t.Errorf("an answer without effects: %v", err)
	}
}

// TestRunRefusesWhatItCannotUse: options the matrix would ignore or
// misread are refused, all at once, before anything runs.
func TestRunRefusesWhatItCannotUse(t *testing.T) {
	srv := probeServer(t, `{"effects": 0}`)
	_, err := crashtest.Run(context.Background(), crashtest.Options{
		Binary:      "/nonexistent/connhost",
		Manifest:    filepath.Join("testdata", "webhook", "manifests", "webhook.toml"),
		Module:      "/nonexistent/webhook.wasm",
		ProviderURL: srv.URL,
		URLKey:      "endpoint",
		Config:      map[string]string{"api_key": "k"},
		Args:        map[string]json.RawMessage{"charge": json.RawMessage(`{}`)},
		Provider:    crashtest.NewProbe(srv.URL + "/_crashtest"),
	})
	for _, want := range []string{
		`declares no config key "endpoint" to take the provider URL`,
		`does not declare config key "api_key"`,
		`Args for "charge": connector webhook has no such operation`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	_, err = crashtest.Run(context.Background(), crashtest.Options{})
	for _, want := range []string{"Options.Binary is required", "Options.Provider or Options.ProbeConfig is required", "Options.ProviderURL is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestPointsAgreeWithTheDocs: Points is what the matrix runs, and the
// lists of crash points people read — README.md's "Crash it yourself",
// docs/design.md's table — name the same points in the same order.
func TestPointsAgreeWithTheDocs(t *testing.T) {
	want := crashtest.Points()
	if len(want) != 8 || want[len(want)-1] != "after_answer" {
		t.Fatalf("Points() = %v", want)
	}
	readme := string(mustRead(t, filepath.Join("..", "..", "README.md")))
	_, list, ok := strings.Cut(readme, "`CONNHOST_CRASH_AT` says (every point:")
	list, _, _ = strings.Cut(list, ")")
	var got []string
	for _, f := range strings.Split(list, ",") {
		got = append(got, strings.Trim(strings.TrimSpace(f), "`"))
	}
	if !ok || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("README lists %v, Points() %v", got, want)
	}
	design := string(mustRead(t, filepath.Join("..", "..", "docs", "design.md")))
	_, table, _ := strings.Cut(design, "| point | durable state after the kill | expected |")
	got = nil
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| ") {
			if len(got) > 0 {
				break
			}
			continue
		}
		if p := strings.TrimSpace(strings.Split(line, "|")[1]); p != crashtest.PointInFlight && !strings.HasPrefix(p, "---") {
			got = append(got, p)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("docs/design.md lists %v, Points() %v", got, want)
	}
}
