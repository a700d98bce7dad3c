package testenv

import (
	"os"
	"os/exec"
	"testing"

	"github.com/connhost/connhost/internal/wasmbuild"
)

// RustToolchain returns a cargo and rustc that build for a WASI target.
// .ci/run installs Debian's (rustc, cargo, libstd-rust-dev-wasm32), so
// under CI a missing toolchain fails the test; elsewhere it skips, saying
// how to install one.
func RustToolchain(tb testing.TB) wasmbuild.RustToolchain {
	tb.Helper()
	tc, err := wasmbuild.FindRustToolchain()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%v; .ci/run installs it", err)
		}
		tb.Skipf("%v; .ci/run installs it, so this test runs in CI", err)
	}
	return tc
}

// NPM returns the path of npm, which builds AssemblyScript connectors
// (their assemblyscript comes from the npm registry). Under CI a missing
// npm fails the test; elsewhere it skips.
func NPM(tb testing.TB) string {
	tb.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("npm is not installed (Debian packages nodejs npm); .ci/run installs it")
		}
		tb.Skip("npm is not installed (Debian packages nodejs npm); .ci/run installs it, so this test runs in CI")
	}
	return npm
}
