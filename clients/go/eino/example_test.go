package eino_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	conneino "github.com/connhost/connhost/clients/go/eino"
	"github.com/connhost/connhost/clients/go/internal/scripted"
	"github.com/connhost/connhost/clients/go/internal/testkit"
	"github.com/connhost/connhost/host"
)

// memStore is a CheckPointStore in memory; an application keeps its
// checkpoints where they outlive the process (a file, Redis, a database).
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[id]
	return b, ok, nil
}

func (s *memStore) Set(_ context.Context, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = b
	return nil
}

// Example runs an Eino agent whose payment needs a reviewer's approval.
// The call interrupts the run and the Runner saves its checkpoint; a
// reviewer approves it in connhost (here ex.Approve; the console,
// `connhost approve` or the HTTP API alike); Resume resumes the run from
// the checkpoint and the same call runs: one charge, and the model is
// asked twice (the call, then the answer), never to issue the call again.
func Example() {
	ctx := context.Background()
	env, err := testkit.Start(ctx) // the payments connector and a Stripe emulator
	if err != nil {
		panic(err)
	}
	defer env.Close()
	data, _ := os.MkdirTemp("", "connhost-eino-example-")
	defer os.RemoveAll(data)
	ex, err := env.Open(ctx, data, env.Gated)
	if err != nil {
		panic(err)
	}
	defer ex.Close(ctx)
	model := scripted.New(scripted.Script{Tool: "payments_create_payment", CallID: "call-1",
		Args: map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}})

	// The glue: the adapter's tools in the agent, its Run and Resume.
	ce, err := conneino.New(ex, conneino.Options{})
	if err != nil {
		panic(err)
	}
	a, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "shop", Description: "pays", Model: model.Eino(),
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: ce.Tools()}}})
	if err != nil {
		panic(err)
	}
	r := adk.NewRunner(ctx, adk.RunnerConfig{Agent: a, CheckPointStore: &memStore{m: map[string][]byte{}}})
	var pending *conneino.Interrupt
	drain := func(it *adk.AsyncIterator[*adk.AgentEvent]) {
		for ev, ok := it.Next(); ok; ev, ok = it.Next() {
			switch {
			case ev.Err != nil:
				panic(ev.Err)
			case ev.Action != nil && ev.Action.Interrupted != nil:
				for _, ic := range ev.Action.Interrupted.InterruptContexts {
					if in, ok := ic.Info.(*conneino.Interrupt); ok && ic.IsRootCause {
						pending = in
						fmt.Println("interrupted:", in.Kind)
					}
				}
			case ev.Output != nil && ev.Output.MessageOutput != nil:
				if msg, err := ev.Output.MessageOutput.GetMessage(); err == nil && msg.Role == schema.Assistant && msg.Content != "" {
					fmt.Println("model:", strings.TrimSpace(msg.Content[:strings.Index(msg.Content, "(")]))
				}
			}
		}
	}
	drain(ce.Run(ctx, r, "run-1", []adk.Message{schema.UserMessage("Charge 5 USD to my card.")}))
	fmt.Println("charges:", env.Charges())

	// A reviewer approves, out of band.
	if _, err := ex.Approve(ctx, pending.ApprovalID, host.Decision{By: "rita", ArgsDigest: pending.ArgsDigest}); err != nil {
		panic(err)
	}
	it, err := ce.Resume(ctx, r, "run-1")
	if err != nil {
		panic(err)
	}
	drain(it)
	fmt.Println("charges:", env.Charges(), "model requests:", model.Requests())
	// Output:
	// interrupted: approval
	// charges: 0
	// model: Final answer. The tool said: Succeeded
	// charges: 1 model requests: 2
}
