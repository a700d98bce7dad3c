package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/internal/buildinfo"
)

// TestMetricsWaiting: /metrics reports what waits for a human now, read
// from the ledger: a call awaiting approval, one in recovery_required and
// the session it fences, and how long the oldest has waited; the values
// fall when a reviewer and an operator have acted. A second handler on a
// fresh registry (a restarted server's) reports the same values, since
// nothing is counted from the transitions it saw.
func TestMetricsWaiting(t *testing.T) {
	env := newTestExecutor(t)
	opts := devOptions()
	opts.Now = env.clock.Now
	c := client{t: t, base: env.serve(t, opts).URL}
	metrics := func(c client) string {
		t.Helper()
		r := c.get("/metrics")
		if r.status != 200 {
			t.Fatalf("metrics: %d %s", r.status, r.body)
		}
		return string(r.body)
	}
	expect := func(body string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("metrics lack %q", w)
			}
		}
	}
	expect(metrics(c),
		MetricWaiting+`{state="awaiting_approval"} 0`, MetricWaiting+`{state="recovery_required"} 0`,
		MetricWaitingOldest+`{state="awaiting_approval"} 0`, MetricFenced+` 0`)

	gated := c.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{}`)).result(t)
	env.clock.Advance(30 * time.Second)
	resumed := execReq("s-old", "c1", "noop.echo", `{}`)
	resumed["resumed"] = true
	rr := c.post("/v1/executions", resumed).result(t)
	env.clock.Advance(60 * time.Second)
	want := []string{
		MetricWaiting + `{state="awaiting_approval"} 1`, MetricWaiting + `{state="recovery_required"} 1`,
		MetricWaitingOldest + `{state="awaiting_approval"} 90`, MetricWaitingOldest + `{state="recovery_required"} 60`,
		MetricFenced + ` 1`,
	}
	expect(metrics(c), want...)

	fresh := opts
	fresh.Registry = nil
	expect(metrics(client{t: t, base: env.serve(t, fresh).URL}), want...)

	c.post("/v1/approvals/"+gated.Approval.ID+"/approve", DecisionRequest{Digest: gated.Approval.ArgsDigest}).result(t)
	c.post("/v1/executions/"+rr.ExecutionID+"/resolve", map[string]any{"applied": false, "reason": "no trace at the provider"}).result(t)
	expect(metrics(c),
		MetricWaiting+`{state="awaiting_approval"} 0`, MetricWaiting+`{state="recovery_required"} 0`,
		MetricWaitingOldest+`{state="recovery_required"} 0`, MetricFenced+` 0`)
}

// TestBuildInfo: a server given its build reports it as
// connhost_build_info and as the OpenAPI document's
// info.x-connhost-version, beside the API's own info.version.
func TestBuildInfo(t *testing.T) {
	env := newTestExecutor(t)
	b := buildinfo.Info{Version: "v1.2.3", Commit: "0123456789abcdef", GoVersion: "go1.26.0", WazeroVersion: "v1.12.0", ABIVersion: 1}
	c := client{t: t, base: env.serve(t, Options{Build: b}).URL}
	want := MetricBuildInfo + `{abi_version="1",commit="0123456789abcdef",go_version="go1.26.0",version="v1.2.3",wazero_version="v1.12.0"} 1`
	if body := string(c.get("/metrics").body); !strings.Contains(body, want+"\n") {
		t.Errorf("metrics lack %q", want)
	}
	var doc struct {
		Info map[string]any `json:"info"`
	}
	c.get("/openapi.json").decode(t, &doc)
	if doc.Info["x-connhost-version"] != "v1.2.3+0123456789ab" || doc.Info["version"] != "1.1.0" {
		t.Errorf("openapi info: %v", doc.Info)
	}
}

// TestMetricsRole: a principal with role metrics scrapes /metrics and is
// refused every other route (403 forbidden_role), reads included: it sees
// no execution, argument or tool.
func TestMetricsRole(t *testing.T) {
	env := newTestExecutor(t)
	ps := append(testPrincipals(), Principal{Name: "prom", Roles: []Role{RoleMetrics}, Token: "tok-prom"})
	srv := env.serve(t, Options{Principals: ps})
	runtime := client{t: t, base: srv.URL, token: "tok-runtime"}
	res := runtime.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{}`)).result(t)
	prom := client{t: t, base: srv.URL, token: "tok-prom"}
	if r := prom.get("/metrics"); r.status != 200 || !strings.Contains(string(r.body), MetricWaiting) {
		t.Fatalf("/metrics: %d", r.status)
	}
	for _, path := range []string{"/v1/executions", "/v1/executions/" + res.ExecutionID, "/v1/tools", "/openapi.json"} {
		prom.get(path).problem(t, CodeForbiddenRole)
	}
	prom.post("/v1/executions", execReq("s1", "c2", "noop.echo", `{}`)).problem(t, CodeForbiddenRole)
	prom.post("/v1/recover", map[string]any{}).problem(t, CodeForbiddenRole)
}
