package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/manifests"
)

// copyTree copies the files under src to dst, leaving out build output
// (target/, node_modules/).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "target" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNewInEveryLanguage scaffolds a connector in Rust and in
// AssemblyScript outside this repository (no kit there: new writes a
// copy), and proves each scaffold a working start the way TestNewScaffold
// proves the Go one: the Rust one's cargo tests pass natively; each builds
// with connhost build --pin to the same bytes from another directory;
// connhost abi check finds it conforming to docs/abi.md and its manifest;
// and the audit finds nothing but the one decision the author still has
// to make (what the provider guarantees).
func TestNewInEveryLanguage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs cargo and asc builds")
	}
	for _, lang := range []string{"rust", "assemblyscript"} {
		t.Run(lang, func(t *testing.T) {
			switch lang {
			case "rust":
				testenv.RustToolchain(t)
			default:
				testenv.NPM(t)
			}
			dir := t.TempDir()
			code, out, errOut := runCLI(t, nil, "new", "widgets", "--lang", lang, "--dir", dir)
			if code != cli.ExitOK || errOut != "" {
				t.Fatalf("new --lang %s: exit %d stderr %q", lang, code, errOut)
			}
			kit := map[string]string{"rust": "sdk/rust/connhost-guest/src/lib.rs", "assemblyscript": "sdk/assemblyscript/exports.ts"}[lang]
			if _, err := os.Stat(filepath.Join(dir, kit)); err != nil || !strings.Contains(out, "a copy of the "+lang+" kit") {
				t.Fatalf("the kit was not written: %v\n%s", err, out)
			}
			if lang == "rust" {
				// The scaffold's tests, and the kit's own (envelopes, JSON,
				// the classification of answers).
				tc := testenv.RustToolchain(t)
				kitDir, _ := filepath.Abs(filepath.Join("..", "..", "sdk", "rust", "connhost-guest"))
				for _, c := range []struct{ dir, want string }{
					{filepath.Join(dir, "plugins", "widgets"), "test result: ok. 4 passed"},
					{kitDir, "test result: ok. 7 passed"},
				} {
					cmd := exec.Command(tc.Cargo, "test", "--offline")
					cmd.Dir = c.dir
					cmd.Env = append(os.Environ(), "RUSTC="+tc.Rustc, "RUSTDOC="+tc.Rustdoc, "CARGO_TARGET_DIR="+filepath.Join(t.TempDir(), "target"))
					if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), c.want) {
						t.Fatalf("cargo test in %s: %v\n%s", c.dir, err, out)
					}
				}
			}
			mans, mods := filepath.Join(dir, "manifests"), filepath.Join(dir, "build")
			code, out, errOut = runCLI(t, nil, "--manifests", mans, "--modules", mods, "--json", "build", filepath.Join(dir, "plugins", "widgets"), "--pin")
			// build --json's output: {"module", "language", "sha256", "pinned", …}.
			type buildResult struct {
				Module, Language, SHA256 string
				Pinned                   bool
			}
			var built buildResult
			if code != cli.ExitOK || jsonUnmarshal(out, &built) != nil || !built.Pinned || built.Language != lang {
				t.Fatalf("build --pin: exit %d\n%s\n%s", code, out, errOut)
			}
			m, err := manifests.Load(filepath.Join(mans, "widgets.toml"))
			if err != nil || m.Connector.SHA256 != built.SHA256 {
				t.Fatalf("manifest after --pin: %v, pins %q, built %s", err, m.Connector.SHA256, built.SHA256)
			}

			// The same sources elsewhere build to the same bytes.
			other := t.TempDir()
			copyTree(t, dir, other)
			code, out, errOut = runCLI(t, nil, "--manifests", filepath.Join(other, "manifests"), "--modules", filepath.Join(other, "build"), "--json", "build", filepath.Join(other, "plugins", "widgets"))
			var again buildResult
			if code != cli.ExitOK || jsonUnmarshal(out, &again) != nil || again.SHA256 != built.SHA256 {
				t.Errorf("the same sources in another directory built %s, want %s (exit %d)\n%s", again.SHA256, built.SHA256, code, errOut)
			}

			code, out, _ = runCLI(t, nil, "abi", "check", built.Module, "--manifest", filepath.Join(mans, "widgets.toml"))
			if code != cli.ExitOK || !strings.Contains(out, "the module conforms to the connector ABI") {
				t.Errorf("abi check: exit %d\n%s", code, out)
			}
			code, out, _ = runCLI(t, nil, "--modules", mods, "--data", filepath.Join(dir, "data"), "--json", "audit", mans)
			r := decodeAudit(t, out)
			var got []audit.Code
			for _, f := range r.Findings {
				got = append(got, f.Code)
			}
			if code != cli.ExitOK || len(got) != 1 || got[0] != audit.CodeIdempotencyUnknownProvider {
				t.Errorf("audit of the scaffold: exit %d, findings %v; want only idempotency-unknown-provider", code, got)
			}
		})
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
