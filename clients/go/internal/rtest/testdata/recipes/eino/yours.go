// What the Eino recipe of clients/go/README.md leaves to its user, written
// beside it by TestRecipesAsPasted: the run's id, a checkpoint store that
// outlives the process (a file per checkpoint) and the model, scripted
// (see script.go).
package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	einomodel "github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
)

var (
	runID                                = os.Getenv("RECIPE_SESSION")
	store                                = fileStore("checkpoints")
	model einomodel.ToolCallingChatModel = scriptedModel{}
)

// fileStore keeps each checkpoint in a file of its directory, written
// whole and synced before Set returns.
type fileStore string

func (d fileStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	b, err := os.ReadFile(filepath.Join(string(d), id))
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (d fileStore) Set(_ context.Context, id string, b []byte) error {
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(string(d), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(string(d), id))
}

type scriptedModel struct{}

func (m scriptedModel) WithTools([]*schema.ToolInfo) (einomodel.ToolCallingChatModel, error) {
	return m, nil
}

func (scriptedModel) Generate(_ context.Context, input []*schema.Message, _ ...einomodel.Option) (*schema.Message, error) {
	var last string
	var answered bool
	calls := 0
	for i, msg := range input {
		for _, tc := range msg.ToolCalls {
			if tc.Function.Name == tool {
				calls++
			}
		}
		if msg.Role == schema.Tool && i == len(input)-1 {
			last, answered = msg.Content, true
		}
	}
	id, text := step(last, answered, calls)
	if id == "" {
		return schema.AssistantMessage(text, nil), nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	return schema.AssistantMessage("", []schema.ToolCall{{ID: id, Type: "function",
		Function: schema.FunctionCall{Name: tool, Arguments: string(b)}}}), nil
}

func (m scriptedModel) Stream(ctx context.Context, input []*schema.Message, opts ...einomodel.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}
