package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// TestTenantsThroughServe serves (in this process) two tenants' runtimes and tenant-a's reviewer bound to their namespaces in
// connhost.toml, and replays tenant-b's attacks on tenant-a through its
// API: listing, reading and cancelling tenant-a's approved call, and
// naming tenant-a's namespace in a call (the way to fence or pre-fence
// its sessions); then the limits of [limits] and of a principal answer
// their codes.
func TestTenantsThroughServe(t *testing.T) {
	const ta, tb, rita = "tok-a-0123456789", "tok-b-0123456789", "tok-rita-0123456789"
	cfg := testConfig(t, newTestDirs(t), `
[limits]
max_pending_approvals = 1

[[principals]]
name = "tenant-a"
roles = ["runtime"]
token_env = "T_A"
namespaces = ["tenant-a"]

[[principals]]
name = "tenant-b"
roles = ["runtime"]
token_env = "T_B"
namespaces = ["tenant-b"]
calls_per_second = 0.01
burst = 4

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"
namespaces = ["tenant-a"]
`, map[string]string{"T_A": ta, "T_B": tb, "T_RITA": rita})
	url, log := serve(t, cfg, Options{})
	if !strings.Contains(log.String(), `msg="principal scope" principal=tenant-b roles=[runtime] namespaces=[tenant-b]`) {
		t.Errorf("the startup log does not say where tenant-b acts:\n%s", log)
	}
	call := func(token, path string, body any) (int, http.Header, []byte) {
		t.Helper()
		method, rd := "GET", io.Reader(nil)
		if body != nil {
			b, _ := json.Marshal(body)
			method, rd = "POST", bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, url+path, rd)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	want := func(what string, status int, code httpapi.Code, got int, body []byte) {
		t.Helper()
		var p httpapi.Problem
		_ = json.Unmarshal(body, &p)
		if got != status || p.Code != code {
			t.Errorf("%s: %d %s, want %d %s: %s", what, got, p.Code, status, code, body)
		}
	}
	req := func(session, id, tool string) map[string]any {
		return map[string]any{"session_id": session, "tool_call_id": id, "tool": tool, "arguments": map[string]string{"msg": "alice@tenant-a.example"}}
	}

	status, _, body := call(ta, "/v1/executions", req("a-s1", "pay-1", "gated.echo"))
	var pay host.Result
	if status != 200 || json.Unmarshal(body, &pay) != nil || pay.Status != host.StatusAwaitingApproval || pay.Namespace != "tenant-a" {
		t.Fatalf("tenant-a's gated call: %d %s", status, body)
	}
	if status, _, body := call(rita, "/v1/approvals/"+pay.Approval.ID+"/approve", map[string]string{"digest": pay.ArgsDigest}); status != 200 {
		t.Fatalf("rita approves: %d %s", status, body)
	}

	status, _, body = call(tb, "/v1/executions", nil)
	if status != 200 || strings.Contains(string(body), "alice") || strings.Contains(string(body), pay.ExecutionID) {
		t.Errorf("tenant-b's listing: %d %s", status, body)
	}
	status, _, body = call(tb, "/v1/executions?namespace=tenant-a", nil)
	want("list tenant-a's namespace", 403, httpapi.CodeNamespaceForbidden, status, body)
	status, _, body = call(tb, "/v1/executions/"+pay.ExecutionID, nil)
	want("get tenant-a's execution", 404, httpapi.CodeNotFound, status, body)
	status, _, body = call(tb, "/v1/executions/"+pay.ExecutionID+"/cancel", map[string]string{})
	want("cancel tenant-a's approved call", 404, httpapi.CodeNotFound, status, body)
	named := req("a-s2", "x", "gated.echo")
	named["namespace"], named["resumed"] = "tenant-a", true
	status, _, body = call(tb, "/v1/executions", named)
	want("pre-fence tenant-a's session", 403, httpapi.CodeNamespaceForbidden, status, body)
	named = req("a-s1", "y", "noop.echo")
	named["namespace"] = "tenant-a"
	status, _, body = call(tb, "/v1/executions", named)
	want("a call in tenant-a's session", 403, httpapi.CodeNamespaceForbidden, status, body)

	status, _, body = call(ta, "/v1/executions", req("a-s1", "pay-1", "gated.echo"))
	if status != 200 || !strings.Contains(string(body), `"status": "succeeded"`) {
		t.Errorf("tenant-a's approved call after the attacks: %d %s", status, body)
	}
	if status, _, body := call(ta, "/v1/executions", req("a-s2", "a-1", "noop.echo")); status != 200 {
		t.Errorf("tenant-a's first call in a-s2: %d %s", status, body)
	}

	// Limits: one pending approval ([limits]), tenant-b's burst of four
	// (its refused calls above named another namespace: they were refused
	// before they counted).
	if status, _, body := call(ta, "/v1/executions", req("a-s1", "pay-2", "gated.echo")); status != 200 {
		t.Fatalf("tenant-a's second gated call: %d %s", status, body)
	}
	status, _, body = call(ta, "/v1/executions", req("a-s1", "pay-3", "gated.echo"))
	want("a pending approval beyond [limits]", 429, httpapi.CodePendingApprovalsLimit, status, body)
	var hdr http.Header
	for i := range 4 {
		status, hdr, body = call(tb, "/v1/executions", req("b-s1", "b-"+string(rune('0'+i)), "noop.echo"))
	}
	if status != 200 {
		t.Fatalf("tenant-b's calls within its burst: %d %s", status, body)
	}
	status, hdr, body = call(tb, "/v1/executions", req("b-s1", "b-9", "noop.echo"))
	want("a call beyond tenant-b's rate", 429, httpapi.CodeRateLimited, status, body)
	if ra := hdr.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q", ra)
	}
}
