// Package depcheck enforces the module's dependency rules with `go list`
// (docs/design.md, "Where things live", points here): the ABI, its codec
// and the guest SDK are compiled into every connector and depend on the
// standard library only; Pebble stays in ledger/; wazero stays in
// internal/wasmrt, which imports neither the executor nor the ledger (the
// layers only point down); nothing below the server (internal/, host/,
// ledger/) imports the front doors in server/ or the dev kit; connectors
// depend on the standard library and the ABI only.
package depcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	module = "github.com/connhost/connhost"
	abiPkg = module + "/abi"
	codec  = module + "/abi/codec"
	guest  = module + "/abi/guest"
	pebble = "github.com/cockroachdb/pebble/v2"
	wazero = "github.com/tetratelabs/wazero"
	pgx    = "github.com/jackc/pgx/v5"
	otel   = "go.opentelemetry.io"
	// The OpenTelemetry SDK and exporters, below otel.
	otelSDK       = "go.opentelemetry.io/otel/sdk"
	otelExporters = "go.opentelemetry.io/otel/exporters"
	otelProto     = "go.opentelemetry.io/proto"
)

// pkg is the part of `go list -json` output the rules read.
type pkg struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// allImports returns the package's direct imports, test files included.
func (p pkg) allImports() []string {
	return slices.Concat(p.Imports, p.TestImports, p.XTestImports)
}

// within reports whether path is dir or a package below it.
func within(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// goList runs `go list -json args...` at the module root with extra
// environment variables and decodes the package stream.
func goList(t *testing.T, env []string, args ...string) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	cmd := exec.Command(goBin, append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode %s output: %v", cmd, err)
		}
		if p.Error != nil {
			t.Fatalf("%s: package %s: %s", cmd, p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("%s listed no packages", cmd)
	}
	return pkgs
}

var wasip1 = []string{"GOOS=wasip1", "GOARCH=wasm"}

// stdOnlyViolations returns "importer imports dep" for every edge in the
// dependency closure deps that leaves the allowed packages for a package
// outside the standard library. Naming the edge, not the whole closure of
// the offending dependency, points at the import line to remove.
func stdOnlyViolations(deps []pkg, allowed func(string) bool) []string {
	standard := map[string]bool{}
	for _, p := range deps {
		standard[p.ImportPath] = p.Standard
	}
	var bad []string
	for _, p := range deps {
		if !allowed(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if !standard[imp] && !allowed(imp) {
				bad = append(bad, fmt.Sprintf("%s imports %s", p.ImportPath, imp))
			}
		}
	}
	return bad
}

// confinedViolations returns "importer imports dep" for every package that
// directly imports dep (or a package below it) without being allowed to.
func confinedViolations(pkgs []pkg, dep string, allowed func(importer string) bool) []string {
	var bad []string
	for _, p := range pkgs {
		if allowed(p.ImportPath) {
			continue
		}
		for _, imp := range p.allImports() {
			if within(imp, dep) {
				bad = append(bad, fmt.Sprintf("%s imports %s", p.ImportPath, imp))
			}
		}
	}
	return slices.Compact(bad)
}

func listed(pkgs []pkg, path string) bool {
	return slices.ContainsFunc(pkgs, func(p pkg) bool { return p.ImportPath == path })
}

func TestABIDependsOnTheStandardLibraryOnly(t *testing.T) {
	onlyABI := func(path string) bool { return path == abiPkg || path == codec || path == guest }
	for _, tc := range []struct {
		name string
		env  []string
	}{{"native", nil}, {"wasip1", wasip1}} {
		t.Run(tc.name, func(t *testing.T) {
			deps := goList(t, tc.env, "-deps", "./abi/...")
			if !listed(deps, guest) {
				t.Fatalf("go list did not reach %s", guest)
			}
			for _, bad := range stdOnlyViolations(deps, onlyABI) {
				t.Errorf("%s; the ABI and guest SDK may use the standard library only", bad)
			}
			// abi itself must not depend on its own guest SDK.
			for _, bad := range stdOnlyViolations(goList(t, tc.env, "-deps", "./abi"), func(p string) bool { return p == abiPkg || p == codec }) {
				t.Errorf("%s; abi may use the standard library and abi/codec only", bad)
			}
		})
	}
}

func TestPluginsDependOnTheStandardLibraryAndABIOnly(t *testing.T) {
	deps := goList(t, wasip1, "-deps", "./plugins/...")
	plugins := 0
	allowed := func(path string) bool {
		return path == abiPkg || path == codec || path == guest || within(path, module+"/plugins")
	}
	for _, p := range deps {
		if within(p.ImportPath, module+"/plugins") {
			plugins++
			// A plugin must not import another plugin either.
			for _, imp := range p.Imports {
				if within(imp, module+"/plugins") {
					t.Errorf("%s imports plugin %s", p.ImportPath, imp)
				}
			}
		}
	}
	if plugins == 0 {
		t.Fatal("go list found no packages under plugins/")
	}
	for _, bad := range stdOnlyViolations(deps, allowed) {
		t.Errorf("%s (wasip1 build); connectors may use the standard library, abi, abi/codec and abi/guest only", bad)
	}
}

// pebbleAllowed: the ledger, its Pebble configuration, and the raw Pebble
// baseline the ledger is benchmarked against.
func pebbleAllowed(p string) bool {
	return within(p, module+"/ledger") || within(p, module+"/internal/pebbleconf") || within(p, module+"/devkit/bench")
}

// TestPebbleAndWazeroStayInTheirPackages checks direct imports, test files
// included, in the default build and with the executor tag; pgx too.
func TestPebbleAndWazeroStayInTheirPackages(t *testing.T) {
	for _, tags := range []string{"", "executor"} {
		t.Run("tags="+tags, func(t *testing.T) {
			pkgs := goList(t, nil, "-tags="+tags, "./...")
			// The rules are not vacuous: the confined packages are there.
			for _, want := range []string{module + "/ledger", module + "/internal/wasmrt"} {
				if !listed(pkgs, want) {
					t.Fatalf("go list did not list %s", want)
				}
			}
			for _, bad := range confinedViolations(pkgs, pebble, pebbleAllowed) {
				t.Errorf("%s; Pebble is confined to ledger/ (and the ledger's Pebble configuration and raw benchmark baseline, internal/pebbleconf and devkit/bench)", bad)
			}
			for _, bad := range confinedViolations(pkgs, wazero, func(p string) bool { return within(p, module+"/internal/wasmrt") }) {
				t.Errorf("%s; wazero is confined to internal/wasmrt (everything else reaches it through the executor or wasmrt)", bad)
			}
			// The runtime layer never reaches up into the executor or the
			// ledger.
			for _, p := range pkgs {
				if !within(p.ImportPath, module+"/internal/wasmrt") {
					continue
				}
				for _, imp := range append(append([]string(nil), p.Imports...), p.TestImports...) {
					if within(imp, module+"/host") || within(imp, module+"/ledger") {
						t.Errorf("%s imports %s: the wasm runtime must not depend on the executor or the ledger", p.ImportPath, imp)
					}
				}
			}
			if !listed(pkgs, module+"/ledger/pgledger") {
				t.Fatalf("go list did not list %s", module+"/ledger/pgledger")
			}
			for _, bad := range confinedViolations(pkgs, pgx, pgxAllowed) {
				t.Errorf("%s; pgx is confined to ledger/pgledger (and the tests' PostgreSQL in devkit/testing/testenv, the bench's baseline in devkit/bench)", bad)
			}
		})
	}
}

// pgxAllowed: the PostgreSQL driver is the PostgreSQL ledger's, plus the
// test clusters' setup and the bench's raw baseline on the same server.
func pgxAllowed(p string) bool {
	return within(p, module+"/ledger/pgledger") || p == module+"/devkit/testing/testenv" || p == module+"/devkit/bench"
}

// upwardViolations returns "importer imports dep" for every package below
// the server (internal/, host/, ledger/) whose code imports server/... or
// devkit/..., and for every test of those packages that imports server/...
// (their tests may use the dev kit's rigs: testenv, wasmgen, the
// emulators). host/crashtest, the public face of the crash-test engine, may
// import devkit/crashtest.
func upwardViolations(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		if !within(p.ImportPath, module+"/internal") && !within(p.ImportPath, module+"/host") && !within(p.ImportPath, module+"/ledger") {
			continue
		}
		for _, imp := range p.Imports {
			if within(imp, module+"/server") || (within(imp, module+"/devkit") && p.ImportPath != module+"/host/crashtest") {
				bad = append(bad, fmt.Sprintf("%s imports %s", p.ImportPath, imp))
			}
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if within(imp, module+"/server") {
				bad = append(bad, fmt.Sprintf("%s (test) imports %s", p.ImportPath, imp))
			}
		}
	}
	return slices.Compact(bad)
}

// TestTheLayersBelowTheServerDoNotImportIt: internal/ keeps only what lies
// below host, so neither it nor host and ledger reach up into the front
// doors (server/...) or the dev kit (devkit/...).
func TestTheLayersBelowTheServerDoNotImportIt(t *testing.T) {
	pkgs := goList(t, nil, "./...")
	for _, want := range []string{module + "/internal/wasmrt", module + "/server/httpapi", module + "/devkit/sandbox"} {
		if !listed(pkgs, want) {
			t.Fatalf("go list did not list %s", want)
		}
	}
	for _, bad := range upwardViolations(pkgs) {
		t.Errorf("%s; internal/, host/ and ledger/ lie below the server and the dev kit and must not import them", bad)
	}
}

// TestRuleCheckersReportViolations proves the checkers above can fail.
func TestRuleCheckersReportViolations(t *testing.T) {
	deps := []pkg{
		{ImportPath: abiPkg, Imports: []string{"fmt", "golang.org/x/sys/unix"}},
		{ImportPath: "fmt", Standard: true},
		{ImportPath: "golang.org/x/sys/unix", Imports: []string{"golang.org/x/sys/internal"}},
		{ImportPath: "golang.org/x/sys/internal"},
	}
	if got, want := stdOnlyViolations(deps, func(p string) bool { return p == abiPkg }), []string{abiPkg + " imports golang.org/x/sys/unix"}; !slices.Equal(got, want) {
		t.Errorf("stdOnlyViolations = %q, want %q", got, want)
	}
	pkgs := []pkg{
		{ImportPath: module + "/ledger", Imports: []string{pebble}},
		{ImportPath: module + "/ledgerx", Imports: []string{pebble + "/vfs"}},
		{ImportPath: module + "/cmd/connhost", Imports: []string{module + "/host"}, XTestImports: []string{wazero + "/api"}},
		{ImportPath: module + "/devkit/bench", Imports: []string{"github.com/cockroachdb/pebble/v2x"}},
	}
	want := []string{module + "/ledgerx imports " + pebble + "/vfs"}
	if got := confinedViolations(pkgs, pebble, func(p string) bool { return within(p, module+"/ledger") }); !slices.Equal(got, want) {
		t.Errorf("confinedViolations(pebble) = %q, want %q", got, want)
	}
	if got := confinedViolations([]pkg{{ImportPath: module + "/host", Imports: []string{pgx + "/pgxpool"}},
		{ImportPath: module + "/ledger/pgledger", Imports: []string{pgx}}}, pgx, pgxAllowed); !slices.Equal(got, []string{module + "/host imports " + pgx + "/pgxpool"}) {
		t.Errorf("confinedViolations(pgx) = %q", got)
	}
	if got := confinedViolations([]pkg{{ImportPath: module + "/ledger", Imports: []string{otel + "/otel/trace"}},
		{ImportPath: module + "/host", Imports: []string{otel + "/otel/trace"}}}, otel, otelAPIAllowed); !slices.Equal(got, []string{module + "/ledger imports " + otel + "/otel/trace"}) {
		t.Errorf("confinedViolations(otel) = %q", got)
	}
	upward := []pkg{
		{ImportPath: module + "/internal/lease", Imports: []string{module + "/server/waiting"}, TestImports: []string{module + "/devkit/testing/testenv"}},
		{ImportPath: module + "/internal/wasmrt", XTestImports: []string{module + "/server/httpapi"}},
		{ImportPath: module + "/host", Imports: []string{module + "/devkit/sandbox"}},
		{ImportPath: module + "/host/crashtest", Imports: []string{module + "/devkit/crashtest"}},
		{ImportPath: module + "/server/httpapi", Imports: []string{module + "/host", module + "/devkit/sandbox"}},
	}
	if got, want := upwardViolations(upward), []string{
		module + "/internal/lease imports " + module + "/server/waiting",
		module + "/internal/wasmrt (test) imports " + module + "/server/httpapi",
		module + "/host imports " + module + "/devkit/sandbox",
	}; !slices.Equal(got, want) {
		t.Errorf("upwardViolations = %q, want %q", got, want)
	}
	want = []string{module + "/cmd/connhost imports " + wazero + "/api"}
	if got := confinedViolations(pkgs, wazero, func(p string) bool { return within(p, module+"/internal/wasmrt") }); !slices.Equal(got, want) {
		t.Errorf("confinedViolations(wazero) = %q, want %q", got, want)
	}
}

// The dev kit (devkit: provider emulators, the crash-test engine,
// benchmarks, test rigs) is not the product: only the commands that serve
// authors and try-outs (dev, demo, sandbox, crashtest and bench, in
// devkit/commands, which cmd/connhost registers from one !serveronly
// file), the public crash-test API (host/crashtest) and tests may import
// it, and a `-tags serveronly` build of connhost contains none of it.
func TestTheProductDoesNotImportTheDevKit(t *testing.T) {
	devkit := module + "/devkit"
	pkgs := goList(t, nil, "./...")
	if !listed(pkgs, devkit+"/sandbox") {
		t.Fatalf("go list did not reach %s/sandbox", devkit)
	}
	for _, p := range pkgs {
		if within(p.ImportPath, devkit) || p.ImportPath == module+"/cmd/connhost" || p.ImportPath == module+"/host/crashtest" {
			continue
		}
		for _, imp := range p.Imports { // test imports may use the rigs
			if within(imp, devkit) {
				t.Errorf("%s imports %s; only cmd/connhost's dev commands, host/crashtest and tests may", p.ImportPath, imp)
			}
		}
	}
	server := goList(t, nil, "-deps", "-tags=serveronly", "./cmd/connhost")
	if !listed(server, module+"/host") {
		t.Fatalf("go list -deps -tags serveronly ./cmd/connhost did not reach %s/host", module)
	}
	for _, p := range server {
		if within(p.ImportPath, devkit) || p.ImportPath == module+"/host/crashtest" {
			t.Errorf("the serveronly build of connhost contains %s", p.ImportPath)
		}
	}
}

// otelAPIAllowed: the packages that open spans or carry trace context may
// import the OpenTelemetry API: internal/telemetry (which names every span
// and attribute), the executor, the wasm runtime's http capability, the
// HTTP API, the MCP server and the CLI. The ledger, the ABI and the
// connectors never do.
func otelAPIAllowed(p string) bool {
	for _, dir := range []string{"/internal/telemetry", "/host", "/internal/wasmrt", "/server/httpapi", "/server/mcpserver", "/cmd/connhost"} {
		if within(p, module+dir) {
			return true
		}
	}
	return false
}

// otelSDKAllowed: the SDK and its exporters are set up in one place,
// internal/telemetry/otlp, which `connhost serve` calls. Test files may
// use them (an in-memory recorder), and so may the test rigs under
// devkit/testing (a runtime's span exported to a real backend).
func otelSDKAllowed(p string) bool { return within(p, module+"/internal/telemetry/otlp") }

// TestOpenTelemetryStaysInItsPackages: the OpenTelemetry API is imported
// only where spans are opened (otelAPIAllowed), the SDK and exporters only
// by internal/telemetry/otlp; and host's dependency closure holds no SDK,
// so a Go program that embeds the executor carries the API only.
func TestOpenTelemetryStaysInItsPackages(t *testing.T) {
	pkgs := goList(t, nil, "./...")
	if !listed(pkgs, module+"/internal/telemetry/otlp") {
		t.Fatalf("go list did not list %s", module+"/internal/telemetry/otlp")
	}
	tests := func(p string) bool {
		return strings.HasSuffix(p, "_test") || within(p, module+"/devkit/testing")
	}
	for _, bad := range confinedViolations(withoutTests(pkgs, tests), otel, otelAPIAllowed) {
		t.Errorf("%s; the OpenTelemetry API is confined to internal/telemetry and the packages that open spans (host, internal/wasmrt, server/httpapi, server/mcpserver, cmd/connhost)", bad)
	}
	for _, dep := range []string{otelSDK, otelExporters, otelProto} {
		for _, bad := range confinedViolations(withoutTests(pkgs, func(string) bool { return false }), dep, otelSDKAllowed) {
			t.Errorf("%s; the OpenTelemetry SDK and exporters are confined to internal/telemetry/otlp", bad)
		}
	}
	for _, p := range goList(t, nil, "-deps", "./host") {
		for _, dep := range []string{otelSDK, otelExporters, otelProto} {
			if within(p.ImportPath, dep) {
				t.Errorf("host depends on %s: the executor carries the OpenTelemetry API only", p.ImportPath)
			}
		}
	}
}

// withoutTests returns pkgs with the test imports dropped, and packages
// for which skip is true dropped whole (test rigs may read a real
// backend's traces with the SDK).
func withoutTests(pkgs []pkg, skip func(string) bool) []pkg {
	var out []pkg
	for _, p := range pkgs {
		if skip(p.ImportPath) {
			continue
		}
		p.TestImports, p.XTestImports = nil, nil
		out = append(out, p)
	}
	return out
}
