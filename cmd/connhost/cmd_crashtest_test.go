package main

import (
	"context"
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

// TestCrashtestCommand runs `connhost crashtest` as the built binary (its
// subprocesses are that binary too) on two deliberately broken fixtures
// and on the shipped connectors. Each broken fixture lies about its
// recovery policy in a way only a crash reveals: brokenkey sends a new
// Idempotency-Key per attempt (a second charge after a kill behind the
// connector's return), brokenreconcile answers not_applied without looking
// (a second email). crashtest must exit 3 and name the cell
// after_plugin_return; the shipped connectors must pass (exit 0).
func TestCrashtestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	modules := filepath.Join(dir, "modules")
	manifestDir := filepath.Join(dir, "manifests")
	for _, d := range []string{modules, manifestDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	manifest := map[string]string{}
	for name, src := range map[string]string{
		"payments":        "plugins/payments",
		"email":           "plugins/email",
		"brokenkey":       "devkit/testing/testconnectors/brokenkey",
		"brokenreconcile": "devkit/testing/testconnectors/brokenreconcile",
	} {
		wasm, digest, err := wasmbuild.Cached(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(wasm)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(modules, name+".wasm"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		mpath := filepath.Join(root, "manifests", name+".toml")
		if strings.HasPrefix(name, "broken") {
			mpath = filepath.Join(root, "devkit", "crashtest", "testdata", name+".toml")
		}
		// Pinned copies: the test does not depend on the committed pins.
		text, err := os.ReadFile(mpath)
		if err != nil {
			t.Fatal(err)
		}
		if text, err = manifests.SetSHA256(text, digest); err != nil {
			t.Fatal(err)
		}
		manifest[name] = filepath.Join(manifestDir, name+".toml")
		if err := os.WriteFile(manifest[name], text, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name      string
		args      []string
		wantCode  int
		wantFails []string // points × gated of the failing cells that must be reported
	}{
		{"brokenkey", []string{"--manifest", manifest["brokenkey"]}, cli.ExitFindings,
			[]string{"after_plugin_return/true", "after_plugin_return/false"}},
		{"brokenreconcile", []string{"--manifest", manifest["brokenreconcile"]}, cli.ExitFindings,
			[]string{"after_plugin_return/true", "after_plugin_return/false", "after_reconcile_return/true", "after_reconcile_return/false"}},
		{"payments", []string{"--manifest", manifest["payments"]}, cli.ExitOK, nil},
		{"email.send", []string{"--manifest", manifest["email"], "--operation", "send"}, cli.ExitOK, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := proc.Run(t.Context(), proc.Cmd{Path: bin, Args: append([]string{"--modules", modules, "--json", "crashtest"}, tc.args...),
				Dir: dir, DieWithParent: true})
			if err != nil {
				t.Fatal(err)
			}
			out, code := res.Stdout, res.Code
			var rep crashtest.Report
			if jerr := json.Unmarshal(out, &rep); jerr != nil {
				t.Fatalf("%s, no report: %v\nstdout %s\nstderr %s", res, jerr, out, res.Stderr)
			}
			var table strings.Builder
			_ = rep.WriteTable(&table)
			t.Logf("exit %d\n%s", code, table.String())
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			failed := map[string]crashtest.Row{}
			for _, r := range rep.Failed() {
				failed[r.Point+"/"+map[bool]string{true: "true", false: "false"}[r.Gated]] = r
			}
			for _, want := range tc.wantFails {
				r, ok := failed[want]
				if !ok {
					t.Errorf("cell %s not reported as failing", want)
					continue
				}
				if !r.Duplicate || !strings.Contains(r.Problem, "effects at the provider") {
					t.Errorf("cell %s: problem %q, want a duplicate effect", want, r.Problem)
				}
			}
			if tc.wantCode == cli.ExitOK && len(failed) > 0 {
				t.Errorf("shipped connector failed %d cell(s)", len(failed))
			}
			if rep.Totals.Kills == 0 {
				t.Error("no process was killed")
			}
		})
	}
}
