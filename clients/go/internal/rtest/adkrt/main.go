// Command adkrt is an ADK for Go application for the adapters' process
// tests: an LLM agent with a scripted model that makes one payment, its
// session in ADK's database session service (SQLite), and connhost's
// executor embedded through clients/go/adk — or, in phase plain, ADK's own
// MCP integration (mcptoolset) against connhost serve's /mcp without the
// adapter. It prints an rt.Report as its last line.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/glebarez/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/session/database"
	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/mcptoolset"
	"google.golang.org/genai"

	connadk "github.com/connhost/connhost/clients/go/adk"
	"github.com/connhost/connhost/clients/go/internal/rtest/rt"
)

const (
	app  = "shop"
	user = "u1"
)

func main() {
	c := rt.Load()
	ctx := context.Background()
	model := c.Model()
	svc, err := database.NewSessionService(sqlite.Open(c.State))
	if err != nil {
		rt.Fail(err)
	}
	if err := database.AutoMigrate(svc); err != nil {
		rt.Fail(err)
	}

	var ca *connadk.Adapter
	cfg := llmagent.Config{Name: app, Description: "makes payments", Model: model.ADK()}
	if c.Phase == "plain" {
		ts, err := mcptoolset.New(mcptoolset.Config{Transport: &mcp.StreamableClientTransport{
			Endpoint: c.MCPURL, HTTPClient: &http.Client{Transport: rt.BearerTransport{Token: c.MCPToken}},
		}})
		if err != nil {
			rt.Fail(err)
		}
		cfg.Toolsets = []tool.Toolset{ts}
	} else {
		ex := c.Open(ctx)
		defer ex.Close(ctx)
		if ca, err = connadk.New(ex, connadk.Options{ApprovalWait: c.Wait()}); err != nil {
			rt.Fail(err)
		}
		cfg.Tools = ca.Tools()
	}
	a, err := llmagent.New(cfg)
	if err != nil {
		rt.Fail(err)
	}
	r, err := runner.New(runner.Config{AppName: app, Agent: a, SessionService: svc, AutoCreateSession: true})
	if err != nil {
		rt.Fail(err)
	}

	var rep rt.Report
	run := func(msg *genai.Content) {
		for ev, err := range r.Run(ctx, user, c.Session, msg, agent.RunConfig{}) {
			if err != nil {
				rt.Fail(fmt.Errorf("run: %w", err))
			}
			if ev.Author != app || ev.Content == nil {
				continue
			}
			for _, p := range ev.Content.Parts {
				if p.Text != "" {
					rep.Final = p.Text
				}
			}
		}
	}
	if c.Phase != "resume" {
		run(genai.NewContentFromText("Charge 5 USD to my card.", genai.RoleUser))
	}
	// Before each continuation: reconcile the session, answer its
	// confirmations with the reviewers' decisions.
	for ca != nil {
		got, err := svc.Get(ctx, &session.GetRequest{AppName: app, UserID: user, SessionID: c.Session})
		if err != nil {
			rt.Fail(err)
		}
		msg, err := ca.Resume(ctx, got.Session)
		var waiting *connadk.AwaitingApprovalError
		if errors.As(err, &waiting) {
			rep.Paused = true
			if ap := waiting.Calls[0].Approval; ap != nil {
				rep.ApprovalID, rep.ArgsDigest = ap.ID, ap.ArgsDigest
			}
			break
		}
		if err != nil {
			rt.Fail(err)
		}
		if msg == nil {
			break
		}
		run(msg)
	}
	rep.Results, rep.Requests = model.Results(), model.Requests()
	rt.Print(rep)
}
