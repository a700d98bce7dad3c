// Package scripted holds the scripted models the adapters' examples and
// runtime tests drive ADK and Eino with: a model that issues one tool call,
// reads its result and answers, and counts the requests it was asked.
//
// It behaves as a model that follows the tool's guidance: it issues the
// call again (under a new id) only when told the call did not run and may
// be issued again; otherwise it answers with the text the tool returned.
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"strings"
	"sync"

	einomodel "github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	adkmodel "google.golang.org/adk/model"
	"google.golang.org/genai"
)

// Script is what the model does.
type Script struct {
	// Tool is the model name of the tool it calls.
	Tool string
	// Args are the call's arguments.
	Args map[string]any
	// CallID is the first call's id; a call issued again gets CallID-2,
	// CallID-3, ….
	CallID string
	// CountFile, when set, gets one line per request, so that requests
	// made by a process that was killed are counted too.
	CountFile string
}

// Model counts its requests and remembers the tool results it read.
type Model struct {
	s Script

	mu       sync.Mutex
	requests int
	results  []string
}

// New returns a model that follows s.
func New(s Script) *Model { return &Model{s: s} }

// Requests is how many requests this model was asked.
func (m *Model) Requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

// Results are the tool results the model read, in order (each once).
func (m *Model) Results() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.results...)
}

// CountedRequests reads how many requests CountFile records.
func CountedRequests(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// againMarker is the end of the text a call that never ran is answered
// with (clients/go/internal/toolcall).
const againMarker = "If it is still wanted, issue it again."

// step decides the next turn from the last tool result (ok false: none
// yet) and how many calls the conversation holds: a call (id) or a final
// text.
func (m *Model) step(last string, ok bool, calls int) (callID, text string) {
	m.mu.Lock()
	m.requests++
	if ok {
		m.results = append(m.results, last)
	}
	m.mu.Unlock()
	if m.s.CountFile != "" {
		if f, err := os.OpenFile(m.s.CountFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = f.WriteString("request\n")
			_ = f.Close()
		}
	}
	switch {
	case !ok:
		return m.s.CallID, ""
	case strings.Contains(last, againMarker):
		return fmt.Sprintf("%s-%d", m.s.CallID, calls+1), ""
	}
	return "", "Final answer. The tool said: " + last
}

// ADK returns the model as ADK's model.LLM.
func (m *Model) ADK() adkmodel.LLM { return adkLLM{m} }

type adkLLM struct{ m *Model }

func (adkLLM) Name() string { return "scripted" }

func (l adkLLM) GenerateContent(_ context.Context, req *adkmodel.LLMRequest, _ bool) iter.Seq2[*adkmodel.LLMResponse, error] {
	var last string
	var ok bool
	calls := 0
	for i, c := range req.Contents {
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil && p.FunctionCall.Name == l.m.s.Tool:
				calls++
			case p.FunctionResponse != nil && p.FunctionResponse.Name == l.m.s.Tool && i == len(req.Contents)-1:
				last, ok = responseText(p.FunctionResponse.Response), true
			}
		}
	}
	id, text := l.m.step(last, ok, calls)
	resp := &adkmodel.LLMResponse{TurnComplete: true}
	if id != "" {
		resp.Content = &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: id, Name: l.m.s.Tool, Args: l.m.s.Args}}}}
	} else {
		resp.Content = genai.NewContentFromText(text, genai.RoleModel)
	}
	return func(yield func(*adkmodel.LLMResponse, error) bool) { yield(resp, nil) }
}

// responseText is the text of an ADK function response: the adapter's
// "message" field, or the response as JSON.
func responseText(r map[string]any) string {
	if s, ok := r["message"].(string); ok {
		return s
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// Eino returns the model as Eino's model.ToolCallingChatModel.
func (m *Model) Eino() einomodel.ToolCallingChatModel { return einoModel{m} }

type einoModel struct{ m *Model }

func (e einoModel) WithTools([]*schema.ToolInfo) (einomodel.ToolCallingChatModel, error) {
	return e, nil
}

func (e einoModel) Generate(_ context.Context, input []*schema.Message, _ ...einomodel.Option) (*schema.Message, error) {
	var last string
	var ok bool
	calls := 0
	for i, msg := range input {
		for _, tc := range msg.ToolCalls {
			if tc.Function.Name == e.m.s.Tool {
				calls++
			}
		}
		if msg.Role == schema.Tool && i == len(input)-1 {
			last, ok = msg.Content, true
		}
	}
	id, text := e.m.step(last, ok, calls)
	if id == "" {
		return schema.AssistantMessage(text, nil), nil
	}
	args, err := json.Marshal(e.m.s.Args)
	if err != nil {
		return nil, err
	}
	return schema.AssistantMessage("", []schema.ToolCall{{ID: id, Type: "function",
		Function: schema.FunctionCall{Name: e.m.s.Tool, Arguments: string(args)}}}), nil
}

func (e einoModel) Stream(ctx context.Context, input []*schema.Message, opts ...einomodel.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := e.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}
