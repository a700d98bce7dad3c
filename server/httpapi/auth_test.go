package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// principals of the tests: the runtime, an approver and an operator.
func testPrincipals() []Principal {
	return []Principal{
		{Name: "runtime", Roles: []Role{RoleRuntime}, Token: "tok-runtime"},
		{Name: "rita", Roles: []Role{RoleApprover}, Token: "tok-rita"},
		{Name: "olga", Roles: []Role{RoleOperator}, Token: "tok-olga"},
	}
}

// state reads an execution's ledger state and its last event.
func (c client) state(t *testing.T, id string) (ledger.State, ledger.Event) {
	t.Helper()
	var view Execution
	c.get("/v1/executions/"+id).decode(t, &view)
	if len(view.Events) == 0 {
		t.Fatalf("%s has no events", id)
	}
	return view.State, view.Events[len(view.Events)-1]
}

// TestRuntimeTokenCannotDecide: the runtime's credential executes but can
// never approve, reject or resolve, whatever its body says; the execution
// stays where it was.
func TestRuntimeTokenCannotDecide(t *testing.T) {
	env := newTestExecutor(t)
	srv := env.serve(t, Options{Principals: testPrincipals()})
	runtime := client{t: t, base: srv.URL, token: "tok-runtime"}

	gated := runtime.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{"msg":"pay"}`)).result(t)
	if gated.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated: %+v", gated)
	}
	for _, verb := range []string{"approve", "reject"} {
		p := runtime.post("/v1/approvals/"+gated.Approval.ID+"/"+verb, DecisionRequest{By: "anyone", Digest: gated.Approval.ArgsDigest}).problem(t, CodeForbiddenRole)
		if !strings.Contains(p.Detail, "needs role approver") || !strings.Contains(p.Detail, `"runtime"`) || !slices.Equal(p.RequiredRoles, []Role{RoleApprover}) {
			t.Errorf("%s: problem %+v", verb, p)
		}
	}
	if st, _ := runtime.state(t, gated.ExecutionID); st != ledger.StateAwaitingApproval {
		t.Fatalf("after refused decisions: %s", st)
	}
	// Re-sending the call does not run it.
	if again := runtime.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{"msg":"pay"}`)).result(t); again.Status != host.StatusAwaitingApproval {
		t.Fatalf("re-sent call: %+v", again)
	}

	resumed := execReq("s-old", "c1", "noop.echo", `{}`)
	resumed["resumed"] = true
	rr := runtime.post("/v1/executions", resumed).result(t)
	p := runtime.post("/v1/executions/"+rr.ExecutionID+"/resolve", map[string]any{"applied": true, "by": "anyone", "reason": "trust me"}).problem(t, CodeForbiddenRole)
	if !strings.Contains(p.Detail, "needs role approver or operator") {
		t.Errorf("resolve problem: %+v", p)
	}
	if st, _ := runtime.state(t, rr.ExecutionID); st != ledger.StateRecoveryRequired {
		t.Fatalf("after refused resolve: %s", st)
	}
}

// TestReviewerIsTheCredential: the recorded reviewer and event actor are
// the authenticated principal's name; a body naming someone else is
// refused and records nothing.
func TestReviewerIsTheCredential(t *testing.T) {
	env := newTestExecutor(t)
	srv := env.serve(t, Options{Principals: testPrincipals()})
	runtime := client{t: t, base: srv.URL, token: "tok-runtime"}
	rita := client{t: t, base: srv.URL, token: "tok-rita"}
	olga := client{t: t, base: srv.URL, token: "tok-olga"}

	call := execReq("s1", "c1", "gated.echo", `{"msg":"pay"}`)
	gated := runtime.post("/v1/executions", call).result(t)
	ap := gated.Approval

	p := rita.post("/v1/approvals/"+ap.ID+"/approve", DecisionRequest{By: "ceo", Digest: ap.ArgsDigest}).problem(t, CodeIdentityMismatch)
	if !strings.Contains(p.Detail, `"ceo"`) || !strings.Contains(p.Detail, `"rita"`) {
		t.Errorf("identity problem: %+v", p)
	}
	if st, _ := rita.state(t, gated.ExecutionID); st != ledger.StateAwaitingApproval {
		t.Fatalf("after a refused signature: %s", st)
	}
	// An operator is not an approver.
	olga.post("/v1/approvals/"+ap.ID+"/approve", DecisionRequest{Digest: ap.ArgsDigest}).problem(t, CodeForbiddenRole)

	approved := rita.post("/v1/approvals/"+ap.ID+"/approve", DecisionRequest{Digest: ap.ArgsDigest, Reason: "checked"}).result(t)
	if approved.Approval.Decision != "approved" {
		t.Fatalf("approve: %+v", approved)
	}
	var view Execution
	rita.get("/v1/executions/"+gated.ExecutionID).decode(t, &view)
	last := view.Events[len(view.Events)-1]
	if view.Approval.By != "rita" || last.Actor != "rita" || last.Decision != "approved" || last.Reason != "checked" {
		t.Fatalf("recorded approval %+v, event %+v", view.Approval, last)
	}
	if done := runtime.post("/v1/executions", call).result(t); done.Status != host.StatusSucceeded {
		t.Fatalf("re-driven: %+v", done)
	}

	// The body may name the principal itself.
	r2 := runtime.post("/v1/executions", execReq("s1", "c2", "gated.echo", `{}`)).result(t)
	rita.post("/v1/approvals/"+r2.Approval.ID+"/reject", DecisionRequest{By: "rita", Reason: "no"}).result(t)
	if st, ev := rita.state(t, r2.ExecutionID); st != ledger.StateRejected || ev.Actor != "rita" {
		t.Fatalf("reject: %s %+v", st, ev)
	}

	// Resolve and cancel: the operator's name, not the body's.
	resumed := execReq("s-old", "c1", "noop.echo", `{}`)
	resumed["resumed"] = true
	rr := runtime.post("/v1/executions", resumed).result(t)
	olga.post("/v1/executions/"+rr.ExecutionID+"/resolve", map[string]any{"applied": false, "by": "rita", "reason": "x"}).problem(t, CodeIdentityMismatch)
	olga.post("/v1/executions/"+rr.ExecutionID+"/resolve", map[string]any{"applied": false, "reason": "no trace"}).result(t)
	if st, ev := olga.state(t, rr.ExecutionID); st != ledger.StateAbandoned || ev.Actor != "olga" {
		t.Fatalf("resolve: %s %+v", st, ev)
	}
	r3 := runtime.post("/v1/executions", execReq("s1", "c3", "gated.echo", `{}`)).result(t)
	rita.post("/v1/executions/"+r3.ExecutionID+"/cancel", "").problem(t, CodeForbiddenRole)
	runtime.post("/v1/executions/"+r3.ExecutionID+"/cancel", "").result(t)
	if st, ev := olga.state(t, r3.ExecutionID); st != ledger.StateCancelled || ev.Actor != "runtime" {
		t.Fatalf("cancel: %s %+v", st, ev)
	}
}

// TestApprovalNotConfigured: a server without an approver refuses the
// decisions with a code that says what to configure, with or without a
// runtime token; runtime routes keep working.
func TestApprovalNotConfigured(t *testing.T) {
	env := newTestExecutor(t)
	for name, opts := range map[string]Options{
		"runtime token only":    {Principals: testPrincipals()[:1]},
		"no credentials":        {},
		"operator, no approver": {Principals: []Principal{testPrincipals()[0], testPrincipals()[2]}},
	} {
		t.Run(name, func(t *testing.T) {
			c := client{t: t, base: env.serve(t, opts).URL, token: "tok-runtime"}
			if len(opts.Principals) == 0 {
				c.token = ""
			}
			gated := c.post("/v1/executions", execReq("s-"+name, "c1", "gated.echo", `{}`)).result(t)
			for _, verb := range []string{"approve", "reject"} {
				p := c.post("/v1/approvals/"+gated.Approval.ID+"/"+verb, DecisionRequest{Digest: gated.Approval.ArgsDigest}).problem(t, CodeApprovalNotConfigured)
				if !strings.Contains(p.Detail, "[[principals]]") || !strings.Contains(p.Detail, "role approver") {
					t.Errorf("%s: %+v", verb, p)
				}
			}
			if st, _ := c.state(t, gated.ExecutionID); st != ledger.StateAwaitingApproval {
				t.Fatalf("state %s", st)
			}
		})
	}
}

// TestDevLoopbackRecordsItself: without credentials and with every role
// (dev), decisions are recorded as dev-loopback; a name in the body is a
// claim kept in the reason, never the actor.
func TestDevLoopbackRecordsItself(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	gated := c.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{}`)).result(t)
	c.post("/v1/approvals/"+gated.Approval.ID+"/approve", DecisionRequest{By: "rita", Digest: gated.Approval.ArgsDigest, Reason: "looks fine"}).result(t)
	var view Execution
	c.get("/v1/executions/"+gated.ExecutionID).decode(t, &view)
	last := view.Events[len(view.Events)-1]
	if view.Approval.By != "dev-loopback" || last.Actor != "dev-loopback" || last.Reason != "claimed by rita: looks fine" {
		t.Fatalf("approval %+v, event %+v", view.Approval, last)
	}
}

// TestAuthOnlyKnownTokens: with principals, a request needs one of their
// tokens; there is no anonymous fallback, not even for reads.
func TestAuthOnlyKnownTokens(t *testing.T) {
	env := newTestExecutor(t)
	srv := env.serve(t, Options{Principals: testPrincipals()[1:]}) // approver and operator only
	anon := client{t: t, base: srv.URL}
	anon.get("/v1/executions").problem(t, CodeUnauthorized)
	anon.post("/v1/executions", execReq("s", "c", "noop.echo", `{}`)).problem(t, CodeUnauthorized)
	rita := client{t: t, base: srv.URL, token: "tok-rita"}
	rita.post("/v1/executions", execReq("s", "c", "noop.echo", `{}`)).problem(t, CodeForbiddenRole)
	if r := rita.get("/metrics"); r.status != http.StatusOK {
		t.Fatalf("metrics for an approver: %d", r.status)
	}
	if r := anon.get("/healthz"); r.status != http.StatusOK {
		t.Fatalf("healthz: %d", r.status)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := testPrincipals()
	if err := (&Options{Principals: good}).Validate(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	o := Options{Principals: []Principal{
		{Name: "rita", Roles: []Role{RoleApprover}, Token: "tok-dup-XYZ"},
		{Name: "rita", Roles: []Role{RoleOperator}, Token: "tok-other-XYZ"},
		{Name: "bob", Roles: []Role{"admin"}, Token: "tok-dup-XYZ"},
		{Name: "local:eve", Roles: []Role{RoleApprover}, Token: "t3"},
		{Name: "nobody", Token: "t4"},
		{Name: "empty", Roles: []Role{RoleRuntime}},
	}}
	err := o.Validate()
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{
		`principal 1: name "rita" is used twice`,
		`principal 2 "bob": unknown role "admin"`,
		`principals "rita" and "bob" have the same token`,
		`principal 3: name "local:eve" must match`,
		`principal 4 "nobody" has no role`,
		`principal 5 "empty" has an empty token`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "XYZ") {
		t.Errorf("error shows a token: %v", err)
	}
	env := newTestExecutor(t)
	if _, err := New(env.ex, o); err == nil {
		t.Fatal("New accepted invalid options")
	}
}

// TestRequestedByIsTheCredential: an execution records the principal whose
// token sent it (reviewers see who asked), and a later re-send by another
// principal does not rewrite it; a call through the Go API, with no
// credential, records none.
func TestRequestedByIsTheCredential(t *testing.T) {
	env := newTestExecutor(t)
	ps := append(testPrincipals(), Principal{Name: "other-runtime", Roles: []Role{RoleRuntime}, Token: "tok-other"})
	srv := env.serve(t, Options{Principals: ps})
	runtime := client{t: t, base: srv.URL, token: "tok-runtime"}
	other := client{t: t, base: srv.URL, token: "tok-other"}

	gated := runtime.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{"msg":"pay"}`)).result(t)
	if gated.RequestedBy != "runtime" {
		t.Fatalf("answer's requested_by = %q, want runtime", gated.RequestedBy)
	}
	var view Execution
	other.get("/v1/executions/"+gated.ExecutionID).decode(t, &view)
	if view.RequestedBy != "runtime" {
		t.Errorf("GET requested_by = %q, want runtime", view.RequestedBy)
	}
	if again := other.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{"msg":"pay"}`)).result(t); again.RequestedBy != "runtime" {
		t.Errorf("re-sent by another principal: requested_by = %q, want the first sender runtime", again.RequestedBy)
	}
	direct, err := env.ex.Execute(t.Context(), host.ToolCall{SessionID: "s2", ToolCallID: "c1", Tool: "noop.echo", Arguments: []byte(`{}`)})
	if err != nil || direct.RequestedBy != "" {
		t.Errorf("Go API call: requested_by = %q, err %v; want none", direct.RequestedBy, err)
	}
}
