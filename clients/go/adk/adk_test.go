package adk_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/tool/toolconfirmation"
	"google.golang.org/genai"

	connadk "github.com/connhost/connhost/clients/go/adk"
	"github.com/connhost/connhost/clients/go/internal/scripted"
	"github.com/connhost/connhost/clients/go/internal/testkit"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// fixture is an ADK application over an executor on the emulator, with a
// session service in memory.
type fixture struct {
	ctx   context.Context
	env   *testkit.Env
	ex    *host.Executor
	ca    *connadk.Adapter
	model *scripted.Model
	svc   session.Service
	r     *runner.Runner
}

func newFixture(t *testing.T, gated bool) *fixture {
	t.Helper()
	ctx := context.Background()
	env, err := testkit.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	dir := env.Ungated
	if gated {
		dir = env.Gated
	}
	ex, err := env.Open(ctx, t.TempDir(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ex.Close(ctx) })
	f := &fixture{ctx: ctx, env: env, ex: ex, svc: session.InMemoryService(),
		model: scripted.New(scripted.Script{Tool: "payments_create_payment", CallID: "call-1",
			Args: map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}})}
	if f.ca, err = connadk.New(ex, connadk.Options{}); err != nil {
		t.Fatal(err)
	}
	a, err := llmagent.New(llmagent.Config{Name: "shop", Model: f.model.ADK(), Tools: f.ca.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	if f.r, err = runner.New(runner.Config{AppName: "shop", Agent: a, SessionService: f.svc, AutoCreateSession: true}); err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs the agent with msg and returns the function calls it made.
func (f *fixture) run(t *testing.T, msg *genai.Content) (calls []*genai.FunctionCall) {
	t.Helper()
	for ev, err := range f.r.Run(f.ctx, "u1", "s1", msg, agent.RunConfig{}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ev.Content.Parts {
			if p.FunctionCall != nil {
				calls = append(calls, p.FunctionCall)
			}
		}
	}
	return calls
}

func (f *fixture) session(t *testing.T) session.Session {
	t.Helper()
	got, err := f.svc.Get(f.ctx, &session.GetRequest{AppName: "shop", UserID: "u1", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	return got.Session
}

// TestResumeCallThatNeverRan: the session holds the model's call, saved
// before a stop that came before the tool ran. Resume settles it by its
// ids: it never reached connhost, so it did not run, and the model is told
// it may issue it again; it does, under a new id, and that call charges
// once.
func TestResumeCallThatNeverRan(t *testing.T) {
	f := newFixture(t, false)
	created, err := f.svc.Create(f.ctx, &session.CreateRequest{AppName: "shop", UserID: "u1", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []*session.Event{
		{Author: "user", LLMResponse: model.LLMResponse{Content: genai.NewContentFromText("Charge 5 USD.", genai.RoleUser)}},
		{Author: "shop", LLMResponse: model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{
			ID: "call-1", Name: "payments_create_payment", Args: map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}}}}}}},
	} {
		ev.ID, ev.InvocationID = "ev-"+ev.Author, "inv-1"
		if err := f.svc.AppendEvent(f.ctx, created.Session, ev); err != nil {
			t.Fatal(err)
		}
	}

	msg, err := f.ca.Resume(f.ctx, f.session(t))
	if err != nil {
		t.Fatal(err)
	}
	if msg == nil || len(msg.Parts) != 1 || msg.Parts[0].FunctionResponse == nil || msg.Parts[0].FunctionResponse.ID != "call-1" {
		t.Fatalf("Resume answered %+v, want the response of call-1", msg)
	}
	resp := msg.Parts[0].FunctionResponse.Response
	if resp["status"] != "cancelled" || !strings.Contains(resp["message"].(string), "did not run") {
		t.Fatalf("call-1 was answered %v, want: cancelled, it did not run", resp)
	}
	if got := f.env.Charges(); got != 0 {
		t.Fatalf("settling a call that never ran charged %d times", got)
	}
	// The original request, were it still on its way, does not run now.
	late, err := f.ex.Execute(f.ctx, host.ToolCall{SessionID: "s1", ToolCallID: "call-1", Tool: "payments.create_payment",
		Arguments: []byte(`{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`)})
	if err != nil || late.Status != host.StatusCancelled || f.env.Charges() != 0 {
		t.Fatalf("the original request, late, answered %s (%v), %d charges; want cancelled, none", late.Status, err, f.env.Charges())
	}

	calls := f.run(t, msg)
	if len(calls) != 1 || calls[0].ID != "call-1-2" {
		t.Fatalf("the model issued %v, want the payment again under a new id", calls)
	}
	if got := f.env.Charges(); got != 1 {
		t.Fatalf("the provider charged %d times, want 1", got)
	}
	if again, err := f.ca.Resume(f.ctx, f.session(t)); err != nil || again != nil {
		t.Fatalf("Resume after the run answered %v, %v; want nothing to do", again, err)
	}
}

// TestDeclinedByTheApplication: the application answers a connhost
// confirmation "not confirmed" itself, before any reviewer decided: the
// call is withdrawn in connhost (cancelled), nothing is charged, and the
// model is told.
func TestDeclinedByTheApplication(t *testing.T) {
	f := newFixture(t, true)
	calls := f.run(t, genai.NewContentFromText("Charge 5 USD.", genai.RoleUser))
	var confirm *genai.FunctionCall
	for _, c := range calls {
		if c.Name == toolconfirmation.FunctionCallName {
			confirm = c
		}
	}
	if confirm == nil {
		t.Fatalf("the gated call made %v, want a confirmation request", calls)
	}
	f.run(t, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{
		ID: confirm.ID, Name: toolconfirmation.FunctionCallName, Response: map[string]any{"confirmed": false}}}}})
	res := f.model.Results()
	if len(res) != 1 || !strings.HasPrefix(res[0], "Not done: cancelled") {
		t.Fatalf("the model read %q, want the cancellation", res)
	}
	rec, _, err := f.ex.Get(f.ctx, ledger.ExecutionID(ledger.DefaultNamespace, "s1", "call-1"))
	if err != nil || rec.State != ledger.StateCancelled {
		t.Fatalf("the execution is %s (%v), want cancelled", rec.State, err)
	}
	if got := f.env.Charges(); got != 0 {
		t.Fatalf("the provider charged %d times for a declined call", got)
	}
}
