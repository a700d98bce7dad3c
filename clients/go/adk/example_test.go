package adk_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/tool/toolconfirmation"
	"google.golang.org/genai"

	connadk "github.com/connhost/connhost/clients/go/adk"
	"github.com/connhost/connhost/clients/go/internal/scripted"
	"github.com/connhost/connhost/clients/go/internal/testkit"
	"github.com/connhost/connhost/host"
)

// Example runs an ADK agent whose payment needs a reviewer's approval.
// The call asks for ADK's tool confirmation and the run ends; a reviewer
// approves it in connhost (here ex.Approve; the console, `connhost
// approve` or the HTTP API alike); Resume answers the confirmation with
// that decision, and ADK runs the same call again: one charge, and the
// model is asked twice (the call, then the answer), never to issue the
// call again.
func Example() {
	ctx := context.Background()
	env, err := testkit.Start(ctx) // the payments connector and a Stripe emulator
	if err != nil {
		panic(err)
	}
	defer env.Close()
	data, _ := os.MkdirTemp("", "connhost-adk-example-")
	defer os.RemoveAll(data)
	ex, err := env.Open(ctx, data, env.Gated)
	if err != nil {
		panic(err)
	}
	defer ex.Close(ctx)
	model := scripted.New(scripted.Script{Tool: "payments_create_payment", CallID: "call-1",
		Args: map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}})

	// The glue: the adapter's tools in the agent, Resume before a run.
	ca, err := connadk.New(ex, connadk.Options{})
	if err != nil {
		panic(err)
	}
	a, err := llmagent.New(llmagent.Config{Name: "shop", Model: model.ADK(), Tools: ca.Tools()})
	if err != nil {
		panic(err)
	}
	svc := session.InMemoryService()
	r, err := runner.New(runner.Config{AppName: "shop", Agent: a, SessionService: svc, AutoCreateSession: true})
	if err != nil {
		panic(err)
	}
	run := func(msg *genai.Content) {
		for ev, err := range r.Run(ctx, "u1", "s1", msg, agent.RunConfig{}) {
			if err != nil {
				panic(err)
			}
			for _, p := range ev.Content.Parts {
				switch {
				case p.FunctionCall != nil && p.FunctionCall.Name == toolconfirmation.FunctionCallName:
					fmt.Println("confirmation requested")
				case p.Text != "":
					fmt.Println("model:", strings.TrimSpace(p.Text[:strings.Index(p.Text, "(")]))
				}
			}
		}
	}
	run(genai.NewContentFromText("Charge 5 USD to my card.", genai.RoleUser))

	sess := func() session.Session {
		got, err := svc.Get(ctx, &session.GetRequest{AppName: "shop", UserID: "u1", SessionID: "s1"})
		if err != nil {
			panic(err)
		}
		return got.Session
	}
	_, err = ca.Resume(ctx, sess())
	var waiting *connadk.AwaitingApprovalError
	fmt.Println("before a decision:", errors.As(err, &waiting), "charges:", env.Charges())

	// A reviewer approves, out of band.
	ap := waiting.Calls[0].Approval
	if _, err := ex.Approve(ctx, ap.ID, host.Decision{By: "rita", ArgsDigest: ap.ArgsDigest}); err != nil {
		panic(err)
	}
	msg, err := ca.Resume(ctx, sess())
	if err != nil {
		panic(err)
	}
	run(msg)
	fmt.Println("charges:", env.Charges(), "model requests:", model.Requests())
	// Output:
	// confirmation requested
	// before a decision: true charges: 0
	// model: Final answer. The tool said: Succeeded
	// charges: 1 model requests: 2
}
