package eino

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/connhost/connhost/clients/go/internal/scripted"
	"github.com/connhost/connhost/clients/go/internal/testkit"
	"github.com/connhost/connhost/host"
)

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

// drain reads an iteration to its end and returns the connhost
// interrupts it ended with.
func drain(t *testing.T, it *adk.AsyncIterator[*adk.AgentEvent]) (interrupts []*Interrupt) {
	t.Helper()
	for ev, ok := it.Next(); ok; ev, ok = it.Next() {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if ev.Action != nil && ev.Action.Interrupted != nil {
			for _, ic := range ev.Action.Interrupted.InterruptContexts {
				if in, ok := ic.Info.(*Interrupt); ok && ic.IsRootCause {
					interrupts = append(interrupts, in)
				}
			}
		}
	}
	return interrupts
}

// TestResumeCallThatNeverRan: the run stops right after the checkpoint
// that saved the model's call, before the call ran. Resumed, the call is
// settled by its ids: it never reached connhost, so it did not run, and
// the model is told it may issue it again; it does, under a new id, and
// that call charges once.
func TestResumeCallThatNeverRan(t *testing.T) {
	ctx := context.Background()
	env, err := testkit.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	ex, err := env.Open(ctx, t.TempDir(), env.Ungated)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close(ctx)
	model := scripted.New(scripted.Script{Tool: "payments_create_payment", CallID: "call-1",
		Args: map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}})
	ce, err := New(ex, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "shop", Description: "pays", Model: model.Eino(),
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: ce.Tools()}}})
	if err != nil {
		t.Fatal(err)
	}
	r := adk.NewRunner(ctx, adk.RunnerConfig{Agent: a, CheckPointStore: &memStore{m: map[string][]byte{}}})

	// The run as Run starts it, stopped at the save interrupt: the
	// adapter never resumed it past the save.
	in := drain(t, r.Run(ctx, []adk.Message{schema.UserMessage("Charge 5 USD.")}, ce.runOptions("run-1", nil)...))
	if len(in) != 1 || in[0].Kind != KindSave || in[0].ToolCallID != "call-1" {
		t.Fatalf("the run stopped on %+v, want the save interrupt of call-1", in)
	}

	it, err := ce.Resume(ctx, r, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if in := drain(t, it); len(in) != 0 {
		t.Fatalf("the resumed run stopped on %+v", in)
	}
	res := model.Results()
	if len(res) != 2 || !strings.Contains(res[0], "did not run") || !strings.HasPrefix(res[1], "Succeeded") {
		t.Fatalf("the model read %q, want: call-1 did not run, then the success of the call it issued again", res)
	}
	if got := env.Charges(); got != 1 {
		t.Fatalf("the provider charged %d times, want 1", got)
	}
	// The original call's ids are recorded as never run: a late request
	// under them does not run.
	late, err := ex.Execute(ctx, host.ToolCall{SessionID: "run-1", ToolCallID: "call-1", Tool: "payments.create_payment",
		Arguments: []byte(`{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`)})
	if err != nil || late.Status != host.StatusCancelled || late.Error != host.NeverReceived || env.Charges() != 1 {
		t.Fatalf("the original request, late, answered %s %q (%v), %d charges; want cancelled, never received, 1 charge", late.Status, late.Error, err, env.Charges())
	}
}
