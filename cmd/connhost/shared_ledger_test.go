package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.StopSharedPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://connhost:hunter2@db:5432/ledger?sslmode=verify-full": "postgres://connhost:xxxxx@db:5432/ledger?sslmode=verify-full",
		"postgresql://connhost@db/ledger":                                "postgresql://connhost@db/ledger",
		"postgres://db/ledger?user=c&password=hunter2":                   "postgres://db/ledger?password=xxxxx&user=c",
		"host=db user=c password=hunter2 dbname=ledger":                  "host=db user=c password=xxxxx dbname=ledger",
		"host=db password='hunter 2' dbname=ledger":                      "host=db password=xxxxx dbname=ledger",
		"postgres://c:hunter2@db:notaport/x%zz":                          "(a connection string that does not parse; not shown)",
	} {
		if got := server.RedactDSN(in); got != want {
			t.Errorf("server.RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConfigSharedLedger: [server] ledger_env names the variable holding
// the connection string, which Config never prints; node and lease_ttl
// are read, and every mistake is reported with its line.
func TestConfigSharedLedger(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"LEDGER": "postgres://connhost:hunter2@db/ledger", "EMPTY": ""}[k]
		return v, ok
	}
	cfg, err := server.ParseConfig("c.toml", []byte("[server]\nledger_env = \"LEDGER\"\nnode = \"node-1\"\nlease_ttl = \"5s\"\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Ledger != "postgres://connhost:hunter2@db/ledger" || cfg.Server.Node != "node-1" || cfg.Server.LeaseTTL.String() != "5s" {
		t.Fatalf("parsed %+v", cfg.Server)
	}
	b, _ := json.Marshal(cfg)
	for _, s := range []string{cfg.String(), string(b)} {
		if strings.Contains(s, "hunter2") || !strings.Contains(s, "ledger from $LEDGER") || !strings.Contains(s, "node node-1") {
			t.Errorf("config shown as %q", s)
		}
	}
	cfg, err = server.ParseConfig("c.toml", []byte("[server]\nledger = \"postgres://connhost:hunter2@db/ledger\"\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.String(); strings.Contains(s, "hunter2") || !strings.Contains(s, "postgres://connhost:xxxxx@db/ledger") {
		t.Errorf("config shown as %q", s)
	}
	_, err = server.ParseConfig("c.toml", []byte("[server]\nledger = \"postgres://a:hunter2@db/x\"\nledger_env = \"LEDGER\"\nlease_ttl = \"soon\"\n\n[connectors.x]\n"), env)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"c.toml:3: set ledger or ledger_env, not both", "c.toml:4: lease_ttl must be a positive duration"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %q", err)
	}
	_, err = server.ParseConfig("c.toml", []byte("[server]\nledger_env = \"EMPTY\"\n"), env)
	if err == nil || !strings.Contains(err.Error(), "c.toml:2: environment variable EMPTY (ledger_env) is empty") {
		t.Errorf("empty ledger_env: %v", err)
	}
}

// TestSharedLedgerCommands runs the CLI's commands against a shared ledger
// on PostgreSQL, each invocation a node of its own, as operators use them
// beside a fleet: exec, approve (directly on the shared ledger, as an
// approver principal of the config), the re-drive by another node, ls,
// history, recover and prune. An approval that cannot be signed is
// refused; a cancellation by a name the config does not hold is recorded
// as the database role. Nothing is created in --data's ledger place, a
// reader creates nothing in an empty database, and the connection
// string's password is never shown.
func TestSharedLedgerCommands(t *testing.T) {
	dsn := testenv.NewPostgresDatabase(t)
	a := testApp(t)
	cfg := writeFile(t, t.TempDir(), "connhost.toml", "[[principals]]\nname = \"rita\"\nroles = [\"approver\"]\ntoken = \"tok-rita-0123456789abcdef\"\n")
	run := func(args ...string) (int, string, string) {
		return runCLI(t, a, append([]string{"--json", "--ledger", dsn, "--config", cfg}, args...)...)
	}
	// An empty database holds no ledger: ls says so (exit 6), never an
	// empty list that would read as an all-clear.
	code, out, errOut := run("ls")
	if code != cli.ExitLedgerDamaged || !strings.Contains(out, "there is no ledger in the shared database") || strings.Contains(out, `"executions"`) {
		t.Fatalf("ls on an empty database: %d %q %q", code, out, errOut)
	}
	var tables int
	if err := testenv.QueryDSN(context.Background(), dsn, `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'connhost_%'`, &tables); err != nil || tables != 0 {
		t.Fatalf("ls created %d tables (%v)", tables, err)
	}

	var res host.Result
	decode := func(out string) host.Result {
		t.Helper()
		var r host.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		return r
	}
	if code, out, errOut = run("--node", "n1", "exec", "--session", "s1", "--tool-call", "c1", "--tool", "noop.echo", "--args", `{}`); code != cli.ExitOK {
		t.Fatalf("exec: %d %q %q", code, out, errOut)
	}
	code, out, _ = run("--node", "n1", "exec", "--session", "s1", "--tool-call", "c2", "--tool", "gated.echo", "--args", `{}`)
	if res = decode(out); code != cli.ExitNotSucceeded || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated: %d %q", code, out)
	}
	// The database's credentials alone make no approval: without the
	// config, and as a name the config does not hold, it is refused.
	for _, args := range [][]string{
		{"--json", "--ledger", dsn, "approve", res.Approval.ID, "--by", "rita", "--digest", res.Approval.ArgsDigest},
		{"--json", "--ledger", dsn, "--config", cfg, "approve", res.Approval.ID, "--by", "mallory", "--digest", res.Approval.ArgsDigest},
		{"--json", "--ledger", dsn, "--config", cfg, "approve", res.Approval.ID, "--digest", res.Approval.ArgsDigest},
	} {
		code, out, errOut = runCLI(t, a, args...)
		if code != cli.ExitFailure || !strings.Contains(out, "cannot be signed") {
			t.Errorf("%v: exit %d %q %q", args, code, out, errOut)
		}
	}
	if code, out, errOut = run("--node", "n2", "approve", res.Approval.ID, "--by", "rita", "--digest", res.Approval.ArgsDigest); code != cli.ExitOK {
		t.Fatalf("approve: %d %q %q", code, out, errOut)
	}
	code, out, _ = run("--node", "n3", "exec", "--session", "s1", "--tool-call", "c2", "--tool", "gated.echo", "--args", `{}`)
	if res = decode(out); code != cli.ExitOK || res.Status != host.StatusSucceeded {
		t.Fatalf("re-drive: %d %q", code, out)
	}
	code, out, _ = run("history", res.ExecutionID)
	var view httpapi.Execution
	if err := json.Unmarshal([]byte(out), &view); code != cli.ExitOK || err != nil {
		t.Fatalf("history: %d %q", code, out)
	}
	var actors []string
	for _, ev := range view.Events {
		actors = append(actors, ev.Decision+"@"+ev.Actor)
	}
	// n1 ran twice, each run a new epoch of the node.
	if got, want := strings.Join(actors, " "), "intent@executor@n1#2 approved@rita dispatch@executor@n3#1 outcome@executor@n3#1"; got != want {
		t.Errorf("trail %q, want %q", got, want)
	}
	// A cancellation made on the database directly names what made it.
	code, out, _ = run("--node", "n1", "exec", "--session", "s1", "--tool-call", "c3", "--tool", "gated.echo", "--args", `{}`)
	if res = decode(out); code != cli.ExitNotSucceeded || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated: %d %q", code, out)
	}
	code, out, errOut = run("cancel", res.ExecutionID, "--by", "olga")
	if code != cli.ExitOK || !strings.Contains(errOut, "recorded as db:") {
		t.Fatalf("cancel: %d %q %q", code, out, errOut)
	}
	code, out, _ = run("history", res.ExecutionID)
	if err := json.Unmarshal([]byte(out), &view); code != cli.ExitOK || err != nil || !strings.HasPrefix(view.Events[len(view.Events)-1].Actor, "db:") {
		t.Fatalf("history of the cancelled call: %d %q", code, out)
	}

	// MCP over stdio approves in the client's dialog as [mcp] approver:
	// on the shared ledger only an approver principal can sign that.
	mcpCfg := writeFile(t, t.TempDir(), "mcp.toml", "[mcp]\napprover = \"olga\"\n")
	code, out, errOut = runCLI(t, a, "--ledger", dsn, "--config", mcpCfg, "mcp")
	if code != cli.ExitFailure || !strings.Contains(errOut, `[mcp] approver "olga" on the shared ledger must be a [[principals]] entry with role approver`) {
		t.Errorf("mcp with an approver that cannot sign: exit %d %q %q", code, out, errOut)
	}

	code, out, _ = run("ls", "--state", "succeeded")
	var list httpapi.ListResponse
	if err := json.Unmarshal([]byte(out), &list); code != cli.ExitOK || err != nil || len(list.Executions) != 2 {
		t.Fatalf("ls: %d %q", code, out)
	}
	if code, out, errOut = run("recover"); code != cli.ExitOK || !strings.Contains(out, `"pending": 0`) {
		t.Fatalf("recover: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = run("prune", "--older-than", "1h"); code != cli.ExitOK || !strings.Contains(out, `"pruned": 0`) {
		t.Fatalf("prune: %d %q %q", code, out, errOut)
	}
	// --init starts a new shared ledger only where the witness's is gone
	// or another: this one is healthy.
	if code, out, _ = run("--init", "recover"); code != cli.ExitFailure || !strings.Contains(out, "healthy ledger") {
		t.Errorf("--init with --ledger on a healthy ledger: %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(a.g.data, "ledger")); !os.IsNotExist(err) {
		t.Errorf("a Pebble ledger appeared in --data: %v", err)
	}

	// A connection string with a password is never shown.
	for _, bad := range []string{"postgres://connhost:hunter2@127.0.0.1:1/ledger?connect_timeout=5", "postgres://connhost:hunter2@db:notaport/x"} {
		code, out, errOut = runCLI(t, a, "--ledger", bad, "ls")
		if code == cli.ExitOK || strings.Contains(out+errOut, "hunter2") || !strings.Contains(errOut, "ledger") {
			t.Errorf("--ledger %s: exit %d, stdout %q stderr %q", bad, code, out, errOut)
		}
	}
}

// TestLedgerPasswordOnTheCommandLineWarns: a --ledger connection string
// with a password is readable by every user in the process list; the CLI
// says so (never showing the password), and says nothing for one
// without.
func TestLedgerPasswordOnTheCommandLineWarns(t *testing.T) {
	for dsn, warn := range map[string]bool{
		"postgres://connhost:hunter2@127.0.0.1:1/ledger?connect_timeout=1":          true,
		"postgres://connhost@127.0.0.1:1/ledger?password=hunter2&connect_timeout=1": true,
		"host=127.0.0.1 port=1 user=connhost password=hunter2 connect_timeout=1":    true,
		"postgres://connhost@127.0.0.1:1/ledger?connect_timeout=1":                  false,
	} {
		_, out, errOut := runCLI(t, nil, "--ledger", dsn, "ls")
		want := 0
		if warn {
			want = 1
		}
		if got := strings.Count(errOut, "holds a password"); got != want {
			t.Errorf("%s: %d warnings:\n%s", server.RedactDSN(dsn), got, errOut)
		}
		if warn && !strings.Contains(errOut, "PGPASSWORD") {
			t.Errorf("%s: the warning says not where the password goes:\n%s", server.RedactDSN(dsn), errOut)
		}
		if strings.Contains(out+errOut, "hunter2") {
			t.Errorf("%s: the password was shown:\n%s%s", server.RedactDSN(dsn), out, errOut)
		}
	}
}
