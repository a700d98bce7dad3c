package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
)

// TestOneConfigForEveryCommand runs the operator commands outside the
// repository (an empty working directory) with only --config naming a
// file elsewhere, whose [server] data, manifests, modules and witness are
// relative to that file: exec, ls, approve and history find the
// ledger and the connectors there and leave nothing in the working
// directory; while a serve of that config runs, ls and cancel find it
// through the config's data directory and go through its API. Before,
// every command but serve and mcp exited 2 on --manifests ./manifests.
func TestOneConfigForEveryCommand(t *testing.T) {
	d := testDirs(t)
	conf := t.TempDir()
	pinnedManifests(t, conf, filepath.Join(d.modules, "noop.wasm"))
	if err := os.Rename(d.modules, filepath.Join(conf, "modules")); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, conf, "connhost.toml", `[server]
data = "./data"
manifests = "./manifests"
modules = "./modules"
witness = "./state/ledger.witness"
cache_dir = "./cache"
`)
	cwd := t.TempDir()
	t.Chdir(cwd)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, nil, append([]string{"--config", cfg, "--json"}, args...)...)
	}

	code, out, errOut := run("exec", "--session", "s1", "--tool-call", "c1", "--tool", "gated.echo", "--args", `{"msg":"hi"}`)
	var res host.Result
	if code != cli.ExitNotSucceeded || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("exec: exit %d %s %s", code, out, errOut)
	}
	if code, out, errOut := run("ls", "--state", "awaiting_approval"); code != cli.ExitOK || !strings.Contains(out, res.ExecutionID) {
		t.Fatalf("ls: exit %d %s %s", code, out, errOut)
	}
	if code, out, errOut := run("approve", res.Approval.ID, "--digest", res.Approval.ArgsDigest, "--by", "rita"); code != cli.ExitOK {
		t.Fatalf("approve: exit %d %s %s", code, out, errOut)
	}
	if code, out, errOut := run("history", res.ExecutionID); code != cli.ExitOK || !strings.Contains(out, "rita") {
		t.Fatalf("history: exit %d %s %s", code, out, errOut)
	}
	code, out, errOut = run("exec", "--session", "s1", "--tool-call", "c2", "--tool", "gated.echo", "--args", `{"msg":"again"}`)
	if code != cli.ExitNotSucceeded || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("exec of a second call: exit %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(conf, "state", "ledger.witness")); err != nil {
		t.Errorf("the config's witness: %v", err)
	}
	// The audit's module prober compiles into the config's cache_dir too,
	// as the executor does.
	if err := os.RemoveAll(filepath.Join(conf, "cache")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("audit", filepath.Join(conf, "manifests")); code != cli.ExitOK && code != cli.ExitFindings {
		t.Fatalf("audit: exit %d %s %s", code, out, errOut)
	}
	if entries, err := os.ReadDir(filepath.Join(conf, "cache")); err != nil || len(entries) == 0 {
		t.Errorf("audit did not compile into the config's cache_dir: %v (%d entries)", err, len(entries))
	}
	if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
		t.Errorf("the commands left %d entries in the working directory (%s, …)", len(entries), entries[0].Name())
	}

	// A serve of the config holds the ledger: the commands find it
	// through the config's data directory.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- newApp(strings.NewReader(""), io.Discard, io.Discard).execute(ctx, []string{"--config", cfg, "serve", "--listen", "127.0.0.1:0"})
	}()
	defer func() {
		cancel()
		if code := <-done; code != cli.ExitOK {
			t.Errorf("serve: exit %d", code)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := readServerInfo(filepath.Join(conf, "data")); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("serve's discovery file: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, out, errOut := run("ls", "--state", "awaiting_approval"); code != cli.ExitOK || !strings.Contains(out, res.ExecutionID) {
		t.Fatalf("ls through serve: exit %d %s %s", code, out, errOut)
	}
	if code, out, errOut := run("cancel", res.ExecutionID); code != cli.ExitOK || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel through serve: exit %d %s %s", code, out, errOut)
	}
}
