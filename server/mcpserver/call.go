package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// callTool is the tools/call handler of every tool.
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if sc, ok := scopeOf(req); ok {
		// The principal's namespaces and limits bind the call, the
		// approval in its dialog and its cancellation. The SDK hands
		// the handler its HTTP request's context, where httpapi put the
		// scope already; the session's TokenInfo keeps it whatever
		// context a later SDK hands over.
		ctx = host.WithScope(ctx, sc)
	}
	who := s.callerOf(req)
	st, err := s.stateOf(req, who)
	if err != nil {
		return nil, stateProblem(err)
	}
	id, err := s.identityOf(req, st, who)
	if err != nil {
		return refused(identity{}, httpapi.NewProblem(httpapi.CodeBadRequest, err.Error())), nil
	}
	if err := st.belongsTo(id); err != nil {
		return nil, stateProblem(err)
	}
	co, err := callOptionsOf(req.Params.Meta)
	if err == nil {
		err = co.check(id)
	}
	if err != nil {
		return refused(id, httpapi.NewProblem(httpapi.CodeBadRequest, err.Error())), nil
	}
	tool := s.tools[req.Params.Name] // the SDK dispatched on a listed name
	if id.Kind == IdentityPerRequest && tool.effects {
		switch s.opts.PerRequest {
		case PerRequestRefuse:
			return refused(id, identityRequired(tool.name)), nil
		case PerRequestWarn:
			s.warned.Do(func() {
				s.opts.Logger.WarnContext(ctx, "mcpserver: a side-effecting tools/call came without a stable identity; it runs with an identity of its request only, so a retry after a crash or disconnect would act again. Pass the ids as "+RecipeRef+" shows, or refuse such calls (serve does unless [mcp] allow_per_request_identity = true)",
					"tool", tool.name, "missing", MetaSessionID+", "+MetaToolCallID)
			})
		}
	}
	if p, err := s.waitStarted(ctx); err != nil || p != nil {
		if err != nil {
			return nil, err // the connection is gone
		}
		return refused(id, p), nil
	}
	args := req.Params.Arguments
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage(`{}`)
	}
	call := host.ToolCall{
		Namespace: id.Namespace, SessionID: id.SessionID, ToolCallID: id.ToolCallID,
		Tool: tool.canon, Arguments: args, Resumed: id.Resumed, Settle: co.settle, Note: id.note(s.opts.PerRequest),
	}
	progress := s.progressFunc(ctx, req)
	xctx := host.WithWaitNotify(ctx, func(r host.Result) { progress(r) })
	var deadline time.Time
	if s.opts.MaxWait > 0 {
		deadline = time.Now().Add(s.opts.MaxWait)
	}
	note := ""        // what the model should know beyond the status
	asked := false    // the client was asked for approval in this request
	held := false     // this request was held for a reviewer's decision
	linked := false   // the client was sent the console's page of the call
	elicitation := "" // the id of that URL-mode elicitation
	for {
		res, err := s.ex.Execute(xctx, call)
		if clientCancelled(ctx) {
			return s.cancel(ctx, who, id, res, err), nil
		}
		if err == nil && !asked && note == "" {
			note = stateNote(req, st, res)
		}
		if err != nil {
			if ctx.Err() != nil {
				// The connection is gone (not a cancellation): nobody
				// reads this, and the execution stays as recorded for
				// the client's retry.
				return nil, ctx.Err()
			}
			p := httpapi.ProblemOf(err, res)
			if p.Code == httpapi.CodeInternal || p.Code == httpapi.CodeUnavailable {
				s.opts.Logger.ErrorContext(ctx, "mcpserver: tools/call failed", "tool", call.Tool, "err", err)
			}
			return refused(id, p), nil
		}
		switch res.Status {
		case host.StatusAwaitingApproval:
			if !asked && who.approver != "" && elicits(req) {
				asked = true
				out, decided, why := s.askApproval(ctx, req, who, id, call, res, st)
				if out != nil {
					return out, nil // an input request (multi round trip)
				}
				if clientCancelled(ctx) {
					return s.cancel(ctx, who, id, res, nil), nil
				}
				note = why
				if decided {
					continue // drive the call from its new state
				}
			}
			if !asked && !linked && urlElicits(req) {
				// Not asked in the client's dialog: send the user to
				// the console's page of the call, where a reviewer
				// signed in decides. The answer decides nothing.
				linked = true
				out, eid, why := s.sendToConsole(ctx, req, res)
				if out != nil {
					return out, nil // an input request (multi round trip)
				}
				elicitation = eid
				if clientCancelled(ctx) {
					return s.cancel(ctx, who, id, res, nil), nil
				}
				if note == "" {
					note = why
				}
			}
			if hold := s.holdFor(ctx, id, co); !held && hold > 0 {
				// The client asked to wait, or no retry could find
				// this approval again: wait for the reviewer here.
				held = true
				decided, err := s.holdForDecision(ctx, req, res, hold)
				if clientCancelled(ctx) {
					return s.cancel(ctx, who, id, res, nil), nil
				}
				if err != nil {
					if errors.Is(err, errRequestGone) {
						s.opts.Logger.InfoContext(ctx, "mcpserver: the request of a held call ended; the execution stays as recorded for the client's re-send",
							"execution_id", res.ExecutionID)
					}
					return nil, err // the connection is gone
				}
				if decided {
					if elicitation != "" {
						s.elicitationComplete(ctx, req, elicitation)
					}
					continue
				}
			}
			return s.answerOrTask(ctx, id, res, note), nil
		case host.StatusPending:
			if deadline.IsZero() || res.NextAttemptAt.IsZero() || res.NextAttemptAt.After(deadline) {
				return s.answerOrTask(ctx, id, res, note), nil
			}
			progress(res)
			t := time.NewTimer(time.Until(res.NextAttemptAt))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				if clientCancelled(ctx) {
					return s.cancel(ctx, who, id, res, nil), nil
				}
				return nil, ctx.Err()
			}
			continue
		}
		return s.answer(id, res, note), nil
	}
}

// errRequestGone ends a held stateless call whose HTTP request has ended:
// nobody reads its answer, and the execution stays as recorded for the
// client's re-send with the same ids.
var errRequestGone = errors.New("mcpserver: the client's request has ended")

// holdProgressEvery is how often a held call sends the client progress.
const holdProgressEvery = 5 * time.Second

// holdForDecision waits, up to wait and the approval's expiry, until the
// gated execution res is no longer awaiting approval (a reviewer approved
// or rejected it, or it was cancelled or expired: host's AwaitDecision),
// sending the client a progress notification every holdProgressEvery if
// it gave a progress token (a client that resets its request timeout on
// progress keeps waiting). It reports whether the hold ended with the
// decision (or the expiry), for the caller to drive the call from there;
// err is the connection's end, or errRequestGone when the HTTP request of
// a stateless call ended.
func (s *Server) holdForDecision(ctx context.Context, req *mcp.CallToolRequest, res host.Result, wait time.Duration) (bool, error) {
	ap := res.Approval
	start := time.Now()
	until := start.Add(wait)
	if !ap.ExpiresAt.IsZero() && ap.ExpiresAt.Add(time.Second).Before(until) {
		until = ap.ExpiresAt.Add(time.Second) // AwaitDecision returns by then
	}
	hctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if gone := requestGone(ctx); gone != nil {
		go func() {
			select {
			case <-gone:
				stop(errRequestGone)
			case <-hctx.Done():
			}
		}()
	}
	token := req.Params.GetProgressToken()
	for {
		left := time.Until(until)
		if left <= 0 {
			return false, nil
		}
		if token != nil {
			msg := fmt.Sprintf("waiting for a human to approve (approval %s); waiting up to %s more", ap.ID, left.Round(time.Second))
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: time.Since(start).Seconds(), Message: msg,
			}); err != nil {
				s.opts.Logger.DebugContext(ctx, "mcpserver: progress notification", "err", err)
			}
			left = min(left, holdProgressEvery)
		}
		actx, cancel := context.WithTimeout(hctx, left)
		_, err := s.ex.AwaitDecision(actx, res.ExecutionID)
		cancel()
		switch {
		case err == nil:
			return true, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		case hctx.Err() != nil:
			return false, context.Cause(hctx)
		case errors.Is(err, context.DeadlineExceeded):
			// The slice ended: progress, then wait on.
		default:
			return false, err
		}
	}
}

// clientCancelled reports whether ctx was cancelled by the client's
// notifications/cancelled (or the end of its request), as opposed to the
// connection going away: the SDK cancels a request the client cancelled
// with no cause, and every request of a lost connection with the read
// error as the cause. A lost connection must not cancel the execution: the
// client's retry with the same ids continues it.
func clientCancelled(ctx context.Context) bool {
	return ctx.Err() != nil && context.Cause(ctx) == context.Canceled
}

// cancel records the client's cancellation of the call (as
// Executor.Cancel: cooperative) and answers with what the execution is now.
// The client has stopped waiting, so the answer is for the record.
func (s *Server) cancel(ctx context.Context, who caller, id identity, res host.Result, execErr error) *mcp.CallToolResult {
	execID := res.ExecutionID
	if execID == "" {
		if execErr != nil {
			return refused(id, httpapi.ProblemOf(execErr, res))
		}
		return s.answer(id, res, "")
	}
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer stop()
	out, err := s.ex.Cancel(cctx, execID, who.actor)
	if err != nil {
		s.opts.Logger.WarnContext(ctx, "mcpserver: cancel after notifications/cancelled", "execution_id", execID, "err", err)
		return refused(id, httpapi.ProblemOf(err, out))
	}
	s.opts.Logger.InfoContext(ctx, "mcpserver: cancelled by the client", "execution_id", execID, "status", out.Status)
	return s.answer(id, out, "the client cancelled the call")
}

// progressFunc returns the function that reports a pending execution to
// the client: a progress notification per retry (attempt n of the
// execution's cap), if the client gave a progress token.
func (s *Server) progressFunc(ctx context.Context, req *mcp.CallToolRequest) func(host.Result) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return func(host.Result) {}
	}
	last := -1
	return func(r host.Result) {
		if r.Attempt == last {
			return // one notice per attempt
		}
		last = r.Attempt
		msg := fmt.Sprintf("attempt %d did not complete (%s); next attempt at %s", r.Attempt, firstLine(r.Error), r.NextAttemptAt.UTC().Format(time.RFC3339))
		if r.Error == "" {
			msg = fmt.Sprintf("attempt %d pending; asking again at %s", r.Attempt, r.NextAttemptAt.UTC().Format(time.RFC3339))
		}
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: float64(r.Attempt), Message: msg,
		}); err != nil {
			s.opts.Logger.DebugContext(ctx, "mcpserver: progress notification", "err", err)
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "no detail"
	}
	return s
}

// refused is the isError result of a call the executor (or this server)
// refused: nothing was dispatched for it.
func refused(id identity, p *httpapi.Problem) *mcp.CallToolResult {
	r := Result{Status: "refused", Code: p.Code, Identity: id.Kind, IdentitySource: id.Source, Namespace: id.Namespace, SessionID: id.SessionID,
		ToolCallID: id.ToolCallID, ExecutionID: p.ExecutionID, Problem: p}
	text := fmt.Sprintf("Refused (%s): %s", p.Code, p.Detail)
	switch p.Code {
	case httpapi.CodeIntentMismatch:
		// The host's detail speaks to the integrator whose runtime
		// reused an id (it is in the problem); the model chooses no ids.
		text = fmt.Sprintf("Refused (%s): this tool-call id already names a call with other arguments (execution %s); nothing was done. "+
			"Do not issue this call again; tell the user the runtime reused a tool-call id.", p.Code, p.ExecutionID)
	case httpapi.CodeSessionFenced:
		text += " An operator has to resolve the uncertain call(s) first; nothing was done."
	case CodeIdentityRequired:
		text += " Do not issue this call again: it will be refused the same way. Tell the user the tool is not set up to run from here."
	case httpapi.CodeRateLimited, httpapi.CodeConnectorBusy:
		text += fmt.Sprintf(" Nothing was done; call the tool again with the same arguments and ids in %d s.", p.RetryAfter)
	case CodeStartFailed:
		text += " Do not issue this call again: it fails the same way until connhost is fixed and restarted. Tell the user why connhost could not start."
	case httpapi.CodePendingApprovalsLimit:
		text += " Nothing was done; call the tool again with the same arguments and ids once a human has decided earlier requests."
	}
	guide(&r, nextAfterRefusal(p.Code), text, "")
	return &mcp.CallToolResult{IsError: true, StructuredContent: r, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// answer is the result of a call the executor answered with a status.
func (s *Server) answer(id identity, res host.Result, note string) *mcp.CallToolResult {
	ns := res.Namespace // where the call ran: the principal's when _meta named none
	if ns == "" {
		ns = id.Namespace
	}
	r := Result{
		Status: string(res.Status), Identity: id.Kind, IdentitySource: id.Source, Namespace: ns, SessionID: id.SessionID,
		ToolCallID: id.ToolCallID, ExecutionID: res.ExecutionID, Result: &res,
	}
	var text strings.Builder
	isError := false
	resultPart := "" // the result in the text, which Message leaves out
	switch res.Status {
	case host.StatusSucceeded:
		fmt.Fprintf(&text, "Succeeded (execution %s", res.ExecutionID)
		if res.Receipt != "" {
			fmt.Fprintf(&text, ", receipt %s", res.Receipt)
		}
		text.WriteString(")")
		if res.Recorded {
			text.WriteString("; this is the recorded outcome of an earlier request, nothing was done again")
		}
		if res.DuplicateOf != "" {
			fmt.Fprintf(&text, "; this call repeats execution %s (same arguments, same session), whose outcome this is: nothing was done again", res.DuplicateOf)
		}
		text.WriteString(".")
		if len(res.Result) > 0 {
			resultPart = " Result: " + compact(res.Result)
			text.WriteString(resultPart)
		}
	case host.StatusAwaitingApproval:
		ap := res.Approval
		if res.DuplicateOf != "" {
			fmt.Fprintf(&text, "Held for a human: this call has the same arguments as execution %s, made shortly before in this session, so it may repeat it; nothing has been done. "+
				"A human must decide whether it runs (approval %s, arguments digest %s, expires %s).",
				res.DuplicateOf, ap.ID, ap.ArgsDigest, ap.ExpiresAt.UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintf(&text, "A human must approve this call before it runs; nothing has been done yet (approval %s, arguments digest %s, expires %s).",
				ap.ID, ap.ArgsDigest, ap.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if id.Kind == IdentityPerRequest {
			text.WriteString(" No one has decided yet. Do not issue this call again: a new call would ask for a second approval. Tell the user it waits for approval " + ap.ID + ".")
		} else {
			text.WriteString(" Do not issue this call again with other ids or other arguments: that would ask for a second approval. Tell the user it waits for approval; once it is approved, the runtime's retry of this same call runs it, once.")
		}
	case host.StatusPending:
		fmt.Fprintf(&text, "Not finished yet (attempt %d", res.Attempt)
		if !res.NextAttemptAt.IsZero() {
			fmt.Fprintf(&text, ", next attempt at %s", res.NextAttemptAt.UTC().Format(time.RFC3339))
		}
		text.WriteString("). Do not issue this call again with other ids: the runtime's retry of this same call returns its outcome, and it will not run twice.")
	case host.StatusRecoveryRequired:
		isError = true
		r.Code = httpapi.CodeRecoveryRequired
		fmt.Fprintf(&text, "Outcome unknown (recovery_required): the call may or may not have taken effect, and an operator must resolve execution %s before this session takes new calls. Do not retry it under a new id. %s",
			res.ExecutionID, firstLine(res.Error))
	default: // failed, rejected, expired, cancelled, abandoned
		isError = true
		fmt.Fprintf(&text, "Not done: %s (execution %s)", res.Status, res.ExecutionID)
		if res.Error != "" {
			fmt.Fprintf(&text, ": %s", firstLine(res.Error))
		}
		text.WriteString(".")
	}
	if note != "" {
		fmt.Fprintf(&text, " (%s)", note)
	}
	if id.Kind == IdentityPerRequest && s.tools[res.Tool].effects {
		text.WriteString(" Warning: this runtime passed no identity for the call, so connhost cannot recognise a retry of it: if you did not see the outcome of a call, do not issue it again; ask the user to check first.")
		if s.opts.PerRequest == PerRequestAllow {
			text.WriteString(" (This deployment allows calls without identity.)")
		}
	}
	guide(&r, nextAfter(res), text.String(), resultPart)
	return &mcp.CallToolResult{IsError: isError, StructuredContent: r, Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}}
}

func compact(b json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	s := buf.String()
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}
