// Package wasmbuild compiles a connector package to a wasip1 module with
// reproducible flags, and caches builds by source hash for tests.
//
// A connector is a Go main package built with
//
//	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath -buildvcs=false
//
// from the module root. With the same toolchain and the same sources the
// output is byte-for-byte identical, so the digest printed by a build can be
// pinned in the connector's manifest.
package wasmbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
)

// CacheEnv names an environment variable that, when set, overrides the
// directory [Cached] keeps built modules in. The default is
// os.UserCacheDir()/connhost/wasm.
const CacheEnv = "CONNHOST_WASM_CACHE"

// ErrNoModuleRoot reports that no go.mod was found in the directory or any
// of its parents.
var ErrNoModuleRoot = errors.New("wasmbuild: no go.mod in the directory or its parents")

// Flags are the go build flags of every connector build. -trimpath and
// -buildvcs=false keep paths and VCS stamps out of the module, so the bytes
// depend on the toolchain and the sources only.
var Flags = []string{"-buildmode=c-shared", "-trimpath", "-buildvcs=false"}

// Env returns the environment of a connector build: the current environment
// with GOOS=wasip1, GOARCH=wasm and CGO_ENABLED=0.
func Env() []string {
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "GOOS" || k == "GOARCH" || k == "CGO_ENABLED" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
}

// ModuleRoot returns the nearest directory at or above dir that holds a
// go.mod file. An empty dir means the current working directory.
func ModuleRoot(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("wasmbuild: %w", err)
		}
		dir = wd
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	for d := dir; ; {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !st.IsDir() {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("%w: %s", ErrNoModuleRoot, dir)
		}
		d = parent
	}
}

// Build compiles the main package in srcDir to the wasip1 module outPath
// and returns the module's hex sha256. srcDir must lie inside a Go module;
// the build runs from the module root. outPath is written atomically (a
// temporary file in the same directory, then a rename).
func Build(ctx context.Context, srcDir, outPath string) (digest string, err error) {
	abs, err := filepath.Abs(srcDir)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	root, err := ModuleRoot(abs)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	pkg := "./" + filepath.ToSlash(rel)
	outAbs, err := filepath.Abs(outPath)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(outAbs), 0o755); err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(outAbs), ".build-*.wasm")
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	tmpName := tmp.Name()
	_ = tmp.Close()
	defer func() {
		if err != nil {
			_ = os.Remove(tmpName)
		}
	}()

	args := append([]string{"build"}, Flags...)
	args = append(args, "-o", tmpName, pkg)
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = root
	cmd.Env = Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("wasmbuild: go build %s: %w\n%s", pkg, err, bytes.TrimSpace(out.Bytes()))
	}
	digest, err = FileDigest(tmpName)
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmpName, outAbs); err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	return digest, nil
}

// FileDigest returns the hex sha256 of the file at path.
func FileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("wasmbuild: read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Cached returns a built module for the connector package in pkgDir
// (absolute, or relative to the module root), building it only when no
// build of the same sources exists. The cache key is a sha256 over the Go
// version, GOFLAGS, go.mod, go.sum, every .go file under abi/ and pkgDir,
// and the .go files of every other module-local package pkgDir imports.
// Builds are kept under os.UserCacheDir()/connhost/wasm (or
// $CONNHOST_WASM_CACHE; os.TempDir() stands in for a missing user cache dir).
// It is safe for concurrent use by goroutines and by separate test
// processes: each build is written to a temporary file and renamed.
func Cached(ctx context.Context, pkgDir string) (wasmPath, digest string, err error) {
	root, err := ModuleRoot("")
	if err != nil {
		return "", "", err
	}
	if !filepath.IsAbs(pkgDir) {
		pkgDir = filepath.Join(root, pkgDir)
	}
	if r, err := ModuleRoot(pkgDir); err == nil {
		root = r
	}
	key, err := sourceKey(ctx, root, pkgDir)
	if err != nil {
		return "", "", err
	}
	dir, err := cacheDir()
	if err != nil {
		return "", "", err
	}
	wasmPath = filepath.Join(dir, filepath.Base(pkgDir)+"-"+key[:32]+".wasm")
	if _, err := os.Stat(wasmPath); err == nil {
		d, err := FileDigest(wasmPath)
		return wasmPath, d, err
	}
	d, err := Build(ctx, pkgDir, wasmPath)
	return wasmPath, d, err
}

func cacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		// No $HOME or $XDG_CACHE_HOME (a bare CI environment): a temporary
		// directory still shares builds between test processes.
		base = os.TempDir()
	}
	return filepath.Join(base, "connhost", "wasm"), nil
}

var goVersion = sync.OnceValues(func() (string, error) {
	out, err := exec.Command(goTool(), "env", "GOVERSION", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("wasmbuild: go env GOVERSION: %w", err)
	}
	return string(out), nil
})

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// localDeps lists the directories of the non-standard packages inside the
// module root that the package in pkgDir imports (for wasip1).
func localDeps(ctx context.Context, root, pkgDir string) ([]string, error) {
	cmd := exec.CommandContext(ctx, goTool(), "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", ".")
	cmd.Dir = pkgDir
	cmd.Env = Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("wasmbuild: go list %s: %w\n%s", pkgDir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var dirs []string
	for _, d := range strings.Fields(string(out)) {
		if rel, err := filepath.Rel(root, d); err == nil && !strings.HasPrefix(rel, "..") {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// sourceKey hashes everything that determines the bytes of a build.
func sourceKey(ctx context.Context, root, pkgDir string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	ver, err := goVersion()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "go %q\nGOFLAGS %q\nflags %q\n", ver, os.Getenv("GOFLAGS"), Flags)
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, dir := range []string{filepath.Join(root, "abi"), pkgDir} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("wasmbuild: hash sources: %w", err)
		}
	}
	// Module-local packages the connector imports besides abi/ (a shared
	// helper package, say) are part of its sources too.
	deps, err := localDeps(ctx, root, pkgDir)
	if err != nil {
		return "", err
	}
	for _, dir := range deps {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return "", fmt.Errorf("wasmbuild: hash sources: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(files)
	files = slices.Compact(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(f, "go.sum") {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("wasmbuild: hash sources: %w", err)
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
