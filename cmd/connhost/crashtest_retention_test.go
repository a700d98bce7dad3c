package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/crashtest"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// TestCrashtestKeyRetention proves the key retention on the Stripe
// emulator's clock, with real kills, as `connhost crashtest --provider
// payments` runs it: create_payment is killed after the emulator charged,
// then the emulator's clock and the host's move ahead. Short of the 24h
// payments.toml declares, the key is re-sent and replayed; past it the
// key is never re-sent, and the module's reconcile finds the charge (a
// provider that forgets keys sooner than the manifest says is caught by
// devkit/crashtest's TestKeyRetentionOverstated).
func TestCrashtestKeyRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	wasm, digest, err := wasmbuild.Cached(t.Context(), "plugins/payments")
	if err != nil {
		t.Fatal(err)
	}
	modules := filepath.Join(dir, "modules")
	if err := os.MkdirAll(modules, 0o755); err != nil {
		t.Fatal(err)
	}
	copyTo(t, wasm, filepath.Join(modules, "payments.wasm"))
	text, err := os.ReadFile(filepath.Join(root, "manifests", "payments.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if text, err = manifests.SetSHA256(text, digest); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "payments.toml")
	if err := os.WriteFile(manifest, text, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := proc.Run(t.Context(), proc.Cmd{Path: bin, Args: []string{"--modules", modules, "--json", "crashtest",
		"--manifest", manifest, "--operation", "create_payment", "--variant", "ungated",
		"--point", crashtest.PointKeyKept, "--point", crashtest.PointKeyExpired}, Dir: dir, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	var rep crashtest.Report
	if err := json.Unmarshal(res.Stdout, &rep); err != nil {
		t.Fatalf("%s, no report: %v\nstdout %s\nstderr %s", res, err, res.Stdout, res.Stderr)
	}
	var table strings.Builder
	_ = rep.WriteTable(&table)
	t.Logf("exit %d\n%s", res.Code, table.String())
	rows := map[string]crashtest.Row{}
	for _, r := range rep.Rows {
		rows[r.Point] = r
	}
	kept, expired := rows[crashtest.PointKeyKept], rows[crashtest.PointKeyExpired]
	if !kept.Reached || !expired.Reached || len(rep.Rows) != 2 {
		t.Fatalf("rows %+v", rep.Rows)
	}
	// Past the retention: reconcile found the one charge; the key
	// was not sent again.
	if !expired.Pass || expired.Final != "succeeded" || expired.Decision != "reconciled_applied" || expired.Attempt != 1 || expired.Effects != 1 {
		t.Errorf("key_expired: %+v", expired)
	}
	if !kept.Pass || kept.Decision != "recover_retry" || kept.Effects != 1 || res.Code != cli.ExitOK {
		t.Errorf("key_kept (exit %d): %+v", res.Code, kept)
	}
}
