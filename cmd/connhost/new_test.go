package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host/crashtest"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// TestNewScaffold scaffolds a connector into a module of its own (the way
// an author outside this repository works), and proves the scaffold is a
// working start: its unit tests pass natively, it builds to a wasip1
// module that connhost build pins, and the audit finds nothing but the one
// decision the author still has to make (what the provider guarantees).
func TestNewScaffold(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test and a wasip1 build")
	}
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "go.sum", string(sum))
	writeFile(t, dir, "go.mod", "module example.com/widgets\n\ngo 1.26.0\n\nrequire github.com/connhost/connhost v0.0.0\n\nreplace github.com/connhost/connhost => "+root+"\n")

	code, out, errOut := runCLI(t, nil, "new", "widgets", "--dir", dir)
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("new: exit %d stderr %q", code, errOut)
	}
	for _, f := range []string{"plugins/widgets/main.go", "plugins/widgets/widgets_test.go", "manifests/widgets.toml", "manifests/widgets.probe.toml"} {
		if !strings.Contains(out, filepath.Join(dir, f)) {
			t.Errorf("output does not name %s:\n%s", f, out)
		}
	}
	// The probe config fits the scaffolded manifest: every operation has
	// sample arguments, the external one a hold, a count and a receipt.
	m, err := manifests.Load(filepath.Join(dir, "manifests", "widgets.toml"))
	if err != nil {
		t.Fatal(err)
	}
	probe, err := crashtest.LoadProbeConfig(filepath.Join(dir, "manifests", "widgets.probe.toml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.ForManifest(m, nil, nil); err != nil {
		t.Fatal(err)
	}
	if op := probe.Operations["create_item"]; op == nil || op.Hold == nil || op.Effects.Count == "" || op.Receipt == "" {
		t.Errorf("the probe config does not observe create_item: %+v", op)
	}
	main, err := os.ReadFile(filepath.Join(dir, "plugins", "widgets", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"package main", "func main() {}", "ExecuteWithKey: createItem", "Reconcile: reconcileCreateItem", "Execute: getItem"} {
		if !strings.Contains(string(main), want) {
			t.Errorf("main.go lacks %q", want)
		}
	}

	// With the module proxy the environment names: tidy reads the go.mod
	// files of the whole module graph (test dependencies of dependencies
	// included), which building and testing connhost never downloads; the
	// go.sum copied above decides what they may contain.
	gocmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gocmd("mod", "tidy")
	gocmd("test", "./plugins/widgets/")
	gocmd("vet", "./...")

	mans, mods := filepath.Join(dir, "manifests"), filepath.Join(dir, "build")
	code, out, errOut = runCLI(t, nil, "--manifests", mans, "--modules", mods, "build", filepath.Join(dir, "plugins", "widgets"), "--pin")
	if code != cli.ExitOK || !strings.Contains(out, "pinned") {
		t.Fatalf("build --pin: exit %d\n%s\n%s", code, out, errOut)
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
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, nil, "new", "Bad Name", "--dir", dir); code != cli.ExitUsage || !strings.Contains(errOut, "lower-case") {
		t.Errorf("bad name: exit %d %q", code, errOut)
	}
	writeFile(t, dir, "keep.txt", "")
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	existing := writeFile(t, filepath.Join(dir, "manifests"), "hooks.toml", "mine")
	code, _, errOut := runCLI(t, nil, "new", "hooks", "--dir", dir)
	if code != cli.ExitFailure || !strings.Contains(errOut, existing+" exists; nothing was written") {
		t.Fatalf("existing manifest: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "plugins")); !os.IsNotExist(err) {
		t.Errorf("plugins/ was written despite the refusal: %v", err)
	}
	if b, _ := os.ReadFile(existing); string(b) != "mine" {
		t.Errorf("the existing manifest was changed: %q", b)
	}
}

// TestNewManifestNamesEveryPolicyKnob: the scaffolded manifest says what
// reconcile_settle and outcome_durability are for, next to the recovery
// policy they qualify, so an author meets them before the audit does.
func TestNewManifestNamesEveryPolicyKnob(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, nil, "new", "knobs", "--dir", dir); code != cli.ExitOK {
		t.Fatalf("new: exit %d %q", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifests", "knobs.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# reconcile_settle = ", "# outcome_durability = ", `"lazy"`, "twice limits.timeout"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the scaffolded manifest does not mention %q", want)
		}
	}
}
