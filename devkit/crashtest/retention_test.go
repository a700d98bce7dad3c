package crashtest_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/crashtest"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// TestKeyRetentionOverstated: a manifest that says the provider keeps
// keys for 24h, against a Stripe emulator that keeps them 12h. Killed
// after the charge, the call is re-driven 23h59m later (both clocks
// moved): within what the manifest declares, so the host re-sends the
// key, which the provider forgot — a second charge, and key_kept fails.
// Past the declared retention the key is never re-sent (key_expired
// passes: reconcile finds the charge).
func TestKeyRetentionOverstated(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildConnhost(t, root, dir)
	wasm, digest, err := wasmbuild.Cached(ctx, filepath.Join("plugins", "payments"))
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(dir, "modules")
	copyFile(t, wasm, filepath.Join(modules, "payments.wasm"))
	manifest := pinnedCopy(t, filepath.Join(root, "manifests", "payments.toml"), dir, digest)
	sb, err := sandbox.Start(ctx, sandbox.Options{Listen: "127.0.0.1:0", IdempotencyRetention: 12 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	cfg := filepath.Join(dir, "connhost.toml")
	if err := crashtest.WriteConfig(cfg, map[string]map[string]string{"payments": {"base_url": sb.PaymentsURL(), "api_key": sandbox.DefaultAPIKey}}); err != nil {
		t.Fatal(err)
	}
	prov := crashtest.NewProvider(sb.PaymentsURL(), "")
	rep, err := crashtest.Run(ctx, crashtest.Options{
		Binary: bin, Manifest: manifest, Modules: modules, Config: cfg,
		Args: prov.Args, Effects: prov.Effects, CheckReceipt: prov.CheckReceipt, Receipts: prov, Clock: prov,
		Operations: []string{"create_payment"}, Points: []string{crashtest.PointKeyKept, crashtest.PointKeyExpired},
		Variants: []bool{false}, WorkDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	_ = rep.WriteTable(&table)
	t.Log("\n" + table.String())
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	kept, expired := rep.Rows[0], rep.Rows[1]
	if kept.Point != crashtest.PointKeyKept || kept.Pass || !kept.Duplicate || kept.Effects != 2 ||
		!strings.Contains(kept.Problem, "the provider forgot the key before the retention the manifest declares (24h0m0s)") {
		t.Errorf("key_kept against a provider keeping keys half as long: %+v", kept)
	}
	if expired.Point != crashtest.PointKeyExpired || !expired.Pass || expired.Decision != "reconciled_applied" || expired.Effects != 1 {
		t.Errorf("key_expired: %+v", expired)
	}
}
