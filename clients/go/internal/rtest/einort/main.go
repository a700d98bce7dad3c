// Command einort is an Eino application for the adapters' process tests:
// a ChatModelAgent with a scripted model that makes one payment, run by an
// adk.Runner whose checkpoints are files, and connhost's executor embedded
// through clients/go/eino — or, in phase plain, MCP tools called through
// the official MCP Go SDK (as eino-ext's officialmcp tools do) against
// connhost serve's /mcp, without the adapter. It prints an rt.Report as its
// last line.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	conneino "github.com/connhost/connhost/clients/go/eino"
	"github.com/connhost/connhost/clients/go/internal/rtest/rt"
)

func main() {
	c := rt.Load()
	ctx := context.Background()
	model := c.Model()

	var ce *conneino.Adapter
	var tools []tool.BaseTool
	if c.Phase == "plain" {
		tools = mcpTools(ctx, c)
	} else {
		ex := c.Open(ctx)
		defer ex.Close(ctx)
		var err error
		if ce, err = conneino.New(ex, conneino.Options{ApprovalWait: c.Wait()}); err != nil {
			rt.Fail(err)
		}
		tools = ce.Tools()
	}
	a, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "shop", Description: "makes payments", Model: model.Eino(),
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: tools}}})
	if err != nil {
		rt.Fail(err)
	}
	r := adk.NewRunner(ctx, adk.RunnerConfig{Agent: a, CheckPointStore: fileStore(c.State)})

	var rep rt.Report
	msgs := []adk.Message{schema.UserMessage("Charge 5 USD to my card.")}
	var it *adk.AsyncIterator[*adk.AgentEvent]
	switch {
	case ce == nil:
		it = r.Run(ctx, msgs, adk.WithCheckPointID(c.Session))
	case c.Phase == "resume":
		if it, err = ce.Resume(ctx, r, c.Session); err != nil {
			rt.Fail(err)
		}
	default:
		it = ce.Run(ctx, r, c.Session, msgs)
	}
	for ev, ok := it.Next(); ok; ev, ok = it.Next() {
		switch {
		case ev.Err != nil:
			rt.Fail(fmt.Errorf("run: %w", ev.Err))
		case ev.Action != nil && ev.Action.Interrupted != nil:
			for _, ic := range ev.Action.Interrupted.InterruptContexts {
				if in, ok := ic.Info.(*conneino.Interrupt); ok && ic.IsRootCause && in.Kind == conneino.KindApproval {
					rep.Paused, rep.ApprovalID, rep.ArgsDigest = true, in.ApprovalID, in.ArgsDigest
				}
			}
		case ev.Output != nil && ev.Output.MessageOutput != nil:
			if msg, err := ev.Output.MessageOutput.GetMessage(); err == nil && msg.Role == schema.Assistant && msg.Content != "" {
				rep.Final = msg.Content
			}
		}
	}
	rep.Results, rep.Requests = model.Results(), model.Requests()
	rt.Print(rep)
}

// fileStore keeps each checkpoint in a file of dir, written whole and
// synced before Set returns.
type fileStore string

func (d fileStore) path(id string) string { return filepath.Join(string(d), id+".ckpt") }

func (d fileStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	b, err := os.ReadFile(d.path(id))
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (d fileStore) Set(_ context.Context, id string, b []byte) error {
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(string(d), id+".tmp-*")
	if err != nil {
		return err
	}
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
	if err := os.Rename(f.Name(), d.path(id)); err != nil {
		return err
	}
	dir, err := os.Open(string(d))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// mcpTools lists the tools of connhost serve's /mcp as Eino tools that
// call them through the MCP Go SDK, with the arguments only: what an Eino
// application's MCP tools send.
func mcpTools(ctx context.Context, c rt.Config) []tool.BaseTool {
	client := mcp.NewClient(&mcp.Implementation{Name: "einort", Version: "1.0.0"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: c.MCPURL, HTTPClient: &http.Client{Transport: rt.BearerTransport{Token: c.MCPToken}},
	}, nil)
	if err != nil {
		rt.Fail(fmt.Errorf("connect %s: %w", c.MCPURL, err))
	}
	list, err := sess.ListTools(ctx, nil)
	if err != nil {
		rt.Fail(err)
	}
	var out []tool.BaseTool
	for _, t := range list.Tools {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			rt.Fail(err)
		}
		s := &jsonschema.Schema{}
		if err := json.Unmarshal(b, s); err != nil {
			rt.Fail(err)
		}
		out = append(out, &mcpTool{sess: sess, info: &schema.ToolInfo{Name: t.Name, Desc: t.Description, ParamsOneOf: schema.NewParamsOneOfByJSONSchema(s)}})
	}
	return out
}

type mcpTool struct {
	sess *mcp.ClientSession
	info *schema.ToolInfo
}

func (t *mcpTool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

func (t *mcpTool) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	res, err := t.sess.CallTool(ctx, &mcp.CallToolParams{Name: t.info.Name, Arguments: json.RawMessage(args)})
	if err != nil {
		return "", err
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), nil
}
