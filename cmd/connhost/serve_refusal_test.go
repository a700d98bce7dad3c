package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/server/httpapi"
)

// TestServeRefusalsLeaveNothing: a serve that refuses to start says why
// with a code of its own and leaves no ledger or witness for the next
// start to take for the deployment's. A config with an unknown key is
// refused with exit 1 and invalid_config on stdout under --json (before:
// internal, status 500), its file:line also on stderr; a module that
// does not load and a port already taken refuse the start after, or
// before, the ledger would have been created (before: an empty ledger and
// its witness stayed).
func TestServeRefusalsLeaveNothing(t *testing.T) {
	d := testDirs(t)
	conf := t.TempDir()
	pinnedManifests(t, conf, filepath.Join(d.modules, "noop.wasm"))
	nothingLeft := func(t *testing.T, data string) {
		t.Helper()
		for _, p := range []string{filepath.Join(data, "ledger"), data + ".witness"} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s was left behind", p)
			}
		}
	}

	t.Run("a config refused", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		cfg := writeFile(t, conf, "bad.toml", "[server]\nlisten = \"127.0.0.1:0\"\ntokn = \"x\"\n")
		code, out, errOut := runCLI(t, nil, "--json", "--data", data, "--config", cfg, "serve")
		var p httpapi.Problem
		if code != cli.ExitFailure || json.Unmarshal([]byte(out), &p) != nil || p.Code != httpapi.CodeInvalidConfig {
			t.Fatalf("exit %d, stdout %s", code, out)
		}
		if !strings.Contains(p.Detail, "bad.toml:3: unknown key tokn") || !strings.Contains(errOut, "bad.toml:3: unknown key tokn") {
			t.Errorf("the reason, with its file and line, on stdout and stderr: %q %q", p.Detail, errOut)
		}
		nothingLeft(t, data)
	})

	t.Run("a module that does not load", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		cfg := writeFile(t, conf, "connhost.toml", "[server]\nlisten = \"127.0.0.1:0\"\nmanifests = \"manifests\"\nmodules = \"no-modules\"\n")
		code, _, errOut := runCLI(t, nil, "--data", data, "--config", cfg, "serve")
		if code != cli.ExitFailure || !strings.Contains(errOut, "noop") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		nothingLeft(t, data)
	})

	t.Run("a port already taken", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cfg := writeFile(t, conf, "taken.toml", "[server]\nlisten = \""+ln.Addr().String()+"\"\nmanifests = \"manifests\"\n")
		code, _, errOut := runCLI(t, nil, "--data", data, "--modules", filepath.Dir(filepath.Join(d.modules, "noop.wasm")), "--config", cfg, "serve")
		if code != cli.ExitFailure || !strings.Contains(errOut, "listen") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		nothingLeft(t, data)
	})
}
