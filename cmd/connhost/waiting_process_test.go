package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/host"
)

// logLine is one line of a server's --json log.
type logLine map[string]any

// nextLog returns the first log line of s whose msg is msg and whose
// fields hold want, failing the test if s ends first or none comes within
// processBound.
func (s *serverProcess) nextLog(t *testing.T, msg string, want map[string]any) logLine {
	t.Helper()
	bound := time.After(processBound)
	for {
		var line string
		select {
		case <-bound:
			s.Kill()
			<-s.Done()
			t.Fatalf("no log line %q %v within %v:\n%s", msg, want, processBound, s.log)
		case l, ok := <-s.logs:
			if !ok {
				t.Fatalf("the server ended without logging %q %v:\n%s", msg, want, s.log)
			}
			line = l
		}
		var l logLine
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range want {
			if l[k] != v {
				ok = false
			}
		}
		if ok {
			return l
		}
	}
}

// scrape returns the body of base's /metrics.
func scrape(t *testing.T, base, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s %s", resp.Status, b)
	}
	return string(b)
}

// TestWaitingAnnounced runs connhost serve as a real process: a call that
// starts to await approval is logged at INFO with its ids, one that
// enters recovery_required and the session it fences at WARN; /metrics
// holds the gauges of what waits. A restarted server says at startup what
// waits, and its gauges hold the same values: they are read from the
// ledger, not counted since the start.
func TestWaitingAnnounced(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it")
	}
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	global := []string{"--data", d.data, "--manifests", mdir, "--modules", d.modules}
	const runtimeTok = "tok-runtime-0123456789"
	const olgaTok = "tok-olga-0123456789"
	cfg := writeFile(t, tmp, "connhost.toml", "[server]\ntoken_env = \"T_RUNTIME\"\n\n[[principals]]\nname = \"olga\"\nroles = [\"operator\"]\ntoken_env = \"T_OLGA\"\n")
	env := cliEnv("T_RUNTIME="+runtimeTok, "T_OLGA="+olgaTok)
	args := append([]string{"--json", "serve", "--config", cfg, "--listen", "127.0.0.1:0"}, global...)

	srv := startServer(t, bin, env, "serving the HTTP API", args...)
	if startup := strings.Join(srv.startup, "\n"); !strings.Contains(startup, `"msg":"nothing waits for a reviewer or an operator"`) {
		t.Errorf("an empty ledger's startup does not say that nothing waits:\n%s", startup)
	}
	si, err := readServerInfo(d.data)
	if err != nil {
		t.Fatal(err)
	}
	var gated, uncertain host.Result
	start := time.Now()
	apiCall(t, si.URL, runtimeTok, "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": "c1", "tool": "gated.echo", "arguments": map[string]string{"msg": "hi"}}, &gated)
	if gated.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated call: %+v", gated)
	}
	l := srv.nextLog(t, "call awaits approval", map[string]any{"execution_id": gated.ExecutionID})
	t.Logf("awaiting_approval → its log line: %v after the call was sent", time.Since(start).Round(time.Millisecond))
	if l["level"] != "INFO" || l["approval_id"] != gated.Approval.ID || l["tool"] != "gated.echo" || l["session_id"] != "s1" {
		t.Errorf("approval line: %v", l)
	}
	apiCall(t, si.URL, runtimeTok, "/v1/executions", map[string]any{"session_id": "s-old", "tool_call_id": "c1", "tool": "noop.echo", "arguments": map[string]string{}, "resumed": true}, &uncertain)
	if uncertain.Status != host.StatusRecoveryRequired {
		t.Fatalf("resumed call: %+v", uncertain)
	}
	if l := srv.nextLog(t, "call needs an operator: recovery_required", map[string]any{"execution_id": uncertain.ExecutionID}); l["level"] != "WARN" ||
		!strings.Contains(l["why"].(string), "resumed_without_record") {
		t.Errorf("recovery line: %v", l)
	}
	if l := srv.nextLog(t, "session fenced: its new calls are refused until an operator resolves its recovery_required calls", map[string]any{"session_id": "s-old"}); l["level"] != "WARN" {
		t.Errorf("fence line: %v", l)
	}
	gauges := []string{
		`connhost_executions_waiting{state="awaiting_approval"} 1`,
		`connhost_executions_waiting{state="recovery_required"} 1`,
		`connhost_sessions_fenced 1`,
	}
	check := func(what, body string) {
		t.Helper()
		for _, g := range gauges {
			if !strings.Contains(body, g+"\n") {
				t.Errorf("%s: /metrics lacks %q", what, g)
			}
		}
	}
	check("running", scrape(t, si.URL, runtimeTok))
	srv.stop(t)

	srv = startServer(t, bin, env, "serving the HTTP API", args...)
	si, err = readServerInfo(d.data)
	if err != nil {
		t.Fatal(err)
	}
	var summary logLine
	startup := strings.Join(srv.startup, "\n")
	for _, line := range srv.startup {
		var l logLine
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "waiting for a human" {
			summary = l
		}
	}
	if summary == nil || summary["level"] != "WARN" || summary["awaiting_approval"] != 1.0 || summary["recovery_required"] != 1.0 || summary["fenced_sessions"] != 1.0 {
		t.Errorf("startup summary %v:\n%s", summary, startup)
	}
	for _, id := range []string{gated.ExecutionID, uncertain.ExecutionID} {
		if !strings.Contains(startup, `"execution_id":"`+id+`"`) {
			t.Errorf("the startup log does not name %s:\n%s", id, startup)
		}
	}
	check("restarted", scrape(t, si.URL, runtimeTok))

	// An operator's resolve frees the session, and the log says so.
	var resolved host.Result
	apiCall(t, si.URL, olgaTok, "/v1/executions/"+uncertain.ExecutionID+"/resolve", map[string]any{"applied": false, "reason": "no trace at the provider"}, &resolved)
	if resolved.Status != host.StatusAbandoned {
		t.Fatalf("resolve: %+v", resolved)
	}
	srv.nextLog(t, "session no longer fenced: it takes new calls again", map[string]any{"session_id": "s-old"})
	if body := scrape(t, si.URL, runtimeTok); !strings.Contains(body, "connhost_sessions_fenced 0\n") || !strings.Contains(body, `connhost_executions_waiting{state="recovery_required"} 0`+"\n") {
		t.Errorf("after the resolve, /metrics still counts it")
	}
	srv.stop(t)
}
