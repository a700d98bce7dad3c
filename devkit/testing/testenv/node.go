package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Node returns the path of the node binary once it has checked that each
// of packages (npm package names, scoped or not) is installed in
// dir/node_modules. .ci/run installs Node and runs npm ci in every such
// directory, so under CI a missing piece fails the test; elsewhere the
// test skips, saying what is missing and how to install it.
func Node(tb testing.TB, dir string, packages ...string) string {
	tb.Helper()
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed (Debian package nodejs)"
	default:
		for _, p := range packages {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
				where, _ := filepath.Abs(dir)
				missing = p + " is not installed (run npm ci in " + where + ")"
				break
			}
		}
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s; .ci/run installs it", missing)
		}
		tb.Skipf("%s; .ci/run installs it, so this test runs in CI", missing)
	}
	return node
}
