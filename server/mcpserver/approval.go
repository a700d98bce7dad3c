package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/host"
)

// approvalInput is the key of the approval request among a result's input
// requests (protocol 2026-07-28 and later, multi round trip).
const approvalInput = "connhost_approval"

// The _meta keys of the approval dialog's elicitation request.
const (
	MetaApprovalID = "io.connhost/approval_id"
	MetaArgsDigest = "io.connhost/args_digest"
)

// mrtrVersion is the first protocol revision in which a server asks the
// client for input by answering with input requests (multi round trip)
// instead of sending elicitation/create while the call runs.
const mrtrVersion = "2026-07-28"

// maxReasonBytes caps the reason a user types in the approval dialog.
const maxReasonBytes = 500

// elicits reports whether the client declared form elicitation.
func elicits(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	// With neither mode named, form is meant (the 2025-06-18 capability).
	return caps.Elicitation.Form != nil || caps.Elicitation.URL == nil
}

// askApproval asks the client's user to approve or reject the gated call
// res and records the answer under who.approver. It returns a result to
// send instead (the input request of a multi round trip), or whether a
// decision was recorded; when none was, why says what the model should
// know (the dialog failed, the user dismissed it).
func (s *Server) askApproval(ctx context.Context, req *mcp.CallToolRequest, who caller, id identity, call host.ToolCall,
	res host.Result, st *requestState) (out *mcp.CallToolResult, decided bool, why string) {
	ap := res.Approval
	params, why := s.approvalRequest(ctx, call, res, who)
	if params == nil {
		return nil, false, why
	}
	var answer *mcp.ElicitResult
	nonce := "" // the request state the answer came through
	if req.ProtocolVersion() >= mrtrVersion {
		resp, ok := req.Params.InputResponses[approvalInput]
		if !ok || st == nil || st.Execution != res.ExecutionID || st.Approval != ap.ID || st.Digest != ap.ArgsDigest {
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{approvalInput: params},
				RequestState: signState(who.stateKey, requestState{ID: id, Execution: res.ExecutionID, Approval: ap.ID,
					Digest: ap.ArgsDigest, Principal: who.actor, Nonce: newNonce()}),
			}, false, ""
		}
		if answer, ok = resp.(*mcp.ElicitResult); !ok {
			return nil, false, "the client answered the approval request with something else than an elicitation result"
		}
		nonce = st.Nonce
	} else {
		ectx, stop := context.WithDeadline(ctx, ap.ExpiresAt)
		defer stop()
		var err error
		if answer, err = req.Session.Elicit(ectx, params); err != nil {
			if ctx.Err() != nil {
				return nil, false, ""
			}
			s.opts.Logger.WarnContext(ctx, "mcpserver: approval dialog failed", "approval_id", ap.ID, "err", err)
			return nil, false, "the client could not show the approval dialog: " + firstLine(err.Error())
		}
	}
	return s.decide(ctx, who, res, answer, nonce)
}

// decide records the user's answer: accept approves, decline rejects,
// cancel (the dialog dismissed) leaves the call waiting for a reviewer.
func (s *Server) decide(ctx context.Context, who caller, res host.Result, answer *mcp.ElicitResult, nonce string) (*mcp.CallToolResult, bool, string) {
	ap := res.Approval
	reason := ""
	if r, ok := answer.Content["reason"].(string); ok {
		reason = cleanReason(r)
	}
	dctx, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer stop()
	var err error
	switch answer.Action {
	case "accept":
		_, err = s.ex.Approve(dctx, ap.ID, host.Decision{By: who.approver, ArgsDigest: ap.ArgsDigest, Reason: withPrefix("approved in the MCP client's dialog", reason), StateNonce: nonce})
	case "decline":
		_, err = s.ex.Reject(dctx, ap.ID, host.Decision{By: who.approver, ArgsDigest: ap.ArgsDigest, Reason: withPrefix("rejected in the MCP client's dialog", reason), StateNonce: nonce})
	default:
		return nil, false, "the approval dialog was dismissed; a reviewer can still approve or reject the call"
	}
	switch {
	case err == nil:
	case errors.Is(err, host.ErrStateUsed):
		// A concurrent replay recorded this state's answer first.
		return nil, true, usedNote("its answer was recorded by a request before this one")
	case errors.Is(err, host.ErrNotAwaitingApproval), errors.Is(err, host.ErrApprovalExpired):
		// Decided elsewhere meanwhile, or expired: the execution says which.
	default:
		s.opts.Logger.ErrorContext(ctx, "mcpserver: record the approval dialog's answer", "approval_id", ap.ID, "err", err)
		return nil, false, "the answer could not be recorded: " + firstLine(err.Error())
	}
	return nil, true, ""
}

func withPrefix(prefix, reason string) string {
	if reason == "" {
		return prefix
	}
	return prefix + ": " + reason
}

// cleanReason keeps a user's reason printable and short.
func cleanReason(r string) string {
	r = strings.ToValidUTF8(r, "?")
	r = strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return ' '
		}
		return c
	}, r)
	r = strings.TrimSpace(r)
	if len(r) > maxReasonBytes {
		r = strings.ToValidUTF8(r[:maxReasonBytes], "") + "…"
	}
	return r
}

// approvalRequest is the elicitation that shows the user the exact call:
// the host's approval view (every argument, decoded, review fields first;
// see host.ApprovalView), digest and expiry. It returns nil and why when
// the call cannot be shown whole within the dialog's limits
// (Options.MaxDialogBytes, MaxDialogLines): a dialog that shows part of a
// call would have the user approve the rest unseen, so the call waits for
// a reviewer out of band instead.
func (s *Server) approvalRequest(ctx context.Context, call host.ToolCall, res host.Result, who caller) (*mcp.ElicitParams, string) {
	ap := res.Approval
	view, err := s.ex.ApprovalView(ctx, ap.ID)
	if err != nil {
		s.opts.Logger.WarnContext(ctx, "mcpserver: approval dialog not shown: no approval view", "approval_id", ap.ID, "err", err)
		return nil, "the approval dialog could not be built (" + firstLine(host.Detail(err)) + "); a reviewer must approve or reject the call out of band"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "An agent asks to run %s. Approve this exact call?\n\n", view.Tool)
	b.WriteString(view.Text)
	fmt.Fprintf(&b, "\nAccept approves it (recorded as %s), decline rejects it; dismissing leaves it for a reviewer.", who.approver)
	msg := b.String()
	if lines := strings.Count(msg, "\n") + 1; len(msg) > s.opts.MaxDialogBytes || lines > s.opts.MaxDialogLines {
		s.opts.Logger.WarnContext(ctx, "mcpserver: approval dialog not shown: the call does not fit whole; it waits for a reviewer out of band",
			"approval_id", ap.ID, "tool", view.Tool, "bytes", len(msg), "lines", lines,
			"max_bytes", s.opts.MaxDialogBytes, "max_lines", s.opts.MaxDialogLines)
		return nil, fmt.Sprintf("the call is too large to show whole in the client's approval dialog (%d bytes in %d lines; the dialog shows at most %d bytes in %d lines), "+
			"so it was not shown there: a reviewer must approve or reject it out of band (connhost approve %s, or the HTTP API), where every argument is shown",
			len(msg), lines, s.opts.MaxDialogBytes, s.opts.MaxDialogLines, ap.ID)
	}
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: b.String(),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"reason": map[string]any{
					"type": "string", "title": "Reason (optional)",
					"description": "Recorded with your decision in the audit trail.", "maxLength": maxReasonBytes,
				},
			},
		},
		Meta: mcp.Meta{MetaApprovalID: ap.ID, MetaArgsDigest: ap.ArgsDigest},
	}, ""
}
