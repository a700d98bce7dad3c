package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// panicker is an ungated manual operation whose attempt ends uncertain
// (the guest panics: it may have acted), so its call becomes
// recovery_required and fences its session.
const panicker = `
[connector]
name = "trap"
version = "0.1.0"
abi = 1
module = "trap.wasm"

[[operation]]
name = "panic"
description = "Panic inside the connector."
effect = "external"
recovery = "manual"
input_schema = '{"type": "object"}'
`

// tenants are two runtimes and two reviewers, each bound to its tenant's
// namespace, and an operator of tenant-b.
var tenants = []Principal{
	{Name: "tenant-a", Roles: []Role{RoleRuntime}, Token: "tok-a", Namespaces: []string{"tenant-a"}},
	{Name: "tenant-b", Roles: []Role{RoleRuntime}, Token: "tok-b", Namespaces: []string{"tenant-b"}},
	{Name: "rita", Roles: []Role{RoleApprover}, Token: "tok-rita", Namespaces: []string{"tenant-a"}},
	{Name: "bob", Roles: []Role{RoleApprover}, Token: "tok-bob", Namespaces: []string{"tenant-b"}},
	{Name: "olga", Roles: []Role{RoleOperator}, Token: "tok-olga", Namespaces: []string{"tenant-b"}},
}

// TestTenantsCannotReachEachOther replays the attacks of one tenant's
// runtime on another's work: tenant-b may not list, read, cancel or fence
// tenant-a's executions, nor pre-fence a session tenant-a has not used
// yet, and tenant-b's reviewer may not decide tenant-a's approval. Every
// foreign id answers as an unknown one, and a body naming tenant-a's
// namespace is refused with nothing recorded.
func TestTenantsCannotReachEachOther(t *testing.T) {
	m, err := manifests.Parse("trap.toml", []byte(panicker))
	if err != nil {
		t.Fatal(err)
	}
	env := newTestExecutor(t, m)
	base := env.serve(t, Options{Principals: tenants}).URL
	a := client{t: t, base: base, token: "tok-a"}
	b := client{t: t, base: base, token: "tok-b"}
	rita := client{t: t, base: base, token: "tok-rita"}
	bob := client{t: t, base: base, token: "tok-bob"}

	// tenant-a: a payment awaiting approval, with its customer's e-mail.
	pay := a.post("/v1/executions", execReq("a-s1", "pay-1", "gated.echo", `{"msg":"charge alice@tenant-a.example"}`)).result(t)
	if pay.Status != host.StatusAwaitingApproval || pay.Namespace != "tenant-a" {
		t.Fatalf("tenant-a's payment: %+v", pay)
	}

	sameAsUnknown := func(t *testing.T, got response, unknown response) {
		t.Helper()
		pg, pu := got.problem(t, CodeNotFound), unknown.problem(t, CodeNotFound)
		suffix := strings.TrimPrefix(pay.ExecutionID, "ex_")
		if want := strings.ReplaceAll(pu.Detail, "_nope", "_"+suffix); pg.Detail != want {
			t.Errorf("a foreign id answers %q, an unknown one %q", pg.Detail, pu.Detail)
		}
		if strings.Contains(string(got.body), "alice") || strings.Contains(string(got.body), "tenant-a") {
			t.Errorf("the answer leaks: %s", got.body)
		}
	}
	// Each attack is a subtest of its own, so each fails on its own.
	with := func(t *testing.T, c client) client { c.t = t; return c }

	t.Run("list", func(t *testing.T) {
		b := with(t, b)
		var list ListResponse
		r := b.get("/v1/executions")
		r.decode(t, &list)
		if len(list.Executions) != 0 || strings.Contains(string(r.body), "alice@tenant-a.example") {
			t.Errorf("tenant-b lists %d executions of others: %s", len(list.Executions), r.body)
		}
		b.get("/v1/executions?namespace=tenant-a").problem(t, CodeNamespaceForbidden)
		b.get("/v1/executions?after="+pay.ExecutionID).problem(t, CodeBadRequest)
		with(t, a).get("/v1/executions").decode(t, &list)
		if len(list.Executions) != 1 || list.Executions[0].ExecutionID != pay.ExecutionID {
			t.Errorf("tenant-a lists %+v", list.Executions)
		}
	})
	t.Run("get", func(t *testing.T) {
		b := with(t, b)
		sameAsUnknown(t, b.get("/v1/executions/"+pay.ExecutionID), b.get("/v1/executions/ex_nope"))
	})
	t.Run("approve as another tenant's reviewer", func(t *testing.T) {
		bob := with(t, bob)
		sameAsUnknown(t, bob.post("/v1/approvals/"+pay.Approval.ID+"/approve", DecisionRequest{Digest: pay.ArgsDigest}),
			bob.post("/v1/approvals/ap_nope/approve", DecisionRequest{Digest: pay.ArgsDigest}))
	})
	if r := rita.post("/v1/approvals/"+pay.Approval.ID+"/approve", DecisionRequest{Digest: pay.ArgsDigest}); r.status != http.StatusOK {
		t.Errorf("rita's approval of tenant-a's payment: %d %s", r.status, r.body)
	}
	t.Run("cancel", func(t *testing.T) {
		b := with(t, b)
		sameAsUnknown(t, b.post("/v1/executions/"+pay.ExecutionID+"/cancel", ""), b.post("/v1/executions/ex_nope/cancel", ""))
		if got := with(t, a).get("/v1/executions/" + pay.ExecutionID).result(t); got.State != "approved" {
			t.Errorf("tenant-a's approved payment is %s after tenant-b's cancel", got.State)
		}
	})
	t.Run("fence", func(t *testing.T) {
		// An ungated manual call in tenant-a's session that ends uncertain
		// is refused, naming the namespace, with nothing recorded.
		b := with(t, b)
		fence := execReq("a-s1", "b-1", "trap.panic", `{}`)
		fence["namespace"] = "tenant-a"
		p := b.post("/v1/executions", fence).problem(t, CodeNamespaceForbidden)
		if !strings.Contains(p.Detail, `principal "tenant-b" acts in namespace "tenant-b", not "tenant-a"`) {
			t.Errorf("detail: %q", p.Detail)
		}
		with(t, a).post("/v1/executions", execReq("a-s1", "a-2", "noop.echo", `{}`)).result(t)
		// The same call without a namespace runs in tenant-b's session
		// a-s1 and fences that one only.
		delete(fence, "namespace")
		if own := b.post("/v1/executions", fence).result(t); own.Status != host.StatusRecoveryRequired || own.Namespace != "tenant-b" {
			t.Fatalf("tenant-b's own call: %+v", own)
		}
		b.post("/v1/executions", execReq("a-s1", "b-2", "noop.echo", `{}`)).problem(t, CodeSessionFenced)
		with(t, a).post("/v1/executions", execReq("a-s1", "a-3", "noop.echo", `{}`)).result(t)
	})
	t.Run("pre-fence", func(t *testing.T) {
		// resumed on a gated tool in a session tenant-a has not used yet.
		pre := execReq("a-s2", "x", "gated.echo", `{"msg":"?"}`)
		pre["resumed"], pre["namespace"] = true, "tenant-a"
		with(t, b).post("/v1/executions", pre).problem(t, CodeNamespaceForbidden)
		if next := with(t, a).post("/v1/executions", execReq("a-s2", "pay-2", "gated.echo", `{"msg":"next"}`)).result(t); next.Status != host.StatusAwaitingApproval {
			t.Errorf("tenant-a's first call in a-s2: %+v", next)
		}
	})
	t.Run("recover", func(t *testing.T) {
		// Recover under tenant-b reports tenant-b's calls only.
		var rep host.RecoveryReport
		r := with(t, b).post("/v1/recover", "")
		if r.status != http.StatusOK {
			t.Fatalf("recover: %d %s", r.status, r.body)
		}
		r.decode(t, &rep)
		for _, u := range rep.Uncertain {
			if u.ToolCallID != "b-1" {
				t.Errorf("tenant-b's recovery report names %+v", u)
			}
		}
	})
	// tenant-a's approved payment runs after all of it.
	if done := a.post("/v1/executions", execReq("a-s1", "pay-1", "gated.echo", `{"msg":"charge alice@tenant-a.example"}`)).result(t); done.Status != host.StatusSucceeded {
		t.Errorf("tenant-a's payment after the attacks: %+v", done)
	}
}

// TestPrincipalLimits: a principal's limits answer their codes (a rate
// with Retry-After), record nothing, and leave other principals alone.
func TestPrincipalLimits(t *testing.T) {
	env := newTestExecutor(t)
	base := env.serve(t, Options{Principals: []Principal{
		{Name: "tenant-a", Roles: []Role{RoleRuntime}, Token: "tok-a", Namespaces: []string{"tenant-a"},
			Limits: Limits{MaxPendingApprovals: 2, MaxArgumentBytes: 100, CallsPerSecond: 0.5, Burst: 5}},
		{Name: "tenant-b", Roles: []Role{RoleRuntime}, Token: "tok-b", Namespaces: []string{"tenant-b"}},
	}}).URL
	a := client{t: t, base: base, token: "tok-a"}
	b := client{t: t, base: base, token: "tok-b"}

	for i, call := range []string{"g1", "g2"} {
		if res := a.post("/v1/executions", execReq("s1", call, "gated.echo", `{"msg":"x"}`)).result(t); res.Status != host.StatusAwaitingApproval {
			t.Fatalf("gated %d: %+v", i, res)
		}
	}
	p := a.post("/v1/executions", execReq("s1", "g3", "gated.echo", `{"msg":"x"}`)).problem(t, CodePendingApprovalsLimit)
	if !strings.Contains(p.Detail, `2 executions await approval in namespace "tenant-a"`) {
		t.Errorf("detail: %q", p.Detail)
	}
	if again := a.post("/v1/executions", execReq("s1", "g1", "gated.echo", `{"msg":"x"}`)).result(t); again.Status != host.StatusAwaitingApproval {
		t.Errorf("a recorded call at the limit: %+v", again)
	}
	a.post("/v1/executions", execReq("s1", "big", "noop.echo", `{"msg":"`+strings.Repeat("x", 100)+`"}`)).problem(t, CodeArgumentsTooLarge)
	r := a.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{}`))
	r.problem(t, CodeRateLimited)
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2 (one call per 2 s)", got)
	}
	for _, id := range []string{"g3", "big", "c1"} {
		a.get("/v1/executions/"+ledger.ExecutionID("tenant-a", "s1", id)).problem(t, CodeNotFound)
	}
	// tenant-b has no limits, and tenant-a's do not touch it.
	for i := range 3 {
		b.post("/v1/executions", execReq("s1", "g"+string(rune('0'+i)), "gated.echo", `{"msg":"x"}`)).result(t)
	}
	env.clock.Advance(2 * time.Second)
	a.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{}`)).result(t)
}

// TestMetricsNeedEveryNamespace: /metrics adds up every tenant's calls and
// approvals, so a principal bound to namespaces is refused there (403
// namespace_forbidden) and reads no byte of it, whatever its roles; a
// scraper of every namespace reads the counts.
func TestMetricsNeedEveryNamespace(t *testing.T) {
	env := newTestExecutor(t)
	ps := append(append([]Principal{}, tenants...),
		Principal{Name: "prom", Roles: []Role{RoleMetrics}, Token: "tok-prom"},
		Principal{Name: "prom-a", Roles: []Role{RoleMetrics}, Token: "tok-prom-a", Namespaces: []string{"tenant-a"}})
	base := env.serve(t, Options{Principals: ps}).URL
	b := client{t: t, base: base, token: "tok-b"}
	b.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{"msg":"b"}`)).result(t)
	for _, tok := range []string{"tok-a", "tok-rita", "tok-olga", "tok-prom-a"} {
		r := client{t: t, base: base, token: tok}.get("/metrics")
		r.problem(t, CodeNamespaceForbidden)
		if strings.Contains(string(r.body), "connhost_") {
			t.Errorf("%s read metrics in its refusal: %s", tok, r.body)
		}
	}
	r := client{t: t, base: base, token: "tok-prom"}.get("/metrics")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), MetricWaiting) {
		t.Fatalf("the scraper of every namespace: %d\n%s", r.status, r.body)
	}
}
