package webhook_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost/host/crashtest"

	"example.com/webhook/provider"
)

// TestCrashMatrix crash-tests the webhook connector against its own test
// provider with connhost's public crash-test package, observed both ways:
// through the receiver's own API as manifests/webhook.probe.toml says
// (the probe config: nothing but the connector is written for it), and
// through the probe contract it serves under /_crashtest. The honest
// module keeps both policies it may declare, and each deliberately broken
// module is caught at the cell that reveals it.
func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := crashtest.BuildConnhost(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join("manifests", "webhook.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// The module implements reconcile too: a reviewer may declare either
	// policy. The re-dispatch after not_applied carries the key the
	// receiver deduplicates by, so nothing needs to settle first.
	reconciled := strings.Replace(string(manifest), `recovery = "idempotent-retry"`, "recovery = \"reconcile\"\nreconcile_settle = \"0s\"", 1)
	if reconciled == string(manifest) {
		t.Fatal("manifests/webhook.toml changed: update the test")
	}
	variants := map[string]string{
		"idempotent-retry": filepath.Join("manifests", "webhook.toml"),
		"reconcile":        writeFile(t, dir, "reconciled.toml", reconciled),
	}
	// The cells that reveal a broken promise: the provider applied the
	// call, and the host was killed before it recorded the outcome (and,
	// for reconcile, again after reconcile answered).
	revealing := []string{"after_plugin_return", "after_reconcile_return", "in_flight"}
	probeConfig, err := crashtest.LoadProbeConfig(filepath.Join("manifests", "webhook.probe.toml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, pkg, policy string
		// probed: observed through the probe config, not /_crashtest.
		probed bool
		points []string
		// wantFailed are the points of the cells that must fail, and
		// wantClass (when set) the class each is counted in.
		wantFailed []string
		wantClass  func(crashtest.Row) bool
	}{
		{name: "honest, idempotent-retry", pkg: "./plugins/webhook", policy: "idempotent-retry", probed: true},
		{name: "honest, idempotent-retry, /_crashtest", pkg: "./plugins/webhook", policy: "idempotent-retry"},
		{name: "honest, reconcile", pkg: "./plugins/webhook", policy: "reconcile", probed: true,
			points: append(slices.Clone(revealing), crashtest.PointEqualArgs)},
		{name: "key ignored", pkg: "./broken/keyignored", policy: "idempotent-retry", probed: true, points: revealing[:1],
			wantFailed: []string{"after_plugin_return"}},
		{name: "key ignored, /_crashtest", pkg: "./broken/keyignored", policy: "idempotent-retry", points: revealing[:1],
			wantFailed: []string{"after_plugin_return"}},
		{name: "reconcile always not applied", pkg: "./broken/notapplied", policy: "reconcile", probed: true, points: revealing[:2],
			wantFailed: []string{"after_plugin_return", "after_reconcile_return"}},
		{name: "reconcile always not applied, /_crashtest", pkg: "./broken/notapplied", policy: "reconcile", points: revealing[:2],
			wantFailed: []string{"after_plugin_return", "after_reconcile_return"}},
		// Reconcile finds a delivery by a field many share and names it:
		// it exists, so only the receipt's owner tells it is another
		// call's. Where reconcile answers after the delivery was made
		// there is one effect, and the receipt names the wrong one.
		{name: "reconcile names another call's delivery", pkg: "./broken/bytopic", policy: "reconcile", probed: true, points: revealing,
			wantFailed: revealing, wantClass: func(r crashtest.Row) bool { return r.WrongReceipt }},
		// A key taken from the arguments survives every crash (each
		// retry carries it), and merges two genuine calls with equal
		// arguments into one delivery.
		{name: "key from the arguments", pkg: "./broken/argkey", policy: "idempotent-retry", probed: true,
			points: append(slices.Clone(revealing), crashtest.PointEqualArgs), wantFailed: []string{crashtest.PointEqualArgs},
			wantClass: func(r crashtest.Row) bool { return r.SucceededWithoutEffect && r.Effects == 1 }},
		// The receiver's probe contract gives every call the same
		// arguments: each cell's call is taken for a retry of the
		// preflight's, and makes nothing.
		{name: "key from the arguments, /_crashtest", pkg: "./broken/argkey", policy: "idempotent-retry",
			points: []string{"after_plugin_return", crashtest.PointEqualArgs}, wantFailed: []string{"after_plugin_return", crashtest.PointEqualArgs},
			wantClass: func(r crashtest.Row) bool { return r.SucceededWithoutEffect }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			module := filepath.Join(t.TempDir(), "webhook.wasm")
			if _, err := crashtest.BuildModule(ctx, tc.pkg, module); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(provider.New())
			defer srv.Close()
			o := crashtest.Options{
				Binary:      bin,
				Manifest:    variants[tc.policy],
				Module:      module,
				ProviderURL: srv.URL,
				Points:      tc.points,
				WorkDir:     t.TempDir(),
			}
			if tc.probed {
				o.ProbeConfig = probeConfig
			} else {
				o.Provider = crashtest.NewProbe(srv.URL + "/_crashtest")
			}
			if tc.points != nil {
				o.Operations, o.Variants = []string{"deliver"}, []bool{false}
			}
			rep, err := crashtest.Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			var table strings.Builder
			_ = rep.WriteTable(&table)
			t.Logf("\n%s", table.String())
			failed := map[string]crashtest.Row{}
			for _, row := range rep.Failed() {
				failed[row.Point] = row
			}
			for _, p := range tc.wantFailed {
				row, ok := failed[p]
				switch {
				case !ok:
					t.Errorf("cell %s not caught", p)
				case tc.wantClass != nil && !tc.wantClass(row):
					t.Errorf("cell %s failed in another class: %+v", p, row)
				}
				delete(failed, p)
			}
			for p, row := range failed {
				t.Errorf("cell %s failed: %s", p, row.Problem)
			}
			if rep.Totals.Kills == 0 {
				t.Error("no process was killed")
			}
			for _, row := range rep.Rows {
				if row.Provider != srv.URL {
					t.Errorf("row %s names provider %q", row.Point, row.Provider)
				}
			}
			if tc.wantFailed == nil && len(tc.points) == 0 {
				// The full matrix: the in-flight row ran, and the read too.
				js, _ := json.Marshal(rep)
				if !strings.Contains(string(js), `"point":"in_flight"`) || !strings.Contains(string(js), `"point":"equal_args"`) ||
					!strings.Contains(string(js), `"operation":"get_delivery"`) {
					t.Errorf("the full matrix lacks the in-flight row, the row of equal arguments or the read:\n%s", table.String())
				}
			}
		})
	}
}

// TestProviderKeyProof: the row provider_key proves what a manifest's
// [provider] says the provider deduplicates by, against the receiver: a
// request of the connector repeated as it was makes no second delivery,
// and repeated with the declared key changed makes one. The receiver
// deduplicates by Idempotency-Key and by a body's event_id, never by a
// header X-Event-Id: a claim naming that header — sent by the connector
// or not — is disproved, the others proven.
func TestProviderKeyProof(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := crashtest.BuildConnhost(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join("manifests", "webhook.toml"))
	if err != nil {
		t.Fatal(err)
	}
	claim := func(line string) string {
		t.Helper()
		out := strings.Replace(string(manifest), `idempotency_header = "Idempotency-Key"`, line, 1)
		if out == string(manifest) {
			t.Fatal("manifests/webhook.toml changed: update the test")
		}
		return writeFile(t, t.TempDir(), "webhook.toml", out)
	}
	probeConfig, err := crashtest.LoadProbeConfig(filepath.Join("manifests", "webhook.probe.toml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, pkg, manifest string
		// want is "" for a proof, else part of the problem.
		want string
	}{
		{"header Idempotency-Key", "./plugins/webhook", filepath.Join("manifests", "webhook.toml"), ""},
		{"body field event_id", "./broken/bodykey", claim(`idempotency_field = "event_id"`), ""},
		{"a header the receiver ignores", "./broken/bodykey", claim(`idempotency_header = "X-Event-Id"`),
			"the request repeated with another header X-Event-Id and the same everything else was answered 200 and made 0 effect(s), want 1: the provider deduplicates by something else"},
		{"a header the connector does not send", "./plugins/webhook", claim(`idempotency_header = "X-Event-Id"`),
			"carries no header X-Event-Id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			module := filepath.Join(t.TempDir(), "webhook.wasm")
			if _, err := crashtest.BuildModule(ctx, tc.pkg, module); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(provider.New())
			defer srv.Close()
			rep, err := crashtest.Run(ctx, crashtest.Options{
				Binary: bin, Manifest: tc.manifest, Module: module, ProviderURL: srv.URL, ProbeConfig: probeConfig,
				Operations: []string{"deliver"}, Points: []string{crashtest.PointProviderKey}, WorkDir: t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			var table strings.Builder
			_ = rep.WriteTable(&table)
			t.Logf("\n%s", table.String())
			if len(rep.Rows) != 1 {
				t.Fatalf("%d rows, want the ungated provider_key row alone", len(rep.Rows))
			}
			row := rep.Rows[0]
			switch {
			case tc.want == "" && (!row.Pass || row.ProvenKey == ""):
				t.Errorf("claim not proven: %+v", row)
			case tc.want != "" && (row.Pass || row.ProvenKey != "" || !strings.Contains(row.Problem, tc.want)):
				t.Errorf("claim not disproved as %q: %+v", tc.want, row)
			}
		})
	}
}

// TestRunsDoNotShareKeys: two runs against one long-lived provider, the
// way connhost crashtest meets a provider a developer keeps running. The
// second run's calls are new calls with keys of their own, not retries the
// provider answers from the first run's deliveries.
func TestRunsDoNotShareKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := crashtest.BuildConnhost(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(dir, "webhook.wasm")
	if _, err := crashtest.BuildModule(ctx, "./plugins/webhook", module); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(provider.New())
	defer srv.Close()
	for run := 1; run <= 2; run++ {
		rep, err := crashtest.Run(ctx, crashtest.Options{
			Binary: bin, Manifest: filepath.Join("manifests", "webhook.toml"), Module: module,
			ProviderURL: srv.URL, Provider: crashtest.NewProbe(srv.URL + "/_crashtest"),
			Operations: []string{"deliver"}, Points: []string{"before_intent", "after_plugin_return"}, Variants: []bool{false},
			WorkDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rep.Rows {
			if !row.Pass || row.Effects != 1 {
				t.Errorf("run %d, %s: %d effects, %s", run, row.Point, row.Effects, row.Problem)
			}
		}
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
