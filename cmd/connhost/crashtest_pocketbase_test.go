package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host/crashtest"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// TestCrashtestPocketBase proves a connector for a real third-party
// provider with no probe contract and no idempotency keys — PocketBase
// v0.39's records API — with `connhost crashtest --probe`, the connector
// and its probe config being all there is. The connector makes a record
// once by a unique field (ref = the call's key) and declares
// reconcile_settle 0: in the in-flight row the re-dispatch makes the
// record while the original request is held, and the held request, once
// released, meets the unique index and is refused (400). That safe design
// passes. The same connector against a collection without the unique
// index is the real bug: the held request lands as a second record, and
// the re-run of that one cell (--operation, --point, --variant) is
// caught. The secrets come from the environment (--set-env).
func TestCrashtestPocketBase(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes against a real PocketBase")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	pb := testenv.StartPocketBase(t)
	fields := []map[string]any{
		{"name": "name", "type": "text", "required": true},
		{"name": "quantity", "type": "number"},
		{"name": "ref", "type": "text"},
	}
	pb.CreateCollection(t, "items", fields, []string{"CREATE UNIQUE INDEX idx_items_ref ON items (ref)"})
	pb.CreateCollection(t, "items_plain", fields, nil)

	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	mods := filepath.Join(dir, "build")
	if _, err := wasmbuild.Build(ctx, filepath.Join(root, "devkit", "testing", "testconnectors", "pocketbase"), filepath.Join(mods, "pocketbase.wasm")); err != nil {
		t.Fatal(err)
	}
	testdata := filepath.Join(root, "devkit", "crashtest", "testdata")
	run := func(t *testing.T, collection string, extra ...string) (int, crashtest.Report, string) {
		t.Helper()
		p, err := proc.Run(ctx, proc.Cmd{
			Path: bin,
			Args: append([]string{"--modules", mods, "--json", "crashtest",
				"--manifest", filepath.Join(testdata, "pocketbase.toml"),
				"--probe", filepath.Join(testdata, "pocketbase.probe.toml"),
				"--provider-url", pb.URL,
				"--set-env", "token=PB_TOKEN", "--set-env", "collection=PB_COLLECTION"}, extra...),
			Env:           append(os.Environ(), "PB_TOKEN="+pb.Token, "PB_COLLECTION="+collection),
			DieWithParent: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		var rep crashtest.Report
		if err := json.Unmarshal(p.Stdout, &rep); err != nil {
			t.Fatalf("%s, no report: %v\nstdout %s\nstderr %s", p, err, p.Stdout, p.Stderr)
		}
		var table strings.Builder
		_ = rep.WriteTable(&table)
		t.Logf("exit %d\n%s", p.Code, table.String())
		return p.Code, rep, string(p.Stderr)
	}

	t.Run("unique index", func(t *testing.T) {
		code, rep, stderr := run(t, "items")
		if code != cli.ExitOK || !rep.OK() {
			t.Fatalf("exit %d, %d failed cells\n%s", code, rep.Totals.Failed, stderr)
		}
		if strings.Contains(stderr, pb.Token) {
			t.Error("the token was printed")
		}
		heldCreates := 0
		for _, r := range rep.Rows {
			if r.Point == crashtest.PointInFlight && r.Operation == "create_item" {
				heldCreates++
				// The re-dispatch made the record; the held request, once
				// released, met the unique index.
				if r.Effects != 1 || r.HeldAnswer != 400 || r.Decision != "reconciled_not_applied" {
					t.Errorf("in-flight create (gated %t): %d effects, held request answered %d, decision %s",
						r.Gated, r.Effects, r.HeldAnswer, r.Decision)
				}
			}
		}
		if heldCreates != 2 || rep.Totals.Kills == 0 {
			t.Errorf("%d in-flight create rows, %d kills", heldCreates, rep.Totals.Kills)
		}
	})
	t.Run("no unique index", func(t *testing.T) {
		code, rep, _ := run(t, "items_plain", "--operation", "create_item", "--point", "in_flight", "--variant", "ungated")
		if code != cli.ExitFindings || len(rep.Rows) != 1 {
			t.Fatalf("exit %d with %d rows, want exit %d with the one cell", code, len(rep.Rows), cli.ExitFindings)
		}
		r := rep.Rows[0]
		if r.Pass || !r.Duplicate || r.Effects != 2 || r.HeldAnswer != 200 ||
			!strings.Contains(r.Problem, "nothing at the provider refuses the duplicate") {
			t.Fatalf("in-flight create without the index: %+v", r)
		}
	})
}
