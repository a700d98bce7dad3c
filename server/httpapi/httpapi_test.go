package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// TestExecuteStatuses proves that every execution status is a 200 answer
// carrying a Result, and that a replayed call answers from the ledger.
func TestExecuteStatuses(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}

	res := c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{"msg":"hi"}`)).result(t)
	if res.Status != host.StatusSucceeded || compact(res.Result) != `{"msg":"hi"}` || res.Attempt != 1 || res.Recorded {
		t.Fatalf("echo: %+v", res)
	}
	again := c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{"msg":"hi"}`)).result(t)
	if again.Status != host.StatusSucceeded || !again.Recorded || again.ExecutionID != res.ExecutionID {
		t.Fatalf("replay: %+v", again)
	}

	// The listed name maps back to connector.operation, and so does the
	// "__" form the OpenAI and Anthropic definitions used before.
	keyed := c.post("/v1/executions", execReq("s1", "c2", "noop_keyed", `{}`)).result(t)
	if keyed.Status != host.StatusSucceeded || keyed.Receipt == "" || keyed.Tool != "noop.keyed" {
		t.Fatalf("keyed: %+v", keyed)
	}
	old := c.post("/v1/executions", execReq("s1", "c2", "noop__keyed", `{}`)).result(t)
	if old.ExecutionID != keyed.ExecutionID || !old.Recorded {
		t.Fatalf("keyed by the old name: %+v", old)
	}

	gated := c.post("/v1/executions", execReq("s1", "c3", "gated.echo", `{"msg":"pay"}`)).result(t)
	if gated.Status != host.StatusAwaitingApproval || gated.Approval == nil || gated.Approval.ArgsDigest == "" {
		t.Fatalf("gated: %+v", gated)
	}

	failed := c.post("/v1/executions", execReq("s1", "c4", "probe.config", `{"Key": 5}`)).result(t)
	if failed.Status != host.StatusFailed || failed.Error == "" {
		t.Fatalf("failed: %+v", failed)
	}

	resumed := execReq("old-session", "c1", "noop.echo", `{}`)
	resumed["resumed"] = true
	rr := c.post("/v1/executions", resumed).result(t)
	if rr.Status != host.StatusRecoveryRequired || rr.Error == "" {
		t.Fatalf("resumed: %+v", rr)
	}
}

// TestProblems covers the refusals that need no prior state: each answers
// application/problem+json with its stable code and status.
func TestProblems(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	tests := []struct {
		name   string
		method string
		path   string
		ctype  string
		body   string
		code   Code
	}{
		{"malformed json", "POST", "/v1/executions", "application/json", `{"session_id":`, CodeBadRequest},
		{"unknown field", "POST", "/v1/executions", "application/json", `{"session_id":"s","tool_call_id":"c","tool":"noop.echo","arguments":{},"idempotency_key":"x"}`, CodeBadRequest},
		{"missing fields", "POST", "/v1/executions", "application/json", `{"tool":"noop.echo"}`, CodeBadRequest},
		{"missing arguments", "POST", "/v1/executions", "application/json", `{"session_id":"s","tool_call_id":"c","tool":"noop.echo"}`, CodeBadRequest},
		{"trailing data", "POST", "/v1/executions", "application/json", `{"session_id":"s","tool_call_id":"c","tool":"noop.echo","arguments":{}} {}`, CodeBadRequest},
		{"arguments not an object", "POST", "/v1/executions", "application/json", `{"session_id":"s","tool_call_id":"c","tool":"noop.echo","arguments":[1]}`, CodeInvalidArguments},
		{"arguments fail schema", "POST", "/v1/executions", "application/json", `{"session_id":"s","tool_call_id":"c","tool":"noop.echo","arguments":{"msg":3}}`, CodeInvalidArguments},
		{"unknown tool", "POST", "/v1/executions", "application/json", `{"session_id":"s","tool_call_id":"c","tool":"nope.echo","arguments":{}}`, CodeUnknownTool},
		{"not json content type", "POST", "/v1/executions", "text/plain", `{"session_id":"s","tool_call_id":"c","tool":"noop.echo","arguments":{}}`, CodeUnsupportedMediaType},
		{"unknown execution", "GET", "/v1/executions/ex_nope", "", "", CodeNotFound},
		{"unknown approval", "POST", "/v1/approvals/ap_nope/approve", "application/json", `{"by":"r","digest":"d"}`, CodeNotFound},
		{"approval id not an approval", "POST", "/v1/approvals/xyz/reject", "application/json", `{"by":"r"}`, CodeNotFound},
		{"approve without digest", "POST", "/v1/approvals/ap_x/approve", "application/json", `{"by":"r"}`, CodeBadRequest},
		{"resolve without applied", "POST", "/v1/executions/ex_x/resolve", "application/json", `{"by":"o","reason":"r"}`, CodeBadRequest},
		{"resolve unknown", "POST", "/v1/executions/ex_x/resolve", "application/json", `{"applied":false,"by":"o","reason":"r"}`, CodeNotFound},
		{"cancel unknown", "POST", "/v1/executions/ex_x/cancel", "application/json", `{}`, CodeNotFound},
		{"resolve without reason", "POST", "/v1/executions/ex_x/resolve", "application/json", `{"applied":false}`, CodeBadRequest},
		{"list bad state", "GET", "/v1/executions?state=done", "", "", CodeBadRequest},
		{"list bad limit", "GET", "/v1/executions?limit=0", "", "", CodeBadRequest},
		{"list unknown parameter", "GET", "/v1/executions?sesion_id=x", "", "", CodeBadRequest},
		{"tools bad format", "GET", "/v1/tools?format=gemini", "", "", CodeBadRequest},
		{"method not allowed", "GET", "/v1/recover", "", "", CodeMethodNotAllowed},
		{"method not allowed on item", "DELETE", "/v1/executions/ex_x", "", "", CodeMethodNotAllowed},
		{"no route", "GET", "/v2/anything", "", "", CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			r := c.do(tt.method, tt.path, tt.ctype, []byte(tt.body))
			p := r.problem(t, tt.code)
			if tt.code == CodeMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Errorf("405 without Allow header")
			}
			if tt.code == CodeInvalidArguments && tt.name == "arguments fail schema" && len(p.ArgumentErrors) == 0 {
				t.Errorf("invalid_arguments without argument_errors: %s", r.body)
			}
		})
	}
	// None of the refused calls was recorded.
	var list ListResponse
	c.t = t
	c.get("/v1/executions").decode(t, &list)
	if len(list.Executions) != 0 {
		t.Fatalf("refused calls were recorded: %+v", list.Executions)
	}
}

func TestOversizedBodyRecordsNothing(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{MaxBodyBytes: 1024}).URL}
	big := `{"msg":"` + strings.Repeat("x", 2048) + `"}`
	c.post("/v1/executions", execReq("s1", "c1", "noop.echo", big)).problem(t, CodePayloadTooLarge)

	var list ListResponse
	c.get("/v1/executions").decode(t, &list)
	if len(list.Executions) != 0 {
		t.Fatalf("oversized call was recorded: %+v", list.Executions)
	}
	// A call under the cap goes through.
	c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{"msg":"small"}`)).result(t)
}

func TestAuth(t *testing.T) {
	env := newTestExecutor(t)
	srv := env.serve(t, Options{Principals: []Principal{{Name: "agent", Roles: []Role{RoleRuntime}, Token: "s3cret"}}})
	anon := client{t: t, base: srv.URL}
	wrong := client{t: t, base: srv.URL, token: "s3cret2"}
	good := client{t: t, base: srv.URL, token: "s3cret"}

	for _, path := range []string{"/v1/executions", "/v1/tools", "/metrics", "/v2/nothing"} {
		r := anon.get(path)
		r.problem(t, CodeUnauthorized)
		if r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", path)
		}
		wrong.get(path).problem(t, CodeUnauthorized)
	}
	anon.post("/v1/executions", execReq("s", "c", "noop.echo", `{}`)).problem(t, CodeUnauthorized)
	if r := anon.get("/healthz"); r.status != http.StatusOK {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	good.post("/v1/executions", execReq("s", "c", "noop.echo", `{}`)).result(t)
	if r := good.get("/v1/tools"); r.status != http.StatusOK {
		t.Fatalf("tools with token: %d %s", r.status, r.body)
	}
}

// TestAuthSchemeCaseInsensitive: the auth scheme is case-insensitive
// (RFC 9110 §11.1); the token itself is not.
func TestAuthSchemeCaseInsensitive(t *testing.T) {
	env := newTestExecutor(t)
	srv := env.serve(t, Options{Principals: []Principal{{Name: "agent", Roles: []Role{RoleRuntime}, Token: "s3cret"}}})
	for _, tc := range []struct {
		header string
		status int
	}{
		{"Bearer s3cret", http.StatusOK},
		{"bearer s3cret", http.StatusOK},
		{"BEARER s3cret", http.StatusOK},
		{"bEaReR s3cret", http.StatusOK},
		{"bearer S3CRET", http.StatusUnauthorized},
		{"Basic s3cret", http.StatusUnauthorized},
		{"Bearers3cret", http.StatusUnauthorized},
		{"bearer", http.StatusUnauthorized},
	} {
		req, err := http.NewRequest("GET", srv.URL+"/v1/tools", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", tc.header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("Authorization %q: status %d, want %d", tc.header, resp.StatusCode, tc.status)
		}
	}
}

// TestHostCheck: without a token only loopback Host headers are served.
func TestHostCheck(t *testing.T) {
	env := newTestExecutor(t)
	srv := env.serve(t, Options{})
	req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
	req.Host = "attacker.example:8420"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
	for _, h := range []string{"localhost:1", "127.0.0.1:8420", "[::1]:8420", "LOCALHOST"} {
		if !loopbackHost(h) {
			t.Errorf("loopbackHost(%q) = false", h)
		}
	}
	for _, h := range []string{"example.com", "10.0.0.1:80", "localhost.example.com"} {
		if loopbackHost(h) {
			t.Errorf("loopbackHost(%q) = true", h)
		}
	}
}

func TestApprovalRoundTrip(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	call := execReq("s1", "c1", "gated.echo", `{"msg":"pay"}`)
	res := c.post("/v1/executions", call).result(t)
	if res.Status != host.StatusAwaitingApproval {
		t.Fatalf("%+v", res)
	}
	ap := res.Approval

	p := c.post("/v1/approvals/"+ap.ID+"/approve", DecisionRequest{By: "rita", Digest: strings.Repeat("0", 64)}).problem(t, CodeApprovalDigestMismatch)
	if p.Execution == nil || p.Execution.Status != host.StatusAwaitingApproval {
		t.Errorf("digest mismatch problem should carry the execution: %+v", p)
	}
	approved := c.post("/v1/approvals/"+ap.ID+"/approve", DecisionRequest{By: "rita", Digest: ap.ArgsDigest, Reason: "ok"}).result(t)
	if approved.Status != host.StatusPending || approved.Approval.Decision != "approved" {
		t.Fatalf("approved: %+v", approved)
	}
	c.post("/v1/approvals/"+ap.ID+"/approve", DecisionRequest{By: "rita", Digest: ap.ArgsDigest}).problem(t, CodeNotAwaitingApproval)

	done := c.post("/v1/executions", call).result(t)
	if done.Status != host.StatusSucceeded || compact(done.Result) != `{"msg":"pay"}` {
		t.Fatalf("re-driven: %+v", done)
	}

	var view Execution
	c.get("/v1/executions/"+res.ExecutionID).decode(t, &view)
	if view.State != "succeeded" || view.Status != host.StatusSucceeded || compact(view.Args) != `{"msg":"pay"}` || compact(view.Result.Result) != `{"msg":"pay"}` {
		t.Fatalf("execution: %+v", view)
	}
	var decisions []string
	for _, ev := range view.Events {
		decisions = append(decisions, ev.Decision)
	}
	if got := strings.Join(decisions, ","); got != "intent,approved,dispatch,outcome" {
		t.Errorf("events: %s", got)
	}
}

func TestRejectCancelExpire(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}

	r1 := c.post("/v1/executions", execReq("s1", "rej", "gated.echo", `{}`)).result(t)
	rej := c.post("/v1/approvals/"+r1.Approval.ID+"/reject", DecisionRequest{By: "rita", Reason: "no"}).result(t)
	if rej.Status != host.StatusRejected {
		t.Fatalf("reject: %+v", rej)
	}

	r2 := c.post("/v1/executions", execReq("s1", "can", "gated.echo", `{}`)).result(t)
	can := c.post("/v1/executions/"+r2.ExecutionID+"/cancel", CancelRequest{By: "ops"}).result(t)
	if can.Status != host.StatusCancelled {
		t.Fatalf("cancel: %+v", can)
	}

	r3 := c.post("/v1/executions", execReq("s1", "exp", "gated.echo", `{}`)).result(t)
	r4 := c.post("/v1/executions", execReq("s1", "exp2", "gated.echo", `{}`)).result(t)
	env.clock.Advance(2 * time.Hour)
	p := c.post("/v1/approvals/"+r3.Approval.ID+"/approve", DecisionRequest{By: "rita", Digest: r3.Approval.ArgsDigest}).problem(t, CodeApprovalExpired)
	if p.Execution == nil || p.Execution.Status != host.StatusExpired {
		t.Errorf("expired problem should carry the expired execution: %+v", p)
	}
	exp := c.post("/v1/executions", execReq("s1", "exp2", "gated.echo", `{}`)).result(t)
	if exp.Status != host.StatusExpired || exp.ExecutionID != r4.ExecutionID {
		t.Fatalf("expire on re-drive: %+v", exp)
	}
}

func TestIntentMismatch(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	first := c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{"msg":"a"}`)).result(t)
	p := c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{"msg":"b"}`)).problem(t, CodeIntentMismatch)
	if p.ExecutionID != first.ExecutionID || p.RecordedDigest == "" || p.GivenDigest == "" || p.RecordedDigest == p.GivenDigest {
		t.Fatalf("mismatch problem: %+v", p)
	}
	if p.RecordedTool != "noop.echo" || p.GivenTool != "noop.echo" {
		t.Errorf("tools: %+v", p)
	}
}

func TestFencedSessionAndResolve(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	resumed := execReq("s-old", "c1", "noop.echo", `{"msg":"maybe sent"}`)
	resumed["resumed"] = true
	rr := c.post("/v1/executions", resumed).result(t)
	if rr.Status != host.StatusRecoveryRequired {
		t.Fatalf("%+v", rr)
	}

	p := c.post("/v1/executions", execReq("s-old", "c2", "noop.echo", `{}`)).problem(t, CodeSessionFenced)
	if len(p.UncertainCalls) != 1 || p.UncertainCalls[0].ExecutionID != rr.ExecutionID || p.UncertainCalls[0].ToolCallID != "c1" || p.UncertainCalls[0].Tool != "noop.echo" {
		t.Fatalf("fenced problem: %s", mustJSON(p))
	}
	// Other sessions are not fenced.
	c.post("/v1/executions", execReq("s-new", "c1", "noop.echo", `{}`)).result(t)

	var list ListResponse
	c.get("/v1/executions?state=recovery_required").decode(t, &list)
	if len(list.Executions) != 1 || list.Executions[0].ExecutionID != rr.ExecutionID {
		t.Fatalf("list recovery_required: %+v", list)
	}

	rep := c.post("/v1/recover", "")
	if rep.status != http.StatusOK {
		t.Fatalf("recover: %d %s", rep.status, rep.body)
	}

	res := c.post("/v1/executions/"+rr.ExecutionID+"/resolve", map[string]any{"applied": true, "result": map[string]string{"sent": "yes"}, "receipt": "msg-1", "by": "olga", "reason": "found it in the outbox"}).result(t)
	if res.Status != host.StatusSucceeded || res.Source != "operator" || res.Receipt != "msg-1" {
		t.Fatalf("resolve: %+v", res)
	}
	c.post("/v1/executions/"+rr.ExecutionID+"/resolve", map[string]any{"applied": false, "by": "olga", "reason": "again"}).problem(t, CodeNotRecoveryRequired)
	c.post("/v1/executions", execReq("s-old", "c2", "noop.echo", `{}`)).result(t)
}

func TestAbandon(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	resumed := execReq("s-old", "c1", "noop.echo", `{}`)
	resumed["resumed"] = true
	rr := c.post("/v1/executions", resumed).result(t)
	res := c.post("/v1/executions/"+rr.ExecutionID+"/resolve", map[string]any{"applied": false, "by": "olga", "reason": "provider has no trace"}).result(t)
	if res.Status != host.StatusAbandoned {
		t.Fatalf("abandon: %+v", res)
	}
}

// TestCancelRecoveryRequired: cancel on a recovery_required execution is a
// recovery_required problem carrying the execution and pointing at
// resolve; on a terminal execution it answers the result unchanged.
func TestCancelRecoveryRequired(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	resumed := execReq("s-old", "c1", "noop.echo", `{}`)
	resumed["resumed"] = true
	rr := c.post("/v1/executions", resumed).result(t)
	p := c.post("/v1/executions/"+rr.ExecutionID+"/cancel", CancelRequest{By: "rita"}).problem(t, CodeRecoveryRequired)
	if p.ExecutionID != rr.ExecutionID || p.Execution == nil || p.Execution.Status != host.StatusRecoveryRequired ||
		!strings.Contains(p.Detail, "connhost resolve") {
		t.Fatalf("cancel of recovery_required: %+v", p)
	}
	done := c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{}`)).result(t)
	if res := c.post("/v1/executions/"+done.ExecutionID+"/cancel", CancelRequest{By: "rita"}).result(t); res.Status != host.StatusSucceeded {
		t.Fatalf("cancel of a terminal execution: %+v", res)
	}
}

func TestListPaging(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	for _, id := range []string{"a", "b", "c"} {
		c.post("/v1/executions", execReq("s1", id, "noop.echo", `{}`)).result(t)
	}
	c.post("/v1/executions", execReq("s2", "a", "noop.echo", `{}`)).result(t)
	var page1, page2, s2 ListResponse
	c.get("/v1/executions?session_id=s1&limit=2").decode(t, &page1)
	if len(page1.Executions) != 2 || page1.Next == "" {
		t.Fatalf("page1: %+v", page1)
	}
	c.get("/v1/executions?session_id=s1&limit=2&after="+page1.Next).decode(t, &page2)
	if len(page2.Executions) != 1 || page2.Next != "" {
		t.Fatalf("page2: %+v", page2)
	}
	c.get("/v1/executions?session_id=s2").decode(t, &s2)
	if len(s2.Executions) != 1 || s2.Executions[0].SessionID != "s2" {
		t.Fatalf("s2: %+v", s2)
	}
}

func TestTools(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	var openai []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	c.get("/v1/tools").decode(t, &openai)
	if len(openai) != 4 || openai[0].Function.Name != "gated_echo" || openai[0].Type != "function" || len(openai[0].Function.Parameters) == 0 {
		t.Fatalf("openai: %+v", openai)
	}
	var anth []map[string]any
	c.get("/v1/tools?format=anthropic").decode(t, &anth)
	if len(anth) != 4 || anth[2]["name"] != "noop_keyed" || anth[2]["input_schema"] == nil {
		t.Fatalf("anthropic: %+v", anth)
	}
	var mcp struct {
		Tools []map[string]any `json:"tools"`
	}
	c.get("/v1/tools?format=mcp").decode(t, &mcp)
	if len(mcp.Tools) != 4 || mcp.Tools[1]["name"] != "noop_echo" || mcp.Tools[1]["inputSchema"] == nil {
		t.Fatalf("mcp: %+v", mcp)
	}
}

// TestToolsBadFormat: a bad format is the client's and keeps its
// specific detail.
func TestToolsBadFormat(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	p := c.get("/v1/tools?format=gemini").problem(t, CodeBadRequest)
	if !strings.Contains(p.Detail, "gemini") {
		t.Errorf("bad format detail: %q", p.Detail)
	}
}

func TestMetrics(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{}`)).result(t)
	r := c.get("/metrics")
	if r.status != http.StatusOK {
		t.Fatalf("metrics: %d", r.status)
	}
	body := string(r.body)
	for _, want := range []string{
		MetricTransitions + `{decision="outcome",state="succeeded"} 1`,
		MetricTransitions + `{decision="dispatch",state="dispatched"} 1`,
		MetricConnectorCall + `_count{connector="noop",export=`,
		MetricLedgerWrite + `_count`,
		MetricPoolSize + `{connector="noop"}`,
		MetricPoolInstances + `{connector="noop",state="idle"}`,
		MetricPoolCreated + `{connector="noop"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestMetricsGuestLogDropped: message bytes a connector logs beyond its
// limits.log_kib are counted per connector.
func TestMetricsGuestLogDropped(t *testing.T) {
	m, err := manifests.Parse("chatty.toml", []byte(`
[connector]
name = "chatty"
version = "0.1.0"
abi = 1
module = "httpprobe.wasm"

[limits]
log_kib = 1
log_records = 1

[[operation]]
name = "log"
description = "Log the message given as msg."
effect = "read"
input_schema = '{"type": "object"}'
`))
	if err != nil {
		t.Fatal(err)
	}
	env := newTestExecutor(t, m)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	for i := range 2 {
		args := mustJSON(map[string]string{"msg": strings.Repeat("x", 3000)})
		c.post("/v1/executions", execReq("s1", fmt.Sprint("c", i), "chatty.log", args)).result(t)
	}
	body := string(c.get("/metrics").body)
	for _, want := range []string{
		MetricLogDropped + `{connector="chatty"} 0`,
		MetricLogDroppedBytes + `{connector="chatty"} 3952`, // 2 × (3000 - 1024)
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestHealthzAndOpenAPI(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	if r := c.get("/healthz"); r.status != http.StatusOK || !strings.Contains(string(r.body), `"ok"`) {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	r := c.get("/openapi.json")
	var doc map[string]any
	r.decode(t, &doc)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %v", doc["openapi"])
	}
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestOneShape: an execution reads the same wherever it comes from — the
// answer of POST /v1/executions, GET /v1/executions/{id} and an item of
// GET /v1/executions decode into one host.Result with the same values
// (GET adds the events), so a runtime needs one parser.
func TestOneShape(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	posted := c.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{"msg":"pay"}`)).result(t)
	approved := c.post("/v1/approvals/"+posted.Approval.ID+"/approve", DecisionRequest{Digest: posted.Approval.ArgsDigest}).result(t)
	if approved.Status != host.StatusPending || approved.State != "approved" {
		t.Fatalf("approved: status %s, state %s", approved.Status, approved.State)
	}
	done := c.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{"msg":"pay"}`)).result(t)

	var got Execution
	c.get("/v1/executions/"+done.ExecutionID).decode(t, &got)
	var list ListResponse
	c.get("/v1/executions").decode(t, &list)
	if len(list.Executions) != 1 {
		t.Fatalf("list: %+v", list)
	}
	item := list.Executions[0]
	if len(got.Events) == 0 || item.Events != nil {
		t.Fatalf("events: GET %d, list item %d", len(got.Events), len(item.Events))
	}
	for name, r := range map[string]host.Result{"GET": got.Result, "list item": item.Result} {
		want := done
		want.Recorded = false // only an answer to POST says whether it called the connector
		if !reflect.DeepEqual(jsonOf(t, r), jsonOf(t, want)) {
			t.Errorf("%s differs from the POST answer:\n%s\n%s", name, jsonOf(t, r), jsonOf(t, want))
		}
	}
	if done.Tool != "gated.echo" || done.SessionID != "s1" || done.State != "succeeded" || done.Approval.Decision != "approved" ||
		done.Approval.By != "dev-loopback" || compact(done.Args) != `{"msg":"pay"}` || done.IdempotencyKey == "" {
		t.Errorf("POST answer: %+v", done)
	}
	// Nothing but the one shape: every member of GET and of a list item
	// is a member of host.Result's JSON (or the trail).
	members := map[string]bool{"events": true}
	for k := range jsonMembers(t, jsonOf(t, host.Result{Approval: &ledger.Approval{}, Resolution: &ledger.Resolution{},
		Source: "s", OutcomeKind: "k", Result: []byte("1"), Receipt: "r", Error: "e", Args: []byte("{}"), Recorded: true, Uncertain: true,
		CancelRequested: true, Resumed: true, RequestedBy: "p", DuplicateOf: "d", DuplicateWindow: 1, NextAttemptAt: time.Now(), Deadline: time.Now()})) {
		members[k] = true
	}
	for name, raw := range map[string]string{"GET": string(c.get("/v1/executions/" + done.ExecutionID).body), "list item": jsonOf(t, item)} {
		for k := range jsonMembers(t, raw) {
			if !members[k] {
				t.Errorf("%s has member %q, which is not host.Result's", name, k)
			}
		}
	}
}

// jsonMembers returns the members of a JSON object.
func jsonMembers(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestListNewestFirst: the listing shows the newest executions first, and
// its pages, chained by next, list each execution once.
func TestListNewestFirst(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	var ids []string
	for i := range 5 {
		res := c.post("/v1/executions", execReq("s1", fmt.Sprintf("c%d", i), "noop.echo", `{}`)).result(t)
		ids = append([]string{res.ExecutionID}, ids...)
		env.clock.Advance(time.Second)
	}
	var got []string
	path := "/v1/executions?limit=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the listing does not end")
		}
		var l ListResponse
		c.get(path).decode(t, &l)
		for _, e := range l.Executions {
			got = append(got, e.ExecutionID)
		}
		if l.Next == "" {
			break
		}
		path = "/v1/executions?limit=2&after=" + l.Next
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("listed %v, want newest first %v", got, ids)
	}
}
