//go:build unix

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
)

// fleetTrust is two `connhost serve` nodes on one PostgreSQL ledger,
// sharing a journal of consumed approvals (consumed_dir), with a runtime
// token for every namespace and rita, an approver of namespace tenant-a.
type fleetTrust struct {
	r        *restoreRig
	cfg      string
	apis     []string
	runtime  string
	ritaTok  string
	ritaConf string
}

func newFleetTrust(t *testing.T) *fleetTrust {
	t.Helper()
	r := newRestoreRig(t)
	r.ledger = testenv.NewPostgresDatabase(t)
	ft := &fleetTrust{r: r, runtime: "tok-runtime-0123456789", ritaTok: "tok-rita-0123456789"}
	base, err := os.ReadFile(r.config)
	if err != nil {
		t.Fatal(err)
	}
	principals := "[[principals]]\nname = \"rita\"\nroles = [\"approver\"]\ntoken_env = \"T_RITA\"\nnamespaces = [\"tenant-a\"]\n\n"
	ft.cfg = writeFile(t, r.dir, "fleet.toml", fmt.Sprintf("[server]\ntoken_env = \"T_RUNTIME\"\nnamespaces = [\"*\"]\nconsumed_dir = %q\n\n",
		filepath.Join(r.dir, "shared-consumed"))+principals+string(base))
	// Rita's own file: her entry and token, the connectors' config.
	ft.ritaConf = writeFile(t, r.dir, "rita.toml", principals+string(base))
	for _, node := range []string{"n1", "n2"} {
		data := filepath.Join(r.dir, node)
		startServer(t, r.bin, cliEnv("T_RUNTIME="+ft.runtime, "T_RITA="+ft.ritaTok), "serving the HTTP API",
			"--data", data, "--manifests", r.manifests, "--modules", r.modules, "--config", ft.cfg, "--ledger", r.ledger,
			"serve", "--listen", "127.0.0.1:0", "--node", node)
		si, err := readServerInfo(data)
		if err != nil {
			t.Fatal(err)
		}
		ft.apis = append(ft.apis, si.URL)
	}
	return ft
}

// execute sends effect.apply through node i as the runtime.
func (ft *fleetTrust) execute(t *testing.T, i int, ns, session string) (host.Result, int) {
	t.Helper()
	var res host.Result
	code := apiCall(t, ft.apis[i], ft.runtime, "/v1/executions", map[string]any{"namespace": ns, "session_id": session, "tool_call_id": "c1",
		"tool": "effect.apply", "arguments": map[string]int{"n": 1}}, &res)
	return res, code
}

// TestFleetTrustProcess is issue 37's first two attacks on real `connhost
// serve` nodes, judged at the provider.
//
// Replay: a gated manual call approved with rita's token runs once; its
// approved row, saved with the connection string, is put back after it
// ran and the call sent again, in turn through the other node and the
// same one. Before, the provider counted 1 → 2 → 3 → 4 effects; now 1,
// and the call answers recovery_required (ledger_damaged).
//
// Tenants: rita approves in tenant-a only. `connhost approve … --ledger …
// --by rita --config rita.toml` on tenant-b's call was recorded and
// signed, and a node ran it (1 effect, "approved by rita"); now it is
// refused and the provider sees nothing.
func TestFleetTrustProcess(t *testing.T) {
	ctx := context.Background()
	ft := newFleetTrust(t)

	t.Run("an approved row put back", func(t *testing.T) {
		res, _ := ft.execute(t, 0, "tenant-a", "replay")
		if res.Approval == nil {
			t.Fatalf("the gated call: %+v", res)
		}
		var approved host.Result
		if code := apiCall(t, ft.apis[0], ft.ritaTok, "/v1/approvals/"+res.Approval.ID+"/approve", map[string]string{"digest": res.Approval.ArgsDigest}, &approved); code != http.StatusOK {
			t.Fatalf("rita's approval: %d %+v", code, approved)
		}
		for _, sql := range []string{
			`CREATE TABLE saved AS SELECT * FROM connhost_executions WHERE state = 'approved'`,
			`CREATE TABLE saved_pending AS SELECT p.* FROM connhost_pending p JOIN saved s ON s.id = p.id`,
		} {
			if err := testenv.ExecDSN(ctx, ft.r.ledger, sql); err != nil {
				t.Fatal(err)
			}
		}
		if ran, _ := ft.execute(t, 0, "tenant-a", "replay"); ran.Status != host.StatusSucceeded {
			t.Fatalf("the approved call: %+v", ran)
		}
		for round, node := range []int{1, 0, 1} {
			for _, sql := range []string{
				`UPDATE connhost_executions x SET state = s.state, attempt = s.attempt, events = s.events, terminal_ns = s.terminal_ns,
    owner_node = s.owner_node, owner_epoch = s.owner_epoch, record = s.record, trail = s.trail FROM saved s WHERE x.id = s.id`,
				`DELETE FROM connhost_pending p USING saved s WHERE p.id = s.id`,
				`INSERT INTO connhost_pending SELECT * FROM saved_pending`,
			} {
				if err := testenv.ExecDSN(ctx, ft.r.ledger, sql); err != nil {
					t.Fatal(err)
				}
			}
			again, code := ft.execute(t, node, "tenant-a", "replay")
			n := ft.r.effectsOf(res.ExecutionID)
			t.Logf("round %d through n%d: %d effect(s); %d %s: %s", round+1, node+1, n, code, again.Status, again.Error)
			if n != 1 {
				t.Fatalf("round %d: the call ran again: %d effects at the provider", round+1, n)
			}
			if again.Status != host.StatusRecoveryRequired || !strings.Contains(again.Error, "ledger_damaged") {
				t.Errorf("round %d: answered %d %s %q, want recovery_required (ledger_damaged)", round+1, code, again.Status, again.Error)
			}
		}
	})

	t.Run("a reviewer outside her namespaces", func(t *testing.T) {
		res, _ := ft.execute(t, 0, "tenant-b", "tenants")
		if res.Approval == nil {
			t.Fatalf("the gated call: %+v", res)
		}
		code, out, errOut := runBin(t, ft.r.bin, cliEnv("T_RITA="+ft.ritaTok), "--ledger", ft.r.ledger, "--data", filepath.Join(ft.r.dir, "rita"),
			"--manifests", ft.r.manifests, "--modules", ft.r.modules, "--config", ft.ritaConf,
			"approve", res.Approval.ID, "--digest", res.Approval.ArgsDigest, "--by", "rita")
		t.Logf("approve --ledger --by rita on tenant-b's call: exit %d: %s%s", code, out, errOut)
		if code == cli.ExitOK || !strings.Contains(errOut, `rita reviews the calls of namespace "tenant-a" only`) {
			t.Errorf("approve --ledger --by rita on tenant-b's call: exit %d %q %q", code, out, errOut)
		}
		again, _ := ft.execute(t, 1, "tenant-b", "tenants")
		if n := ft.r.effectsOf(res.ExecutionID); n != 0 || again.Status != host.StatusAwaitingApproval {
			t.Fatalf("tenant-b's call sent again: %s, %d effect(s) at the provider", again.Status, n)
		}
	})
}
