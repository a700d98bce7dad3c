package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// liveCheck sends requests to real servers over the API and validates each
// exchange against openapi.json with libopenapi-validator: the response's
// status must be documented for the operation, its content type and body
// must match the document (strictly: a member the document does not
// declare is an error), a successful request must match the document too,
// and a problem's code must be listed under its status for the operation.
// It records which routes answered successfully and which problem codes
// were seen, so the test can require all of them.
type liveCheck struct {
	t *testing.T
	// v validates strictly, except inside the values that are free-form
	// JSON by design (a tool's arguments and result); loose validates the
	// answers that are free-form as a whole (tool definitions, the
	// document itself).
	v, loose validator.Validator
	doc      openAPIDoc
	ok       map[string]bool // "POST /v1/executions" → a 2xx was seen
	codes    map[Code]bool
}

func newLiveCheck(t *testing.T) *liveCheck {
	t.Helper()
	doc, err := libopenapi.NewDocument(OpenAPI)
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	v, errs := validator.NewValidator(doc, config.WithStrictMode(), config.WithFormatAssertions(),
		config.WithStrictIgnorePaths("$.body.args.**", "$.body.arguments.**", "$.body.result.**", "$.body.**.args.**", "$.body.**.result.**"))
	if len(errs) > 0 {
		t.Fatalf("openapi.json: %v", errs)
	}
	loose, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("openapi.json: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("openapi.json is not a valid OpenAPI document: %s: %s", e.Message, e.Reason)
		}
		t.FailNow()
	}
	return &liveCheck{t: t, v: v, loose: loose, doc: loadOpenAPI(t), ok: map[string]bool{}, codes: map[Code]bool{}}
}

// route returns the documented path template that path matches.
func (lc *liveCheck) route(method, path string) string {
	path, _, _ = strings.Cut(path, "?")
	segs := strings.Split(path, "/")
	for tmpl, ops := range lc.doc.Paths {
		if _, ok := ops[strings.ToLower(method)]; !ok {
			continue
		}
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		match := true
		for i := range ts {
			if ts[i] != segs[i] && !strings.HasPrefix(ts[i], "{") {
				match = false
				break
			}
		}
		if match {
			return method + " " + tmpl
		}
	}
	return ""
}

// exchange is one request to send.
type exchange struct {
	method, path string
	token        string
	host         string
	ctype        string
	body         string
}

// send performs ex against base and validates it. want is the expected
// status; code the expected problem code (for statuses >= 400).
func (lc *liveCheck) send(base string, ex exchange, want int, code Code) []byte {
	t := lc.t
	t.Helper()
	name := ex.method + " " + ex.path
	req, err := http.NewRequest(ex.method, base+ex.path, strings.NewReader(ex.body))
	if err != nil {
		t.Fatal(err)
	}
	if ex.ctype == "" && ex.body != "" {
		ex.ctype = "application/json"
	}
	if ex.ctype != "" {
		req.Header.Set("Content-Type", ex.ctype)
	}
	if ex.token != "" {
		req.Header.Set("Authorization", "Bearer "+ex.token)
	}
	if ex.host != "" {
		req.Host = ex.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s: status %d, want %d: %s", name, resp.StatusCode, want, body)
	}

	// The validator reads both bodies: give it fresh copies.
	vreq, _ := http.NewRequest(ex.method, "http://127.0.0.1:8420"+ex.path, strings.NewReader(ex.body))
	vreq.Header = req.Header.Clone()
	vresp := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)), Request: vreq}
	v := lc.v
	if strings.HasPrefix(ex.path, "/v1/tools") || ex.path == "/openapi.json" {
		v = lc.loose
	}
	route := lc.route(ex.method, ex.path)
	if route == "" {
		// A method or path the document does not describe: it can only
		// say that every problem is a Problem.
		lc.checkProblem(name, body)
	} else if ok, errs := v.ValidateHttpResponse(vreq, vresp); !ok {
		for _, e := range errs {
			t.Errorf("%s → %d: response breaks openapi.json: %s: %s %v", name, resp.StatusCode, e.Message, e.Reason, schemaErrors(e.SchemaValidationErrors))
		}
		t.Logf("body: %s", body)
	}
	if resp.StatusCode < 300 {
		vreq, _ := http.NewRequest(ex.method, "http://127.0.0.1:8420"+ex.path, strings.NewReader(ex.body))
		vreq.Header = req.Header.Clone()
		if ok, errs := v.ValidateHttpRequest(vreq); !ok {
			for _, e := range errs {
				t.Errorf("%s: a request the server accepted breaks openapi.json: %s: %s %v", name, e.Message, e.Reason, schemaErrors(e.SchemaValidationErrors))
			}
		}
		lc.ok[route] = true
		return body
	}
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("%s: problem: %v: %s", name, err, body)
	}
	if p.Code != code {
		t.Fatalf("%s: code %s, want %s: %s", name, p.Code, code, body)
	}
	lc.codes[p.Code] = true
	if route != "" {
		rt := strings.SplitN(route, " ", 2)
		op := lc.doc.Paths[rt[1]][strings.ToLower(rt[0])]
		if !slices.Contains(op.Responses[strconv.Itoa(resp.StatusCode)].ProblemCodes, p.Code) {
			t.Errorf("%s: answered %d %s, which openapi.json does not list for %s", name, resp.StatusCode, p.Code, route)
		}
	}
	for _, chain := range []string{"host:", "ledger:", "manifests:", "httpapi:"} {
		if strings.Contains(p.Detail, chain) {
			t.Errorf("%s: the detail carries a Go error chain: %q", name, p.Detail)
		}
	}
	return body
}

// checkProblem checks that body is a Problem with no member the Problem
// schema does not declare.
func (lc *liveCheck) checkProblem(name string, body []byte) {
	lc.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var p Problem
	if err := dec.Decode(&p); err != nil || p.Type == "" || p.Title == "" || p.Status == 0 || p.Code == "" {
		lc.t.Errorf("%s: not a problem document (%v): %s", name, err, body)
	}
}

func schemaErrors[T any](errs []T) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n\t%+v", e)
	}
	return b.String()
}

func jsonBody(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestOpenAPILive drives the real handler, over real listeners and a real
// executor, through every route and every status it can answer: each
// execution status, each problem code the API can produce. The /mcp
// routes are driven through their problems only: what they answer
// otherwise is the MCP SDK's. Every exchange is validated against
// openapi.json (see liveCheck), so the document describes what the server
// really says, not only which routes exist.
func TestOpenAPILive(t *testing.T) {
	ctx := context.Background()
	lc := newLiveCheck(t)
	env := newTestExecutor(t)
	principals := []Principal{
		{Name: "agent", Roles: []Role{RoleRuntime}, Token: "tok-agent"},
		{Name: "rita", Roles: []Role{RoleApprover}, Token: "tok-rita"},
		{Name: "olga", Roles: []Role{RoleOperator}, Token: "tok-olga"},
	}
	srv := env.serve(t, Options{Principals: principals}).URL
	const agent, rita, olga = "tok-agent", "tok-rita", "tok-olga"
	exec := func(session, call, tool, args string) exchange {
		return exchange{method: "POST", path: "/v1/executions", token: agent, body: jsonBody(execReq(session, call, tool, args))}
	}
	result := func(b []byte) host.Result {
		var r host.Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		return r
	}
	status := func(b []byte, want host.Status) host.Result {
		t.Helper()
		r := result(b)
		if r.Status != want {
			t.Fatalf("status %s, want %s: %s", r.Status, want, b)
		}
		return r
	}

	// Every status of an execution is a 200 answer in the Execution shape.
	ok := status(lc.send(srv, exec("s1", "c1", "noop.echo", `{"msg":"hi"}`), 200, ""), host.StatusSucceeded)
	status(lc.send(srv, exec("s1", "c1", "noop.echo", `{"msg":"hi"}`), 200, ""), host.StatusSucceeded)
	status(lc.send(srv, exec("s1", "c2", "noop__keyed", `{}`), 200, ""), host.StatusSucceeded)
	status(lc.send(srv, exec("s1", "c3", "probe.config", `{"Key": 5}`), 200, ""), host.StatusFailed)
	gated := status(lc.send(srv, exec("s1", "g1", "gated.echo", `{"msg":"pay"}`), 200, ""), host.StatusAwaitingApproval)
	approve := func(ap *ledger.Approval, digest string) exchange {
		return exchange{method: "POST", path: "/v1/approvals/" + ap.ID + "/approve", token: rita, body: jsonBody(DecisionRequest{Digest: digest, Reason: "checked"})}
	}
	status(lc.send(srv, approve(gated.Approval, gated.Approval.ArgsDigest), 200, ""), host.StatusPending)
	status(lc.send(srv, exec("s1", "g1", "gated.echo", `{"msg":"pay"}`), 200, ""), host.StatusSucceeded)
	toReject := status(lc.send(srv, exec("s1", "g2", "gated.echo", `{"msg":"no"}`), 200, ""), host.StatusAwaitingApproval)
	status(lc.send(srv, exchange{method: "POST", path: "/v1/approvals/" + toReject.Approval.ID + "/reject", token: rita, body: `{"reason":"no"}`}, 200, ""), host.StatusRejected)
	toCancel := status(lc.send(srv, exec("s1", "g3", "gated.echo", `{"msg":"later"}`), 200, ""), host.StatusAwaitingApproval)
	cancelled := status(lc.send(srv, exchange{method: "POST", path: "/v1/executions/" + toCancel.ExecutionID + "/cancel", token: agent}, 200, ""), host.StatusCancelled)
	if cancelled.Approval.Decision != "cancelled" {
		t.Errorf("a cancelled request's approval says %q", cancelled.Approval.Decision)
	}
	resumed := func(session, call, tool string) exchange {
		r := execReq(session, call, tool, `{"msg":"old"}`)
		r["resumed"] = true
		return exchange{method: "POST", path: "/v1/executions", token: agent, body: jsonBody(r)}
	}
	applied := status(lc.send(srv, resumed("old1", "c1", "noop.echo"), 200, ""), host.StatusRecoveryRequired)
	retried := status(lc.send(srv, resumed("old2", "c1", "noop.echo"), 200, ""), host.StatusRecoveryRequired)
	abandoned := status(lc.send(srv, resumed("old3", "c1", "noop.echo"), 200, ""), host.StatusRecoveryRequired)
	neverApproved := status(lc.send(srv, resumed("old4", "c1", "gated.echo"), 200, ""), host.StatusRecoveryRequired)
	resolve := func(id string, req ResolveRequest) exchange {
		return exchange{method: "POST", path: "/v1/executions/" + id + "/resolve", token: olga, body: jsonBody(req)}
	}
	yes, no := true, false
	status(lc.send(srv, resolve(applied.ExecutionID, ResolveRequest{Applied: &yes, Result: json.RawMessage(`{"msg":"old"}`), Receipt: "r-1", Reason: "seen at the provider"}), 200, ""), host.StatusSucceeded)
	status(lc.send(srv, resolve(retried.ExecutionID, ResolveRequest{Applied: &no, Retry: true, Reason: "not at the provider"}), 200, ""), host.StatusSucceeded)
	status(lc.send(srv, resolve(abandoned.ExecutionID, ResolveRequest{Applied: &no, Reason: "not wanted"}), 200, ""), host.StatusAbandoned)
	toExpire := status(lc.send(srv, exec("s1", "g4", "gated.echo", `{"msg":"slow"}`), 200, ""), host.StatusAwaitingApproval)

	// Reads.
	lc.send(srv, exchange{method: "GET", path: "/v1/executions/" + ok.ExecutionID, token: rita}, 200, "")
	lc.send(srv, exchange{method: "GET", path: "/v1/approvals/" + toExpire.Approval.ID, token: rita}, 200, "")
	lc.send(srv, exchange{method: "GET", path: "/v1/approvals/" + gated.Approval.ID, token: agent}, 200, "")
	lc.send(srv, exchange{method: "GET", path: "/v1/executions?limit=2", token: agent}, 200, "")
	lc.send(srv, exchange{method: "GET", path: "/v1/executions?state=succeeded&session_id=s1&namespace=default&limit=1&after=" + ok.ExecutionID, token: olga}, 200, "")
	lc.send(srv, exchange{method: "POST", path: "/v1/recover", token: olga}, 200, "")
	backupDir := filepath.Join(t.TempDir(), "backup")
	lc.send(srv, exchange{method: "POST", path: "/v1/ledger/backup", token: olga, body: jsonBody(BackupRequest{Dir: backupDir})}, 200, "")
	lc.send(srv, exchange{method: "POST", path: "/v1/ledger/backup", token: olga, body: jsonBody(BackupRequest{Dir: backupDir})}, 400, CodeBadRequest)
	lc.send(srv, exchange{method: "POST", path: "/v1/ledger/backup", token: olga, body: `{"dir":"relative/backup"}`}, 400, CodeBadRequest)
	lc.send(srv, exchange{method: "POST", path: "/v1/ledger/backup", token: rita, body: jsonBody(BackupRequest{Dir: backupDir + "-2"})}, 403, CodeForbiddenRole)
	for _, f := range []string{"openai", "anthropic", "mcp"} {
		lc.send(srv, exchange{method: "GET", path: "/v1/tools?format=" + f, token: agent}, 200, "")
	}
	lc.send(srv, exchange{method: "GET", path: "/healthz"}, 200, "")
	nonce := strings.Repeat("ab", 32)
	var pr ProofResponse
	if err := json.Unmarshal(lc.send(srv, exchange{method: "POST", path: "/v1/auth/proof", body: jsonBody(ProofRequest{Nonce: nonce, TokenID: TokenID(rita)})}, 200, ""), &pr); err != nil ||
		!pr.Auth || pr.Principal != "rita" || !VerifyServerProof(rita, nonce, "rita", nil, pr.Proof) {
		t.Errorf("server proof for rita's token: %+v %v", pr, err)
	}
	lc.send(srv, exchange{method: "POST", path: "/v1/auth/proof", body: jsonBody(ProofRequest{Nonce: nonce, TokenID: TokenID("not a token of this server")})}, 401, CodeUnauthorized)
	lc.send(srv, exchange{method: "POST", path: "/v1/auth/proof", body: jsonBody(ProofRequest{Nonce: "short", TokenID: TokenID(rita)})}, 400, CodeBadRequest)
	lc.send(srv, exchange{method: "GET", path: "/metrics", token: agent}, 200, "")
	lc.send(srv, exchange{method: "GET", path: "/openapi.json", token: agent}, 200, "")

	// Problems of requests.
	lc.send(srv, exchange{method: "POST", path: "/v1/executions", token: agent, body: `{"session_id":`}, 400, CodeBadRequest)
	lc.send(srv, exchange{method: "POST", path: "/v1/executions", token: agent, body: `{"tool":"noop.echo"}`}, 400, CodeBadRequest)
	lc.send(srv, exchange{method: "POST", path: "/v1/executions", token: agent, body: `{}`, ctype: "text/plain"}, 415, CodeUnsupportedMediaType)
	lc.send(srv, exec("s1", "c9", "noop.echo", `{"msg":3}`), 422, CodeInvalidArguments)
	unknown := lc.send(srv, exec("s1", "c9", "nope.echo", `{}`), 404, CodeUnknownTool)
	var up Problem
	_ = json.Unmarshal(unknown, &up)
	if !slices.Equal(up.AvailableTools, []string{"gated.echo", "noop.echo", "noop.keyed", "probe.config"}) {
		t.Errorf("unknown_tool lists %v", up.AvailableTools)
	}
	lc.send(srv, exec("s1", "c1", "noop.echo", `{"msg":"other"}`), 409, CodeIntentMismatch)
	lc.send(srv, exec("old4", "c2", "noop.echo", `{}`), 409, CodeSessionFenced)
	lc.send(srv, exchange{method: "GET", path: "/v1/executions/ex_nope", token: agent}, 404, CodeNotFound)
	lc.send(srv, exchange{method: "GET", path: "/v1/approvals/ap_nope", token: rita}, 404, CodeNotFound)
	lc.send(srv, exchange{method: "GET", path: "/v1/approvals/" + ok.ExecutionID, token: rita}, 404, CodeNotFound)
	lc.send(srv, exchange{method: "GET", path: "/v1/executions?state=done", token: agent}, 400, CodeBadRequest)
	lc.send(srv, exchange{method: "GET", path: "/v1/executions?after=ex_nope", token: agent}, 400, CodeBadRequest)
	lc.send(srv, exchange{method: "GET", path: "/v1/tools?format=gemini", token: agent}, 400, CodeBadRequest)
	lc.send(srv, exchange{method: "GET", path: "/v1/recover", token: agent}, 405, CodeMethodNotAllowed)
	lc.send(srv, exchange{method: "GET", path: "/v2/anything", token: agent}, 404, CodeNotFound)
	lc.send(srv, exchange{method: "GET", path: "/v1/executions"}, 401, CodeUnauthorized)
	lc.send(srv, exchange{method: "GET", path: "/v1/executions", token: "wrong"}, 401, CodeUnauthorized)
	lc.send(srv, exchange{method: "POST", path: "/v1/executions", token: rita, body: jsonBody(execReq("s1", "c9", "noop.echo", `{}`))}, 403, CodeForbiddenRole)
	lc.send(srv, approve(toExpire.Approval, toExpire.Approval.ArgsDigest).withToken(agent), 403, CodeForbiddenRole)
	lc.send(srv, approve(toExpire.Approval, toExpire.Approval.ArgsDigest).withBody(`{"by":"olga","digest":"`+toExpire.Approval.ArgsDigest+`"}`), 400, CodeIdentityMismatch)

	// A principal bound to a namespace, with limits: a burst of three
	// calls on the executor's clock (which stands still here).
	tenant := env.serve(t, Options{Principals: []Principal{{Name: "tenant-a", Roles: []Role{RoleRuntime}, Token: "tok-a",
		Namespaces: []string{"tenant-a"}, Limits: Limits{MaxPendingApprovals: 1, MaxArgumentBytes: 64, CallsPerSecond: 1, Burst: 3}}}}).URL
	texec := func(call, tool, args string) exchange { return exec("t1", call, tool, args).withToken("tok-a") }
	status(lc.send(tenant, texec("g1", "gated.echo", `{"msg":"a"}`), 200, ""), host.StatusAwaitingApproval)
	lc.send(tenant, texec("g2", "gated.echo", `{"msg":"b"}`), 429, CodePendingApprovalsLimit)
	lc.send(tenant, texec("c1", "noop.echo", `{"msg":"`+strings.Repeat("x", 64)+`"}`), 413, CodeArgumentsTooLarge)
	foreign := execReq("t1", "c2", "noop.echo", `{}`)
	foreign["namespace"] = "default"
	lc.send(tenant, exchange{method: "POST", path: "/v1/executions", token: "tok-a", body: jsonBody(foreign)}, 403, CodeNamespaceForbidden)
	limited := lc.send(tenant, texec("c3", "noop.echo", `{}`), 429, CodeRateLimited)
	var lp Problem
	_ = json.Unmarshal(limited, &lp)
	if lp.RetryAfter != 1 {
		t.Errorf("rate_limited: retry_after %d, want 1", lp.RetryAfter)
	}
	lc.send(tenant, exchange{method: "GET", path: "/v1/executions?namespace=default", token: "tok-a"}, 403, CodeNamespaceForbidden)
	lc.send(tenant, exchange{method: "GET", path: "/v1/executions/" + ok.ExecutionID, token: "tok-a"}, 404, CodeNotFound)

	// Problems of decisions, each carrying the execution as it stands.
	lc.send(srv, approve(toExpire.Approval, strings.Repeat("0", 64)), 409, CodeApprovalDigestMismatch)
	lc.send(srv, approve(gated.Approval, gated.Approval.ArgsDigest), 409, CodeNotAwaitingApproval)
	lc.send(srv, exchange{method: "POST", path: "/v1/approvals/ap_nope/approve", token: rita, body: `{"digest":"d"}`}, 404, CodeNotFound)
	lc.send(srv, resolve(ok.ExecutionID, ResolveRequest{Applied: &no, Reason: "r"}), 409, CodeNotRecoveryRequired)
	lc.send(srv, resolve(neverApproved.ExecutionID, ResolveRequest{Applied: &no, Retry: true, Reason: "r"}), 409, CodeApprovalRequired)
	lc.send(srv, exchange{method: "POST", path: "/v1/executions/" + neverApproved.ExecutionID + "/cancel", token: olga}, 409, CodeRecoveryRequired)
	env.clock.Advance(2 * time.Hour)
	lc.send(srv, approve(toExpire.Approval, toExpire.Approval.ArgsDigest), 410, CodeApprovalExpired)

	// Pruned executions stay answered as pruned.
	env.clock.Advance(time.Hour)
	if _, err := env.ex.Ledger().Prune(ctx, env.clock.Now()); err != nil {
		t.Fatal(err)
	}
	lc.send(srv, exchange{method: "GET", path: "/v1/executions/" + ok.ExecutionID, token: agent}, 410, CodePruned)
	lc.send(srv, exchange{method: "GET", path: "/v1/approvals/" + gated.Approval.ID, token: rita}, 410, CodePruned)
	lc.send(srv, exec("s1", "c1", "noop.echo", `{"msg":"hi"}`), 410, CodePruned)
	lc.send(srv, exchange{method: "GET", path: "/v1/executions?after=" + ok.ExecutionID, token: agent}, 410, CodePruned)

	// Servers configured otherwise.
	loop := env.serve(t, Options{}).URL
	lc.send(loop, exchange{method: "GET", path: "/v1/executions", host: "attacker.example:8420"}, 403, CodeForbiddenHost)
	lc.send(loop, exchange{method: "GET", path: "/v1/executions?limit=1"}, 200, "") // no credentials, no token
	lc.send(loop, exchange{method: "POST", path: "/v1/auth/proof", body: jsonBody(ProofRequest{Nonce: strings.Repeat("cd", 32), TokenID: TokenID(rita)})}, 200, "")
	noApprover := env.serve(t, Options{Principals: principals[:1]}).URL
	lc.send(noApprover, approve(toReject.Approval, "d").withToken(agent), 403, CodeApprovalNotConfigured)
	small := env.serve(t, Options{Principals: principals, MaxBodyBytes: 64}).URL
	lc.send(small, exec("s1", "c9", "noop.echo", `{"msg":"`+strings.Repeat("x", 100)+`"}`), 413, CodePayloadTooLarge)

	closed := newTestExecutor(t)
	closedSrv := closed.serve(t, Options{Principals: principals}).URL
	if err := closed.ex.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lc.send(closedSrv, exec("s1", "c1", "noop.echo", `{}`), 503, CodeUnavailable)

	// A connector whose one instance another call holds: connector_busy,
	// with nothing recorded.
	sleeper, err := manifests.Parse("sleeper.toml", []byte(sleeperManifest))
	if err != nil {
		t.Fatal(err)
	}
	busyEnv := newTestExecutorWith(t, func(o *host.Options) { o.InstanceWait = 50 * time.Millisecond }, sleeper)
	busySrv := busyEnv.serve(t, Options{Principals: principals}).URL
	holding := make(chan error, 1)
	go func() {
		_, err := busyEnv.ex.Execute(ctx, host.ToolCall{SessionID: "s1", ToolCallID: "hold", Tool: "sleeper.hostsleep", Arguments: json.RawMessage(`{"ms":3000}`)})
		holding <- err
	}()
	for st, _ := busyEnv.ex.PoolStats("sleeper"); st.Busy == 0; st, _ = busyEnv.ex.PoolStats("sleeper") {
		time.Sleep(time.Millisecond)
	}
	var bp Problem
	_ = json.Unmarshal(lc.send(busySrv, exec("s1", "c1", "sleeper.hostsleep", `{"ms":1}`), 503, CodeConnectorBusy), &bp)
	if bp.RetryAfter < 1 || bp.ExecutionID != "" {
		t.Errorf("connector_busy: retry_after %d, execution %q; want a retry_after and no execution (none was recorded)", bp.RetryAfter, bp.ExecutionID)
	}
	if err := <-holding; err != nil {
		t.Fatal(err)
	}
	lc.send(closedSrv, exchange{method: "GET", path: "/v1/executions", token: agent}, 500, CodeInternal)

	// A node whose ledger was found rolled back while it runs (a shared
	// ledger's witness check then fails every operation): ledger_damaged.
	rb := &rolledBack{}
	broken := newTestExecutorWith(t, func(o *host.Options) {
		led, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(t.TempDir(), "ledger")})
		if err != nil {
			t.Fatal(err)
		}
		rb.Ledger = led
		o.Ledger, o.CloseLedger = rb, true
	})
	brokenSrv := broken.serve(t, Options{Principals: principals}).URL
	rb.broken.Store(true)
	lc.send(brokenSrv, exec("s1", "c1", "noop.echo", `{}`), 503, CodeLedgerDamaged)
	lc.send(brokenSrv, exchange{method: "GET", path: "/v1/executions/ex_1", token: agent}, 503, CodeLedgerDamaged)

	// /mcp carries another protocol (MCP over streamable HTTP, answered by
	// the MCP SDK behind Options.MCP; server/mcpserver's tests drive it).
	// Here it must answer its documented problems: without an MCP handler,
	// not_found; to a principal without role runtime, forbidden_role.
	mcp := map[string]bool{"POST /mcp": true, "GET /mcp": true, "DELETE /mcp": true}
	lc.send(srv, exchange{method: "POST", path: "/mcp", token: agent, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}, 404, CodeNotFound)
	lc.send(srv, exchange{method: "GET", path: "/mcp", token: agent}, 404, CodeNotFound)
	lc.send(srv, exchange{method: "DELETE", path: "/mcp", token: rita}, 403, CodeForbiddenRole)

	var missingRoutes []string
	for _, r := range routes() {
		if k := r.method + " " + r.path; !lc.ok[k] && !mcp[k] {
			missingRoutes = append(missingRoutes, k)
		}
	}
	if len(missingRoutes) > 0 {
		t.Errorf("routes never answered successfully: %v", missingRoutes)
	}
	var missingCodes []string
	for c := range codes {
		if !lc.codes[c] && !cliOnly[c] {
			missingCodes = append(missingCodes, string(c))
		}
	}
	sort.Strings(missingCodes)
	if len(missingCodes) > 0 {
		t.Errorf("problem codes never produced: %v", missingCodes)
	}
}

// sleeperManifest is the httpprobe module under a connector of one
// instance whose hostsleep holds it.
const sleeperManifest = `
[connector]
name = "sleeper"
version = "0.1.0"
abi = 1
module = "httpprobe.wasm"

[limits]
instances = 1

[[operation]]
name = "hostsleep"
description = "Sleep through the host for ms milliseconds."
effect = "read"
input_schema = '{"type": "object"}'
`

func (e exchange) withToken(tok string) exchange { e.token = tok; return e }
func (e exchange) withBody(b string) exchange    { e.body = b; return e }

// rolledBack is a ledger whose reads and writes fail, once broken is set,
// as a shared ledger's do after its witness check found the database
// rolled back under the running node.
type rolledBack struct {
	ledger.Ledger
	broken atomic.Bool
}

func (r *rolledBack) err() error {
	return &ledger.DamageError{Kind: ledger.DamageBehind, Dir: "database connhost on db.internal:5432",
		What: "while this process had it open, the ledger in the database connhost on db.internal:5432 went behind its witness"}
}

func (r *rolledBack) Get(ctx context.Context, id string) (ledger.Record, error) {
	if r.broken.Load() {
		return ledger.Record{}, r.err()
	}
	return r.Ledger.Get(ctx, id)
}

func (r *rolledBack) Create(ctx context.Context, rec ledger.Record, ev ledger.Event) (ledger.Record, error) {
	if r.broken.Load() {
		return ledger.Record{}, r.err()
	}
	return r.Ledger.Create(ctx, rec, ev)
}

func (r *rolledBack) Fenced(ctx context.Context, ns, session string) ([]ledger.Record, error) {
	if r.broken.Load() {
		return nil, r.err()
	}
	return r.Ledger.Fenced(ctx, ns, session)
}
