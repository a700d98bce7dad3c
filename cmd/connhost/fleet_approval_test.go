package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
	"github.com/connhost/connhost/server/httpapi"
)

// TestFleetApprovalNeedsAToken runs a fleet node (connhost serve on a
// shared ledger) and plays whoever holds the database's connection string
// but no approver's token. `connhost approve --ledger … --by rita` is
// refused, and an approval by "rita" written into the ledger anyway (with
// the ledger's own API, as the CLI used to) is not dispatched when the
// runtime sends the call again: the node expires it, and the trail names
// no dispatch. Rita's own approval, through the node with her token, is.
func TestFleetApprovalNeedsAToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it")
	}
	dsn := testenv.NewPostgresDatabase(t)
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	global := []string{"--data", d.data, "--manifests", mdir, "--modules", d.modules}
	const runtimeTok, ritaTok = "tok-runtime-0123456789", "tok-rita-0123456789"
	cfg := writeFile(t, tmp, "connhost.toml", `
[server]
token_env = "T_RUNTIME"

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"
`)
	startServer(t, bin, cliEnv("T_RUNTIME="+runtimeTok, "T_RITA="+ritaTok), "serving the HTTP API",
		append([]string{"--json", "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--ledger", dsn, "--node", "n1"}, global...)...)
	si, err := readServerInfo(d.data)
	if err != nil {
		t.Fatal(err)
	}
	execute := func(call string) host.Result {
		t.Helper()
		var res host.Result
		apiCall(t, si.URL, runtimeTok, "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": call, "tool": "gated.echo", "arguments": map[string]string{"msg": call}}, &res)
		return res
	}
	history := func(id string) httpapi.Execution {
		t.Helper()
		var view httpapi.Execution
		apiCall(t, si.URL, runtimeTok, "/v1/executions/"+id, nil, &view)
		return view
	}

	// The database's credentials and a name: refused, nothing recorded.
	c1 := execute("c1")
	if c1.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated call: %+v", c1)
	}
	elsewhere := []string{"--data", filepath.Join(tmp, "elsewhere"), "--manifests", mdir, "--modules", d.modules}
	code, out, errOut := runBin(t, bin, cliEnv(), append([]string{"--ledger", dsn, "approve", c1.Approval.ID, "--by", "rita", "--digest", c1.Approval.ArgsDigest}, elsewhere...)...)
	t.Logf("approve --ledger --by rita: exit %d: %s", code, errOut)
	if code != cli.ExitFailure || !strings.Contains(errOut, "cannot be signed") {
		t.Errorf("approve --ledger --by rita: exit %d %q %q", code, out, errOut)
	}
	if v := history(c1.ExecutionID); v.State != "awaiting_approval" {
		t.Fatalf("the refused approval changed the execution: %s", v.State)
	}

	// The same written with the ledger's API: the node does not run it.
	ctx := context.Background()
	raw, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rec, err := raw.Get(ctx, c1.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	ap := *rec.Approval
	ap.Decision, ap.By = ledger.ApprovalApproved, "rita"
	if _, err := raw.Apply(ctx, rec.ID, ledger.Transition{From: rec.State, To: ledger.StateApproved, Approval: &ap,
		Event: ledger.Event{Actor: "rita", Decision: "approved", Evidence: "digest " + ap.ArgsDigest}}); err != nil {
		t.Fatal(err)
	}
	if res := execute("c1"); res.Status != host.StatusExpired {
		t.Errorf("the re-driven call with a forged approval: %s, want expired", res.Status)
	}
	for _, ev := range history(c1.ExecutionID).Events {
		t.Logf("c1: %s → %s %s by %s: %s %s", ev.From, ev.To, ev.Decision, ev.Actor, ev.Evidence, ev.Reason)
		if ev.Decision == "dispatch" {
			t.Errorf("the forged approval was dispatched: %+v", ev)
		}
	}

	// Rita, with her token, through the node.
	c2 := execute("c2")
	code, out, errOut = runBin(t, bin, cliEnv(DefaultTokenEnv+"="+ritaTok), append([]string{"--json", "approve", c2.Approval.ID, "--digest", c2.Approval.ArgsDigest}, global...)...)
	if code != cli.ExitOK {
		t.Fatalf("approve with rita's token: exit %d %q %q", code, out, errOut)
	}
	if res := execute("c2"); res.Status != host.StatusSucceeded {
		t.Errorf("rita's approval: %s, want succeeded", res.Status)
	}
	var dispatch string
	for _, ev := range history(c2.ExecutionID).Events {
		if ev.Decision == "dispatch" {
			dispatch = ev.Evidence
		}
	}
	if !strings.Contains(dispatch, "by rita, signature verified") {
		b, _ := json.Marshal(history(c2.ExecutionID))
		t.Errorf("dispatch evidence %q: %s", dispatch, b)
	}
}
