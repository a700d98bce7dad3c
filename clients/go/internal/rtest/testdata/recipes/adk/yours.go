// What the ADK recipe of clients/go/README.md leaves to its user, written
// beside it by TestRecipesAsPasted: the conversation's ids and the model,
// scripted (see script.go).
package main

import (
	"context"
	"iter"
	"os"

	adkmodel "google.golang.org/adk/model"
	"google.golang.org/genai"
)

var (
	userID                 = "customer-1"
	sessionID              = os.Getenv("RECIPE_SESSION")
	model     adkmodel.LLM = scriptedLLM{}
)

type scriptedLLM struct{}

func (scriptedLLM) Name() string { return "scripted" }

func (scriptedLLM) GenerateContent(_ context.Context, req *adkmodel.LLMRequest, _ bool) iter.Seq2[*adkmodel.LLMResponse, error] {
	var last string
	var answered bool
	calls := 0
	for i, c := range req.Contents {
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil && p.FunctionCall.Name == tool:
				calls++
			case p.FunctionResponse != nil && p.FunctionResponse.Name == tool && i == len(req.Contents)-1:
				last, answered = responseText(p.FunctionResponse.Response), true
			}
		}
	}
	id, text := step(last, answered, calls)
	resp := &adkmodel.LLMResponse{TurnComplete: true, Content: genai.NewContentFromText(text, genai.RoleModel)}
	if id != "" {
		resp.Content = &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: id, Name: tool, Args: args}}}}
	}
	return func(yield func(*adkmodel.LLMResponse, error) bool) { yield(resp, nil) }
}
