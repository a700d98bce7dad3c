package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/testing/wasmgen"
)

// TestABICheck: connhost abi check passes a module written from
// docs/abi.md alone (exit 0), and for one that imports what the host does
// not offer and lacks _initialize says both in an author's terms, exits 3,
// and gives the same findings as JSON.
func TestABICheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.wasm")
	bad := filepath.Join(dir, "bad.wasm")
	if err := os.WriteFile(good, wasmgen.MinimalConnector().Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := wasmgen.MinimalConnector().Without("_initialize").Importing(wasmgen.Import{Module: "env", Name: "abort", Params: []byte{wasmgen.I32, wasmgen.I32, wasmgen.I32, wasmgen.I32}})
	if err := os.WriteFile(bad, broken.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, nil, "abi", "check", good)
	if code != cli.ExitOK || !strings.Contains(out, "the module conforms to the connector ABI") || strings.Contains(out, "FAIL") {
		t.Fatalf("good module: exit %d\n%s%s", code, out, errOut)
	}

	code, out, _ = runCLI(t, nil, "abi", "check", bad)
	if code != cli.ExitFindings {
		t.Fatalf("bad module: exit %d, want %d\n%s", code, cli.ExitFindings, out)
	}
	for _, want := range []string{
		"FAIL imports env.abort: your module imports env.abort; the host offers connhost.{",
		"--use abort=",
		"FAIL exports _initialize: module does not export _initialize: the host runs it once per instance before any other export; an empty exported function is enough",
		"2 problem(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}

	code, out, _ = runCLI(t, nil, "--json", "abi", "check", bad)
	var res struct {
		Module   string
		Conforms bool
		Steps    []struct {
			Check, Subject, Detail string
			OK                     bool
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != cli.ExitFindings || res.Conforms || res.Module != bad {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	var failed []string
	for _, s := range res.Steps {
		if !s.OK {
			failed = append(failed, s.Check+" "+s.Subject)
		}
	}
	if strings.Join(failed, ",") != "imports env.abort,exports _initialize" {
		t.Errorf("--json failed steps %v", failed)
	}

	if code, _, errOut := runCLI(t, nil, "abi", "check", filepath.Join(dir, "missing.wasm")); code != cli.ExitUsage || errOut == "" {
		t.Errorf("missing module: exit %d %q", code, errOut)
	}
}
