package wasmbuild

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s has no go.mod: %v", root, err)
	}
	if _, err := ModuleRoot(t.TempDir()); !errors.Is(err, ErrNoModuleRoot) {
		t.Fatalf("ModuleRoot(tempdir) = %v, want ErrNoModuleRoot", err)
	}
}

// TestBuildReproducible builds the same connector twice into different
// files and requires identical bytes (and so identical digests).
func TestBuildReproducible(t *testing.T) {
	root, err := ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "devkit", "testing", "testconnectors", "noop")
	dir := t.TempDir()
	ctx := context.Background()
	d1, err := Build(ctx, src, filepath.Join(dir, "a.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Build(ctx, src, filepath.Join(dir, "b.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Fatalf("two builds of the same sources differ: %s vs %s", d1, d2)
	}
	f1, err := FileDigest(filepath.Join(dir, "a.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if f1 != d1 || len(d1) != 64 {
		t.Fatalf("Build returned %q, file digest is %q", d1, f1)
	}
}

func TestBuildError(t *testing.T) {
	dir := t.TempDir()
	root, err := ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	// A package that does not compile, inside the module so the build runs.
	bad, err := os.MkdirTemp(filepath.Join(root, "internal", "wasmbuild"), "testbad-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bad) })
	if err := os.WriteFile(filepath.Join(bad, "main.go"), []byte("package main\nfunc main() { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.wasm")
	_, err = Build(context.Background(), bad, out)
	if err == nil || !strings.Contains(err.Error(), "undefined") {
		t.Fatalf("Build of a broken package: err = %v, want the compiler's message", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed build left %s behind", out)
	}
}

func TestCached(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	ctx := context.Background()
	p1, d1, err := Cached(ctx, "devkit/testing/testconnectors/noop")
	if err != nil {
		t.Fatal(err)
	}
	p2, d2, err := Cached(ctx, "devkit/testing/testconnectors/noop")
	if err != nil {
		t.Fatal(err)
	}
	if p1 != p2 || d1 != d2 {
		t.Fatalf("second Cached differs: %s %s vs %s %s", p1, d1, p2, d2)
	}
	if got, err := FileDigest(p1); err != nil || got != d1 {
		t.Fatalf("cached file digest %s (%v), want %s", got, err, d1)
	}
	p3, _, err := Cached(ctx, "devkit/testing/testconnectors/badversion")
	if err != nil {
		t.Fatal(err)
	}
	if p3 == p1 {
		t.Fatal("two packages share a cache entry")
	}
}
