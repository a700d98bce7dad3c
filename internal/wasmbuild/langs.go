package wasmbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Lang is the language of a connector's sources.
type Lang string

// The languages connhost builds.
const (
	// LangGo: a Go main package (*.go), built by [Build].
	LangGo Lang = "go"
	// LangRust: a cargo crate (Cargo.toml) of crate type cdylib, built for
	// wasm32-wasip1 (or wasm32-wasi on toolchains before it had that name).
	LangRust Lang = "rust"
	// LangAssemblyScript: an npm package (package.json) whose
	// assembly/index.ts asc compiles with its asconfig.json.
	LangAssemblyScript Lang = "assemblyscript"
)

// Langs lists the languages in the order connhost new names them.
var Langs = []Lang{LangGo, LangAssemblyScript, LangRust}

// ErrNoToolchain reports that the toolchain a connector's language needs
// is not installed.
var ErrNoToolchain = errors.New("wasmbuild: toolchain not found")

// DetectLang returns the language of the connector sources in dir:
// Cargo.toml means Rust, package.json AssemblyScript, *.go files Go.
func DetectLang(dir string) (Lang, error) {
	has := func(name string) bool {
		st, err := os.Stat(filepath.Join(dir, name))
		return err == nil && !st.IsDir()
	}
	switch {
	case has("Cargo.toml"):
		return LangRust, nil
	case has("package.json"):
		return LangAssemblyScript, nil
	}
	if gos, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(gos) > 0 {
		return LangGo, nil
	}
	return "", fmt.Errorf("wasmbuild: %s holds no connector sources: no Cargo.toml (Rust), package.json (AssemblyScript) or *.go files (Go)", dir)
}

// BuildAny builds the connector in srcDir, whatever its language, to the
// module outPath and returns the module's hex sha256 and the language.
// Each language builds reproducibly: the same sources and toolchain give
// the same bytes (paths are kept out of the module).
func BuildAny(ctx context.Context, srcDir, outPath string) (digest string, lang Lang, err error) {
	lang, err = DetectLang(srcDir)
	if err != nil {
		return "", "", err
	}
	switch lang {
	case LangRust:
		digest, err = buildRust(ctx, srcDir, outPath)
	case LangAssemblyScript:
		digest, err = buildAssemblyScript(ctx, srcDir, outPath)
	default:
		digest, err = Build(ctx, srcDir, outPath)
	}
	return digest, lang, err
}

// RustToolchain is a cargo and a rustc that can build for a WASI target.
type RustToolchain struct {
	Cargo, Rustc string
	// Rustdoc is the rustdoc beside Rustc ("" when there is none).
	Rustdoc string
	// Target is wasm32-wasip1, or wasm32-wasi for toolchains before 1.78.
	Target string
}

// FindRustToolchain returns the first toolchain with a WASI target: $CARGO
// and $RUSTC when set, then the rustc on PATH (rustup's, say), then
// Debian's /usr/bin/rustc and /usr/bin/cargo (packages rustc, cargo and
// libstd-rust-dev-wasm32).
func FindRustToolchain() (RustToolchain, error) {
	type pair struct{ cargo, rustc string }
	var cands []pair
	if r := os.Getenv("RUSTC"); r != "" {
		cands = append(cands, pair{envOr("CARGO", "cargo"), r})
	}
	if r, err := exec.LookPath("rustc"); err == nil {
		c, _ := exec.LookPath("cargo")
		cands = append(cands, pair{c, r})
	}
	cands = append(cands, pair{"/usr/bin/cargo", "/usr/bin/rustc"})
	var tried []string
	for _, p := range cands {
		if p.cargo == "" || p.rustc == "" {
			continue
		}
		out, err := exec.Command(p.rustc, "--print", "sysroot").Output()
		if err != nil {
			continue
		}
		sysroot := strings.TrimSpace(string(out))
		tried = append(tried, p.rustc+" (sysroot "+sysroot+")")
		for _, target := range []string{"wasm32-wasip1", "wasm32-wasi"} {
			if st, err := os.Stat(filepath.Join(sysroot, "lib", "rustlib", target, "lib")); err == nil && st.IsDir() {
				if _, err := exec.LookPath(p.cargo); err != nil {
					continue
				}
				tc := RustToolchain{Cargo: p.cargo, Rustc: p.rustc, Target: target}
				if doc := filepath.Join(filepath.Dir(p.rustc), "rustdoc"); fileExists(doc) {
					tc.Rustdoc = doc
				}
				return tc, nil
			}
		}
	}
	return RustToolchain{}, fmt.Errorf("%w: no rustc with the wasm32-wasip1 or wasm32-wasi target (tried %s): "+
		"rustup target add wasm32-wasip1, or on Debian 12 apt-get install rustc cargo libstd-rust-dev-wasm32",
		ErrNoToolchain, orNone(tried))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none found"
	}
	return strings.Join(s, ", ")
}

// buildRust runs cargo build --release for the toolchain's target, with
// the source paths remapped so that the module does not depend on where
// the sources lie, and copies the cdylib to outPath.
func buildRust(ctx context.Context, srcDir, outPath string) (string, error) {
	tc, err := FindRustToolchain()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(srcDir)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	env := append(os.Environ(), "RUSTC="+tc.Rustc)
	meta := exec.CommandContext(ctx, tc.Cargo, "metadata", "--no-deps", "--format-version", "1", "--offline")
	meta.Dir, meta.Env = abs, env
	var stderr bytes.Buffer
	meta.Stderr = &stderr
	out, err := meta.Output()
	if err != nil {
		return "", fmt.Errorf("wasmbuild: cargo metadata in %s: %w\n%s", abs, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var md struct {
		TargetDirectory string `json:"target_directory"`
		Packages        []struct {
			ManifestPath string `json:"manifest_path"`
			Targets      []struct {
				Name      string   `json:"name"`
				CrateType []string `json:"crate_types"`
			} `json:"targets"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(out, &md); err != nil {
		return "", fmt.Errorf("wasmbuild: cargo metadata: %w", err)
	}
	lib := ""
	for _, p := range md.Packages {
		if filepath.Dir(p.ManifestPath) != abs {
			continue
		}
		for _, t := range p.Targets {
			for _, ct := range t.CrateType {
				if ct == "cdylib" {
					lib = strings.ReplaceAll(t.Name, "-", "_")
				}
			}
		}
	}
	if lib == "" {
		return "", fmt.Errorf("wasmbuild: %s/Cargo.toml has no cdylib: add [lib] crate-type = [\"cdylib\", \"rlib\"]", abs)
	}
	// Cargo before 1.85 hashes a path dependency's absolute path (and
	// RUSTFLAGS) into every crate's -C metadata, which orders the module's
	// functions; rustc writes source paths into panic locations. So cargo
	// runs on the project (two levels up: plugins/<name>, the kit in
	// sdk/) through a link at a fixed path, one build at a time, and that
	// path is remapped to /project: the bytes do not depend on where the
	// checkout lies.
	project := filepath.Dir(filepath.Dir(abs))
	rel, err := filepath.Rel(project, abs)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	unlock, err := lockFile(filepath.Join(fixedBuildDir(), "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	link := filepath.Join(fixedBuildDir(), "project")
	_ = os.Remove(link)
	if err := os.Symlink(project, link); err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	defer os.Remove(link)
	env = append(env, "CARGO_INCREMENTAL=0", "CARGO_TARGET_DIR="+md.TargetDirectory,
		"RUSTFLAGS=--remap-path-prefix="+link+"=/project")
	cmd := exec.CommandContext(ctx, tc.Cargo, "build", "--release", "--offline", "--target", tc.Target,
		"--manifest-path", filepath.Join(link, rel, "Cargo.toml"))
	cmd.Dir, cmd.Env = abs, env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("wasmbuild: cargo build --release --target %s (rustc %s) in %s: %w\n%s", tc.Target, tc.Rustc, abs, err, bytes.TrimSpace(log.Bytes()))
	}
	return copyModule(filepath.Join(md.TargetDirectory, tc.Target, "release", lib+".wasm"), outPath)
}

// buildAssemblyScript compiles assembly/index.ts with the package's own
// asc (installing the package's dependencies first when node_modules lacks
// it) and its asconfig.json's release target.
func buildAssemblyScript(ctx context.Context, srcDir, outPath string) (string, error) {
	abs, err := filepath.Abs(srcDir)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	asc := filepath.Join(abs, "node_modules", ".bin", "asc")
	if _, err := os.Stat(asc); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return "", fmt.Errorf("%w: npm, to install the package's assemblyscript (node and npm: apt-get install nodejs npm)", ErrNoToolchain)
		}
		args := []string{"install", "--no-audit", "--no-fund", "--loglevel=error"}
		if _, err := os.Stat(filepath.Join(abs, "package-lock.json")); err == nil {
			args[0] = "ci"
		}
		cmd := exec.CommandContext(ctx, npm, args...)
		cmd.Dir = abs
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("wasmbuild: npm %s in %s: %w\n%s", args[0], abs, err, bytes.TrimSpace(log.Bytes()))
		}
		if _, err := os.Stat(asc); err != nil {
			return "", fmt.Errorf("%w: %s after npm %s: add \"assemblyscript\" to the package's devDependencies", ErrNoToolchain, asc, args[0])
		}
	}
	tmpDir, err := os.MkdirTemp("", "connhost-asc-*")
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "module.wasm")
	cmd := exec.CommandContext(ctx, asc, "assembly/index.ts", "--target", "release", "--outFile", tmp)
	cmd.Dir = abs
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("wasmbuild: asc assembly/index.ts --target release in %s: %w\n%s", abs, err, bytes.TrimSpace(log.Bytes()))
	}
	return copyModule(tmp, outPath)
}

// copyModule copies a built module to outPath atomically and returns its
// digest.
func copyModule(from, outPath string) (digest string, err error) {
	outAbs, err := filepath.Abs(outPath)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(outAbs), 0o755); err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	src, err := os.Open(from)
	if err != nil {
		return "", fmt.Errorf("wasmbuild: the build wrote no module: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(outAbs), ".build-*.wasm")
	if err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, src); err != nil {
		_ = tmp.Close()
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	if digest, err = FileDigest(tmp.Name()); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), outAbs); err != nil {
		return "", fmt.Errorf("wasmbuild: %w", err)
	}
	return digest, nil
}

// fixedBuildDir is where Rust builds link their project from: the same
// path on every machine of one OS, so that it can be remapped away.
func fixedBuildDir() string {
	if filepath.Separator == '/' {
		return "/tmp/connhost-rust-build"
	}
	return filepath.Join(os.TempDir(), "connhost-rust-build")
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
