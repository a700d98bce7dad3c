package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger/pgledger"
	"github.com/connhost/connhost/manifests"
)

// TestFleetHealthAndMetrics: on a shared ledger /healthz is healthy while
// the node holds a live lease and fails (503 unavailable) once it cannot
// renew it; /metrics shows the lease, its renewals and its loss, and an
// execution through a node that lost its lease is refused as unavailable.
func TestFleetHealthAndMetrics(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	led, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	modDir := t.TempDir()
	for _, pkg := range []string{"noop", "httpprobe"} {
		wasm, _, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/"+pkg)
		if err != nil {
			t.Fatal(err)
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
	env := &testEnv{reg: prometheus.NewRegistry()}
	env.ex, err = host.Open(ctx, host.Options{
		Ledger: led, Node: "node-1", LeaseTTL: time.Second, ConsumedDir: t.TempDir(),
		CacheDir: cacheDir, Manifests: ms, ModuleDir: modDir, AllowUnpinned: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Observer: NewObserver(env.reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.ex.Close(ctx) })
	c := client{t: t, base: env.serve(t, Options{}).URL}
	if r := c.get("/healthz"); r.status != http.StatusOK {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{}`)).result(t)
	metrics := func() string { return string(c.get("/metrics").body) }
	for _, want := range []string{
		MetricLeaseLive + `{node="node-1"} 1`,
		MetricLeaseEpoch + `{node="node-1"} 1`,
		MetricLeaseRegistrations + ` 1`,
		MetricClaimed + ` 0`,
		MetricLeasesLost + ` 0`,
	} {
		if body := metrics(); !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// The database goes away: renewals fail, and once the lease has run
	// out the node stops taking work.
	if err := led.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	var r response
	for r = c.get("/healthz"); r.status == http.StatusOK && time.Now().Before(deadline); r = c.get("/healthz") {
		time.Sleep(50 * time.Millisecond) // polling for the lease to run out (1s)
	}
	p := r.problem(t, CodeUnavailable)
	if !strings.Contains(p.Detail, "lease") {
		t.Errorf("healthz detail: %q", p.Detail)
	}
	c.post("/v1/executions", execReq("s1", "c2", "noop.echo", `{}`)).problem(t, CodeUnavailable)
	// Health reads the lease's expiry; the renewer counts the lease lost
	// when its next renewal finds it gone, which may be a moment later.
	body := metrics()
	for !strings.Contains(body, MetricLeasesLost+` 1`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		body = metrics()
	}
	for _, want := range []string{
		MetricLeaseLive + `{node="node-1"} 0`,
		MetricLeasesLost + ` 1`,
		MetricLeaseRenewals + `{result="failed"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}
