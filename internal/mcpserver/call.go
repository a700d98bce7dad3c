package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/httpapi"
)

// identity is a call's resolved identity.
type identity struct {
	Namespace  string   `json:"ns,omitempty"`
	SessionID  string   `json:"s"`
	ToolCallID string   `json:"t"`
	Resumed    bool     `json:"r,omitempty"`
	Kind       Identity `json:"k"`
}

// errMeta reports a malformed identity in _meta.
var errMeta = errors.New("mcpserver: bad _meta identity")

// identityOf resolves a call's identity: from _meta when the client passed
// it, else from the signed request state of a multi-round-trip retry,
// else made up for this request alone.
func (s *Server) identityOf(req *mcp.CallToolRequest, st *requestState) (identity, error) {
	meta := req.Params.Meta
	str := func(key string) (string, bool, error) {
		v, ok := meta[key]
		if !ok || v == nil {
			return "", false, nil
		}
		sv, isStr := v.(string)
		if !isStr {
			return "", false, fmt.Errorf("%w: _meta %q must be a string, got %s", errMeta, key, jsonType(v))
		}
		return sv, true, nil
	}
	sess, hasSess, err1 := str(MetaSessionID)
	call, hasCall, err2 := str(MetaToolCallID)
	ns, _, err3 := str(MetaNamespace)
	if err := errors.Join(err1, err2, err3); err != nil {
		return identity{}, err
	}
	resumed := false
	if v, ok := meta[MetaResumed]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return identity{}, fmt.Errorf("%w: _meta %q must be a boolean, got %s", errMeta, MetaResumed, jsonType(v))
		}
		resumed = b
	}
	switch {
	case hasSess != hasCall:
		return identity{}, fmt.Errorf("%w: pass _meta %q and %q together: with only one, a retry could not be recognised", errMeta, MetaSessionID, MetaToolCallID)
	case hasSess:
		return identity{Namespace: ns, SessionID: sess, ToolCallID: call, Resumed: resumed, Kind: IdentityClient}, nil
	case resumed:
		return identity{}, fmt.Errorf("%w: _meta %q needs %q and %q: a call made up for one request cannot be resumed", errMeta, MetaResumed, MetaSessionID, MetaToolCallID)
	case st != nil:
		return st.ID, nil
	}
	conn := req.Session.ID()
	if conn == "" {
		conn = s.conn
	}
	return identity{Namespace: ns, SessionID: "mcp:" + conn, ToolCallID: "mcp-req:" + rand.Text(), Kind: IdentityPerRequest}, nil
}

func jsonType(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// perRequestNote is recorded in the audit trail of a call whose identity
// was made up for its request.
const perRequestNote = "mcp: the client passed no " + MetaSessionID + "/" + MetaToolCallID +
	" in _meta; identity derived for this request only (a client retry after a disconnect is a new call)"

// callTool is the tools/call handler of every tool.
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	st := s.verifyState(req.Params.RequestState)
	id, err := s.identityOf(req, st)
	if err != nil {
		return refused(identity{}, httpapi.NewProblem(httpapi.CodeBadRequest, err.Error())), nil
	}
	args := req.Params.Arguments
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage(`{}`)
	}
	call := host.ToolCall{
		Namespace: id.Namespace, SessionID: id.SessionID, ToolCallID: id.ToolCallID,
		Tool: req.Params.Name, Arguments: args, Resumed: id.Resumed,
	}
	if id.Kind == IdentityPerRequest {
		call.Note = perRequestNote
	}
	who := s.callerOf(req)
	progress := s.progressFunc(ctx, req)
	xctx := host.WithWaitNotify(ctx, func(r host.Result) { progress(r) })
	var deadline time.Time
	if s.opts.MaxWait > 0 {
		deadline = time.Now().Add(s.opts.MaxWait)
	}
	note := ""     // what the model should know beyond the status
	asked := false // the client was asked for approval in this request
	for {
		res, err := s.ex.Execute(xctx, call)
		if clientCancelled(ctx) {
			return s.cancel(ctx, who, id, res, err), nil
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
			if asked || who.approver == "" || !elicits(req) {
				return s.answer(id, res, note), nil
			}
			asked = true
			out, decided, why := s.askApproval(ctx, req, who, id, call, res, st)
			if out != nil {
				return out, nil // an input request (multi round trip)
			}
			if clientCancelled(ctx) {
				return s.cancel(ctx, who, id, res, nil), nil
			}
			if !decided {
				note = why
				return s.answer(id, res, note), nil
			}
			continue // decided: drive the call from its new state
		case host.StatusPending:
			if deadline.IsZero() || res.NextAttemptAt.IsZero() || res.NextAttemptAt.After(deadline) {
				return s.answer(id, res, note), nil
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
	r := Result{Status: "refused", Code: p.Code, Identity: id.Kind, Namespace: id.Namespace, SessionID: id.SessionID,
		ToolCallID: id.ToolCallID, ExecutionID: p.ExecutionID, Problem: p}
	text := fmt.Sprintf("Refused (%s): %s", p.Code, p.Detail)
	switch p.Code {
	case httpapi.CodeIntentMismatch:
		text += " This tool-call id was already used with other arguments; nothing was done. Use a new tool-call id for a new call."
	case httpapi.CodeSessionFenced:
		text += " An operator has to resolve the uncertain call(s) first; nothing was done."
	}
	return &mcp.CallToolResult{IsError: true, StructuredContent: r, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// answer is the result of a call the executor answered with a status.
func (s *Server) answer(id identity, res host.Result, note string) *mcp.CallToolResult {
	r := Result{
		Status: string(res.Status), Identity: id.Kind, Namespace: id.Namespace, SessionID: id.SessionID,
		ToolCallID: id.ToolCallID, ExecutionID: res.ExecutionID, Attempt: res.Attempt, Receipt: res.Receipt,
		Result: res.Result, Source: res.Source, Error: res.Error, Approval: res.Approval,
		NextAttemptAt: res.NextAttemptAt, Recorded: res.Recorded, DuplicateOf: res.DuplicateOf,
	}
	var text strings.Builder
	isError := false
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
			fmt.Fprintf(&text, " Result: %s", compact(res.Result))
		}
	case host.StatusAwaitingApproval:
		ap := res.Approval
		if res.DuplicateOf != "" {
			fmt.Fprintf(&text, "Held for a human: this call has the same arguments as execution %s, made shortly before in this session, so it may repeat it; nothing has been done. "+
				"A human must decide whether it runs (approval %s, arguments digest %s, expires %s). Do not issue this call again with other ids: that does not run it, it only asks the human again.",
				res.DuplicateOf, ap.ID, ap.ArgsDigest, ap.ExpiresAt.UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintf(&text, "Waiting for a human to approve this call; nothing has been done yet. Approval %s, arguments digest %s, expires %s.",
				ap.ID, ap.ArgsDigest, ap.ExpiresAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(&text, " Once it is approved, call the tool again with the same arguments and _meta {%q: %q, %q: %q} to run it.",
			MetaSessionID, id.SessionID, MetaToolCallID, id.ToolCallID)
	case host.StatusPending:
		fmt.Fprintf(&text, "Not finished yet (attempt %d", res.Attempt)
		if !res.NextAttemptAt.IsZero() {
			fmt.Fprintf(&text, ", next attempt at %s", res.NextAttemptAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(&text, "). Call the tool again with the same arguments and _meta {%q: %q, %q: %q} for the outcome; it will not run twice.",
			MetaSessionID, id.SessionID, MetaToolCallID, id.ToolCallID)
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
	if id.Kind == IdentityPerRequest {
		fmt.Fprintf(&text, " Note: this call had no %s/%s in _meta, so its identity holds for this request only: a retry after a disconnect will not be deduplicated unless it passes _meta {%q: %q, %q: %q}.",
			MetaSessionID, MetaToolCallID, MetaSessionID, id.SessionID, MetaToolCallID, id.ToolCallID)
	}
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
