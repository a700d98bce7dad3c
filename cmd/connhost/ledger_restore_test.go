//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// restoreManifest declares the effect test connector's apply as a gated
// manual operation and plain as an ungated one (module digest and provider
// URL to fill in): neither is ever run again automatically, so a call the
// provider sees twice ran twice.
const restoreManifest = `
[connector]
name = "effect"
version = "1.0.0"
abi = 1
module = "effect.wasm"
sha256 = "%s"

[capabilities]
http = ["%s"]
config = ["base_url"]

[[operation]]
name = "apply"
description = "Apply one countable effect once a reviewer approved it."
effect = "external"
recovery = "manual"
requires_approval = true
max_attempts = 1
input_schema = '''{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}'''

[[operation]]
name = "plain"
description = "Apply one countable effect."
effect = "external"
recovery = "manual"
requires_approval = false
max_attempts = 1
input_schema = '''{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}'''
`

// restoreRig is a connhost binary, the effect connector and a provider
// that counts the requests of each execution.
type restoreRig struct {
	bin, manifests, modules string
	config                  string
	mu                      sync.Mutex
	effects                 map[string]int // per execution id
	ledger                  string         // --ledger, or "" for Pebble
	dir                     string
}

func newRestoreRig(t *testing.T) *restoreRig {
	t.Helper()
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	r := &restoreRig{dir: t.TempDir(), effects: map[string]int{}}
	r.bin = filepath.Join(r.dir, "connhost")
	build := exec.Command("go", "build", "-o", r.bin, "./cmd/connhost")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.effects[req.Header.Get("X-Execution-Id")]++
		n := len(r.effects)
		r.mu.Unlock()
		w.Header().Set("X-Receipt", fmt.Sprint("r", n))
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(prov.Close)
	wasm, digest, err := wasmbuild.Cached(context.Background(), "devkit/testing/testconnectors/effect")
	if err != nil {
		t.Fatal(err)
	}
	r.modules, r.manifests = filepath.Join(r.dir, "modules"), filepath.Join(r.dir, "manifests")
	for _, d := range []string{r.modules, r.manifests} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyTo(t, wasm, filepath.Join(r.modules, "effect.wasm"))
	writeFile(t, r.manifests, "effect.toml", fmt.Sprintf(restoreManifest, digest, prov.URL))
	r.config = writeFile(t, r.dir, "connhost.toml", fmt.Sprintf("[connectors.effect]\nbase_url = %q\nallow_http = [%q]\n", prov.URL, prov.URL))
	return r
}

// effectsOf is how often the provider saw the execution's requests.
func (r *restoreRig) effectsOf(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.effects[id]
}

func (r *restoreRig) global(data string) []string {
	args := []string{"--data", data, "--manifests", r.manifests, "--modules", r.modules, "--config", r.config}
	if r.ledger != "" {
		args = append(args, "--ledger", r.ledger)
	}
	return args
}

func (r *restoreRig) devArgs(data string) []string {
	return append(r.global(data), "--json", "dev", "--listen", "127.0.0.1:0", "--email-url", "http://127.0.0.1:9", "--payments-url", "http://127.0.0.1:9")
}

// call is one tool call of the runtime, as exec and the API send it.
type call struct{ session, id, tool string }

func (c call) args() []string {
	return []string{"--session", c.session, "--tool-call", c.id, "--tool", c.tool, "--args", `{"n":1}`}
}

func (c call) body() string {
	return fmt.Sprintf(`{"session_id":%q,"tool_call_id":%q,"tool":%q,"arguments":{"n":1}}`, c.session, c.id, c.tool)
}

// result is the part of an execution the test reads.
type result struct {
	Status      string
	ExecutionID string `json:"execution_id"`
	Approval    *struct {
		ID         string
		ArgsDigest string `json:"args_digest"`
	}
}

func postJSON(t *testing.T, url, body string) result {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var res result
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &res) != nil {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return res
}

// runCall sends c through dev's API; a gated call is approved through it and
// sent again.
func runCall(t *testing.T, api string, c call) result {
	t.Helper()
	res := postJSON(t, api+"/v1/executions", c.body())
	if res.Status == "awaiting_approval" {
		postJSON(t, api+"/v1/approvals/"+res.Approval.ID+"/approve", fmt.Sprintf(`{"digest":%q}`, res.Approval.ArgsDigest))
		res = postJSON(t, api+"/v1/executions", c.body())
	}
	if res.Status != "succeeded" {
		t.Fatalf("%+v: %s", c, res.Status)
	}
	return res
}

// waitWitness waits until the witness of data has recorded more than
// after (the writes so far are covered) and returns its position.
func waitWitness(t *testing.T, path string, after uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(processBound)
	for {
		var w struct{ Position uint64 }
		b, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(b, &w) == nil && w.Position > after {
			return w.Position
		}
		if time.Now().After(deadline) {
			t.Fatalf("witness %s: %q (%v), want position > %d", path, b, err, after)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func witnessPosition(t *testing.T, path string) uint64 {
	t.Helper()
	var w struct{ Position uint64 }
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &w) != nil {
		t.Fatalf("witness %s: %q (%v)", path, b, err)
	}
	return w.Position
}

// refused checks that dev (--json: the problem on stdout) and the runtime
// sending c again with exec each exit 6 with a message that says what and
// names the remedy, and returns dev's problem detail. A dev that starts
// instead is sent c, as the runtime would, and the test fails with what
// the provider saw.
func (r *restoreRig) refused(t *testing.T, data string, c call, says ...string) string {
	t.Helper()
	p, err := proc.Start(proc.Cmd{Path: r.bin, Args: r.devArgs(data), DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), processBound)
	defer cancel()
	var started struct{ API string }
	if p.DecodeLine(ctx, &started) == nil && started.API != "" {
		res := postJSON(t, started.API+"/v1/executions", c.body())
		t.Fatalf("dev started on the ledger as it was found; the runtime sent %+v again: %s, and the provider has now seen %d request(s) of it",
			c, res.Status, r.effectsOf(res.ExecutionID))
	}
	res, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var prob struct{ Code, Detail string }
	if res.Code != ExitLedgerDamaged || json.Unmarshal(res.Stdout, &prob) != nil || prob.Code != "ledger_damaged" {
		t.Fatalf("dev: exit %d, want %d; stdout %q, stderr %s", res.Code, ExitLedgerDamaged, res.Stdout, res.Stderr)
	}
	for _, s := range append(says, "--init") {
		if !strings.Contains(prob.Detail, s) {
			t.Errorf("detail %q does not say %q", prob.Detail, s)
		}
	}
	if strings.Contains(prob.Detail, "remove") && strings.Contains(prob.Detail, "to accept") {
		t.Errorf("detail %q recommends using the restored ledger as it is", prob.Detail)
	}
	run := runConnhost(t, r.bin, append(append(r.global(data), "exec"), c.args()...)...)
	if run.code != ExitLedgerDamaged || !strings.Contains(run.stderr, "code: ledger_damaged") {
		t.Fatalf("exec %+v again: exit %d, stdout %q, stderr %q", c, run.code, run.stdout, run.stderr)
	}
	return prob.Detail
}

// acceptRestore runs connhost ledger accept-restore and returns its report.
func (r *restoreRig) acceptRestore(t *testing.T, data string, extra ...string) (execs, sessions []string) {
	t.Helper()
	res := runConnhost(t, r.bin, append(append(r.global(data), "--json", "ledger", "accept-restore", "--by", "ops", "--reason", "restored the backup"), extra...)...)
	var rep struct {
		Accepted   bool
		Executions []struct {
			ID string `json:"execution_id"`
		}
		Sessions []struct {
			SessionID string `json:"session_id"`
		}
	}
	if res.code != ExitOK || json.Unmarshal([]byte(res.stdout), &rep) != nil || !rep.Accepted {
		t.Fatalf("accept-restore: exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
	}
	for _, e := range rep.Executions {
		execs = append(execs, e.ID)
	}
	for _, s := range rep.Sessions {
		sessions = append(sessions, s.SessionID)
	}
	return execs, sessions
}

// resent sends c again with exec and wants exit code want.
func (r *restoreRig) resent(t *testing.T, data string, c call, want int, says string) {
	t.Helper()
	res := runConnhost(t, r.bin, append(append(r.global(data), "exec"), c.args()...)...)
	if res.code != want || !strings.Contains(res.stdout+res.stderr, says) {
		t.Fatalf("exec %+v again: exit %d (want %d, saying %q); stdout %q, stderr %q", c, res.code, want, says, res.stdout, res.stderr)
	}
}

// TestRestoredDataDirProcess is issue 20's Pebble rollback with real
// processes: `connhost dev` records a gated manual call as approved, is
// killed, and the whole data directory (ledger and mark) is copied; dev
// runs the call (one effect at the provider) and, in another session, a
// call the copy will never hear of; dev is killed and the copy restored.
// Before the witness, dev started on the copy and the runtime's resent
// call ran a second time. Now dev and exec refuse it (exit 6, naming the
// witness and accept-restore), accept-restore fences the approved call
// and both sessions, and the resent calls are answered recovery_required
// and session_fenced: the provider sees each call once.
func TestRestoredDataDirProcess(t *testing.T) {
	r := newRestoreRig(t)
	data := filepath.Join(r.dir, "data")
	witness := data + ".witness"
	pay, other := call{"s1", "call_1", "effect.apply"}, call{"s2", "call_9", "effect.plain"}

	dev, api := startDamagedDev(t, r.bin, r.devArgs(data))
	res := postJSON(t, api+"/v1/executions", pay.body())
	if res.Status != "awaiting_approval" {
		t.Fatalf("gated call: %s", res.Status)
	}
	postJSON(t, api+"/v1/approvals/"+res.Approval.ID+"/approve", fmt.Sprintf(`{"digest":%q}`, res.Approval.ArgsDigest))
	waitMark(t, filepath.Join(data, "ledger.mark"), 2)
	waitWitness(t, witness, 1)
	dev.Kill()
	backup := filepath.Join(r.dir, "backup")
	if err := os.CopyFS(backup, os.DirFS(data)); err != nil {
		t.Fatal(err)
	}

	dev, api = startDamagedDev(t, r.bin, r.devArgs(data))
	id := runCall(t, api, pay).ExecutionID
	otherID := runCall(t, api, other).ExecutionID
	waitWitness(t, witness, 2+2+2-1) // intent, approval; dispatch, outcome; other's two
	dev.Kill()
	if n := r.effectsOf(id); n != 1 {
		t.Fatalf("the provider saw %d requests of %s before the restore", n, id)
	}

	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(data, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	r.refused(t, data, pay, "behind its witness "+witness, "accept-restore")
	if n := r.effectsOf(id); n != 1 {
		t.Fatalf("the approved call ran again: the provider saw %d requests of it", n)
	}

	execs, sessions := r.acceptRestore(t, data)
	if strings.Join(execs, " ") != id {
		t.Errorf("fenced executions %v, want [%s]", execs, id)
	}
	if strings.Join(sessions, " ") != "s1 s2" && strings.Join(sessions, " ") != "s2 s1" {
		t.Errorf("fenced sessions %v, want s1 and s2", sessions)
	}
	r.resent(t, data, pay, ExitRecoveryRequired, "recovery_required")
	r.resent(t, data, other, ExitRecoveryRequired, "session_fenced")
	if n, m := r.effectsOf(id), r.effectsOf(otherID); n != 1 || m != 1 {
		t.Fatalf("after accept-restore the provider saw %d and %d requests of the two calls, want 1 each", n, m)
	}
	// The copy is older than the acceptance: refused again.
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(data, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	r.refused(t, data, pay, "generation")
}

// TestBackupWhileServingProcess: `connhost ledger backup` asks a running
// dev for a copy of its ledger while a gated manual call waits approved;
// dev then runs it (one effect) and a call of another session, and stops.
// `connhost ledger restore` puts the copy back: the witness accepts it
// (dev starts), the approved call is recovery_required and the other
// session fenced, and neither runs again: the provider sees each once.
func TestBackupWhileServingProcess(t *testing.T) {
	r := newRestoreRig(t)
	data := filepath.Join(r.dir, "data")
	pay, other := call{"s1", "call_1", "effect.apply"}, call{"s2", "call_9", "effect.plain"}

	dev, api := startDamagedDev(t, r.bin, r.devArgs(data))
	res := postJSON(t, api+"/v1/executions", pay.body())
	if res.Status != "awaiting_approval" {
		t.Fatalf("gated call: %s", res.Status)
	}
	postJSON(t, api+"/v1/approvals/"+res.Approval.ID+"/approve", fmt.Sprintf(`{"digest":%q}`, res.Approval.ArgsDigest))
	backup := filepath.Join(r.dir, "backup-1")
	b := runConnhost(t, r.bin, append(r.global(data), "--json", "ledger", "backup", backup)...)
	var info struct {
		Dir      string
		Position uint64
	}
	if b.code != ExitOK || json.Unmarshal([]byte(b.stdout), &info) != nil || info.Dir != backup || info.Position == 0 {
		t.Fatalf("ledger backup while dev runs: exit %d, stdout %q, stderr %s", b.code, b.stdout, b.stderr)
	}
	id := runCall(t, api, pay).ExecutionID
	otherID := runCall(t, api, other).ExecutionID
	// The witness sees the writes within its interval (about a second):
	// what it has not seen when the process dies cannot be named (the
	// trust section says so).
	waitWitness(t, data+".witness", info.Position+4-1) // pay: dispatch, outcome; other: two
	dev.Kill()
	if n := r.effectsOf(id); n != 1 {
		t.Fatalf("the provider saw %d requests of %s before the restore", n, id)
	}

	rs := runConnhost(t, r.bin, append(r.global(data), "--json", "ledger", "restore", backup, "--by", "ops", "--reason", "the disk failed")...)
	if rs.code != ExitOK || !strings.Contains(rs.stdout, id) || !strings.Contains(rs.stdout, `"s2"`) {
		t.Fatalf("ledger restore: exit %d, stdout %q, stderr %s", rs.code, rs.stdout, rs.stderr)
	}
	dev, api = startDamagedDev(t, r.bin, r.devArgs(data))
	for _, c := range []struct {
		call
		want string
	}{{pay, "recovery_required"}, {other, "session_fenced"}} {
		resp, err := http.Post(api+"/v1/executions", "application/json", strings.NewReader(c.body()))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), c.want) {
			t.Errorf("%+v sent again after the restore: %d %s, want %s", c.call, resp.StatusCode, body, c.want)
		}
	}
	dev.Kill()
	if n, m := r.effectsOf(id), r.effectsOf(otherID); n != 1 || m != 1 {
		t.Fatalf("after the restore the provider saw %d and %d requests of the two calls, want 1 each", n, m)
	}
}

// TestDeletedDataDirProcess: `rm -rf data` under a stopped dev. Before the
// witness, dev started a fresh ledger without a word and the runtime's
// resent call ran again; now dev and exec refuse (exit 6), and --init
// starts a new ledger deliberately, setting the witness aside.
func TestDeletedDataDirProcess(t *testing.T) {
	r := newRestoreRig(t)
	data := filepath.Join(r.dir, "data")
	c := call{"s1", "call_1", "effect.plain"}
	dev, api := startDamagedDev(t, r.bin, r.devArgs(data))
	id := runCall(t, api, c).ExecutionID
	waitWitness(t, data+".witness", 1)
	dev.Kill()

	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	r.refused(t, data, c, "is missing, and so is its mark", "witness "+data+".witness")
	if n := r.effectsOf(id); n != 1 {
		t.Fatalf("the call ran again: %d requests", n)
	}
	if _, err := os.Stat(filepath.Join(data, "ledger")); !os.IsNotExist(err) {
		t.Fatalf("a ledger was created: %v", err)
	}
	res := runConnhost(t, r.bin, append(r.global(data), "--init", "ls")...)
	if res.code != ExitOK || !strings.Contains(res.stdout, "no executions") {
		t.Fatalf("--init ls: exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
	}
	if aside, _ := filepath.Glob(data + ".witness.aside-*"); len(aside) != 1 {
		t.Fatalf("old witness not kept aside: %v", aside)
	}
}

// TestSharedLedgerRollbackProcess is issue 20's PostgreSQL attacks with
// real processes (`connhost dev --ledger`, a node of a fleet with its
// witness beside --data) on the test cluster: the tables truncated, an
// older pg_dump restored, every table dropped. Before the witness, dev
// started on each, the schema dropped was re-created with an INFO line,
// and the runtime's resent manual call ran a second time; now dev and exec
// refuse (exit 6) and the provider sees each call once. A node that is
// running when the tables are emptied refuses the call sent again once it
// has seen the rollback (within its witness interval).
func TestSharedLedgerRollbackProcess(t *testing.T) {
	ctx := context.Background()
	r := newRestoreRig(t)
	tables := func(t *testing.T, dsn string) int {
		t.Helper()
		var n int
		if err := testenv.QueryDSN(ctx, dsn, `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'connhost_%'`, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// ran runs c through a dev on a fresh database and data directory and
	// stops it (SIGKILL) once its witness covers the call.
	ran := func(t *testing.T, name string, c call) (data, id string) {
		r.ledger = testenv.NewPostgresDatabase(t)
		data = filepath.Join(r.dir, name)
		dev, api := startDamagedDev(t, r.bin, r.devArgs(data))
		id = runCall(t, api, c).ExecutionID
		waitProbe(t, data+".witness", id, 2) // dispatch, outcome
		dev.Kill()
		return data, id
	}

	// Each case has sessions of its own: the provider counts by execution
	// id, which (session, tool call) derive.
	t.Run("tables truncated", func(t *testing.T) {
		c := call{"truncated", "call_1", "effect.plain"}
		data, id := ran(t, "truncated", c)
		if err := testenv.ExecDSN(ctx, r.ledger, `TRUNCATE connhost_executions, connhost_pending, connhost_sessions`); err != nil {
			t.Fatal(err)
		}
		r.refused(t, data, c, "behind its witness", "is missing", "accept-restore")
		if n := r.effectsOf(id); n != 1 {
			t.Fatalf("the succeeded call ran again: %d requests", n)
		}
	})

	t.Run("tables truncated under a running node", func(t *testing.T) {
		c := call{"running", "call_1", "effect.plain"}
		r.ledger = testenv.NewPostgresDatabase(t)
		data := filepath.Join(r.dir, "running")
		dev, api := startDamagedDev(t, r.bin, r.devArgs(data))
		id := runCall(t, api, c).ExecutionID
		waitProbe(t, data+".witness", id, 2)
		if err := testenv.ExecDSN(ctx, r.ledger, `TRUNCATE connhost_executions, connhost_pending, connhost_sessions`); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(processBound)
		for !strings.Contains(string(dev.Stderr()), "is not what this node acknowledged") {
			if time.Now().After(deadline) {
				t.Fatalf("the node did not see the rollback; stderr:\n%s", dev.Stderr())
			}
			time.Sleep(20 * time.Millisecond)
		}
		resp, err := http.Post(api+"/v1/executions", "application/json", strings.NewReader(c.body()))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("the call sent again after the rollback was answered %d, and the provider has seen %d request(s) of it: %s", resp.StatusCode, r.effectsOf(id), b)
		}
		if n := r.effectsOf(id); n != 1 {
			t.Fatalf("the succeeded call ran again under the running node: %d requests", n)
		}
		dev.Kill()
	})

	t.Run("older dump restored", func(t *testing.T) {
		pay := call{"dumped", "call_1", "effect.apply"}
		r.ledger = testenv.NewPostgresDatabase(t)
		data := filepath.Join(r.dir, "dumped")
		witness := data + ".witness"
		// On a shared ledger a gated call runs only on an approval signed
		// with an approver's token: serve with rita's, not dev (whose
		// dev-loopback cannot sign).
		const runtimeTok, ritaTok = "tok-runtime-0123456789", "tok-rita-0123456789"
		base, err := os.ReadFile(r.config)
		if err != nil {
			t.Fatal(err)
		}
		cfg := writeFile(t, r.dir, "serve.toml", "[server]\ntoken_env = \"T_RUNTIME\"\n\n[[principals]]\nname = \"rita\"\nroles = [\"approver\"]\ntoken_env = \"T_RITA\"\n\n"+string(base))
		serve := func() (*serverProcess, string) {
			s := startServer(t, r.bin, cliEnv("T_RUNTIME="+runtimeTok, "T_RITA="+ritaTok), "serving the HTTP API",
				"--data", data, "--manifests", r.manifests, "--modules", r.modules, "--config", cfg, "--ledger", r.ledger,
				"serve", "--listen", "127.0.0.1:0", "--node", "n1")
			si, err := readServerInfo(data)
			if err != nil {
				t.Fatal(err)
			}
			return s, si.URL
		}
		execute := func(api string) host.Result {
			var res host.Result
			apiCall(t, api, runtimeTok, "/v1/executions", map[string]any{"session_id": pay.session, "tool_call_id": pay.id, "tool": pay.tool, "arguments": map[string]int{"n": 1}}, &res)
			return res
		}
		srv, api := serve()
		res := execute(api)
		if res.Approval == nil {
			t.Fatalf("the gated call: %+v", res)
		}
		var approved host.Result
		apiCall(t, api, ritaTok, "/v1/approvals/"+res.Approval.ID+"/approve", map[string]string{"digest": res.Approval.ArgsDigest}, &approved)
		waitProbe(t, witness, res.ExecutionID, 2) // intent, approval
		srv.Kill()
		dump, err := testenv.DumpDSN(ctx, r.ledger)
		if err != nil {
			t.Fatal(err)
		}
		srv, api = serve()
		ran := execute(api)
		if ran.Status != host.StatusSucceeded {
			t.Fatalf("the approved call sent again: %+v", ran)
		}
		id := ran.ExecutionID
		waitProbe(t, witness, id, 4) // dispatch, outcome
		srv.Kill()
		if err := testenv.RestoreDSN(ctx, r.ledger, dump); err != nil {
			t.Fatal(err)
		}
		r.refused(t, data, pay, "behind its witness", "commit position", "accept-restore")
		if n := r.effectsOf(id); n != 1 {
			t.Fatalf("the approved call ran again: %d requests", n)
		}
		execs, _ := r.acceptRestore(t, data)
		if strings.Join(execs, " ") != id {
			t.Errorf("fenced executions %v, want [%s]", execs, id)
		}
		r.resent(t, data, pay, ExitRecoveryRequired, "recovery_required")
		if n := r.effectsOf(id); n != 1 {
			t.Fatalf("after accept-restore the approved call ran again: %d requests", n)
		}
	})

	t.Run("tables dropped", func(t *testing.T) {
		c := call{"dropped", "call_1", "effect.plain"}
		data, id := ran(t, "dropped", c)
		if err := testenv.ExecDSN(ctx, r.ledger, `DROP TABLE IF EXISTS connhost_executions, connhost_pending, connhost_sessions, connhost_nodes,
connhost_ledger, connhost_restores, connhost_intent_locks, connhost_console_sessions, connhost_schema_migrations`); err != nil {
			t.Fatal(err)
		}
		r.refused(t, data, c, "holds no connhost ledger", "witness "+data+".witness")
		if n := tables(t, r.ledger); n != 0 {
			t.Fatalf("the schema was created again (%d tables)", n)
		}
		if n := r.effectsOf(id); n != 1 {
			t.Fatalf("the call ran again: %d requests", n)
		}
		res := runConnhost(t, r.bin, append(r.global(data), "--init", "ls")...)
		if res.code != ExitOK || tables(t, r.ledger) == 0 {
			t.Fatalf("--init ls: exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
		}
	})
}

// waitProbe waits until the witness at path (a shared ledger's) has
// recorded execution id with at least events events: the commit position
// it holds follows that write.
func waitProbe(t *testing.T, path, id string, events uint64) {
	t.Helper()
	deadline := time.Now().Add(processBound)
	for {
		var w struct {
			Probe *struct {
				ID     string
				Events uint64
			}
		}
		b, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(b, &w) == nil && w.Probe != nil && w.Probe.ID == id && w.Probe.Events >= events {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("witness %s: %q (%v), want the probe %s at %d events", path, b, err, id, events)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
