package mcpserver

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/host"
)

// ConsolePage is the path, under Options.ConsoleURL, of the console's
// page of one execution (followed by its id): the call whole, its trail,
// and for a call that awaits approval the approve and reject buttons of a
// reviewer signed in to the console.
const ConsolePage = "/ui/executions/"

// consoleInput is the key of the console link among a result's input
// requests (protocol 2026-07-28 and later).
const consoleInput = "connhost_console"

// urlElicits reports whether the client declared URL-mode elicitation:
// in its session's capabilities (2025-11-25), or in the request's
// (2026-07-28, where the link is an input request).
func urlElicits(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	return req.Session != nil && caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// SetConsoleURL sets the URL humans reach the console at (Options.ConsoleURL)
// once it is known: `connhost serve` without [server] public_url learns
// its listen URL only when it listens. An empty base sends no links.
func (s *Server) SetConsoleURL(base string) {
	base = strings.TrimRight(base, "/")
	s.consoleURL.Store(&base)
}

// consoleBase is the console's base URL, "" when unknown.
func (s *Server) consoleBase() string {
	if p := s.consoleURL.Load(); p != nil {
		return *p
	}
	return ""
}

// sendToConsole sends the client's user, by a URL-mode elicitation, to
// the console's page of the gated execution res, where a reviewer signed
// in to the console approves or rejects it. The client's answer decides
// nothing (accept only says the user agreed to open the page). It returns
// the elicitation's id (the approval id; "" when nothing was sent) and
// what the model should know, never the link. From protocol 2026-07-28
// the link is an input request: out is the result to send instead, and
// the client's answer comes with its re-send of the call (unsigned: it
// decides nothing, so there is nothing to forge). See RATIONALE.md, "Why does
// a URL-mode link send the user to the console, and its answer decide
// nothing?".
func (s *Server) sendToConsole(ctx context.Context, req *mcp.CallToolRequest, res host.Result) (out *mcp.CallToolResult, eid, note string) {
	base := s.consoleBase()
	ap := res.Approval
	if base == "" || ap == nil {
		return nil, "", ""
	}
	page := base + ConsolePage + url.PathEscape(res.ExecutionID)
	params := &mcp.ElicitParams{
		Mode:          "url",
		Message:       s.consoleMessage(ctx, res),
		URL:           page,
		ElicitationID: ap.ID,
		Meta:          mcp.Meta{MetaApprovalID: ap.ID, MetaArgsDigest: ap.ArgsDigest},
	}
	var answer *mcp.ElicitResult
	if req.ProtocolVersion() >= mrtrVersion {
		resp, ok := req.Params.InputResponses[consoleInput]
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{consoleInput: params}}, "", ""
		}
		if answer, ok = resp.(*mcp.ElicitResult); !ok {
			return nil, ap.ID, "the client answered the console link with something else than an elicitation result"
		}
	} else {
		ectx, stop := context.WithDeadline(ctx, ap.ExpiresAt)
		defer stop()
		var err error
		if answer, err = req.Session.Elicit(ectx, params); err != nil {
			if ctx.Err() != nil {
				return nil, ap.ID, ""
			}
			s.opts.Logger.WarnContext(ctx, "mcpserver: the console link was not shown", "approval_id", ap.ID, "err", err)
			return nil, "", "the client could not show the link to the console: " + firstLine(err.Error())
		}
	}
	switch answer.Action {
	case "accept":
		return nil, ap.ID, "the user was given the console's page of this call, where a reviewer signed in to the console approves or rejects it"
	case "decline":
		return nil, ap.ID, "the user declined to open the console's page of this call; a reviewer can still approve or reject it there"
	default:
		return nil, ap.ID, "the link to the console's page of this call was dismissed; a reviewer can still approve or reject it there"
	}
}

// consoleMessage is the link's message: the tool, what the reviewer will
// see (the approval view: every argument, review fields and money first)
// when it fits the dialog's limits, else its field count, and who decides.
func (s *Server) consoleMessage(ctx context.Context, res host.Result) string {
	ap := res.Approval
	var b strings.Builder
	view, err := s.ex.ApprovalView(ctx, ap.ID)
	tool := res.Tool
	if err == nil {
		tool = view.Tool
	}
	fmt.Fprintf(&b, "An agent asks to run %s. It runs only once a reviewer approves it in connhost's console; nothing has been done yet.\n\n", tool)
	switch {
	case err != nil:
		s.opts.Logger.WarnContext(ctx, "mcpserver: the console link shows no approval view", "approval_id", ap.ID, "err", err)
	case len(view.Text) <= s.opts.MaxDialogBytes/2 && strings.Count(view.Text, "\n") < s.opts.MaxDialogLines/2:
		b.WriteString(view.Text)
		if !strings.HasSuffix(view.Text, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("\n")
	default:
		fmt.Fprintf(&b, "The call has %d arguments; the page shows every one.\n\n", len(view.Fields))
	}
	fmt.Fprintf(&b, "Open the page to see the call whole; signed in as an approver you can approve or reject it there (approval %s, expires %s). Answering this prompt decides nothing.",
		ap.ID, ap.ExpiresAt.UTC().Format(time.RFC3339))
	return b.String()
}

// elicitationComplete tells the client that the out-of-band interaction
// of URL-mode elicitation eid ended: the call it linked to was decided.
// A stateless request (2026-07-28) has no stream to send it on.
func (s *Server) elicitationComplete(ctx context.Context, req *mcp.CallToolRequest, eid string) {
	if req.ProtocolVersion() >= mrtrVersion {
		return
	}
	if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: eid}); err != nil && ctx.Err() == nil {
		s.opts.Logger.WarnContext(ctx, "mcpserver: notifications/elicitation/complete not sent", "elicitation_id", eid, "err", err)
	}
}
