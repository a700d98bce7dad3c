package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// The tasks extension (io.modelcontextprotocol/tasks, protocol 2026-07-28,
// SEP-2663). A client that declares it in a tools/call's per-request
// capabilities may be answered with a task instead of a result; the SDK
// offers nothing for it, so this file implements what the extension
// requires of a server: the task handle (CreateTaskResult, resultType
// "task"), tasks/get, tasks/update and tasks/cancel, and the -32021 error
// for clients that did not declare it.
//
// The execution is the task: a call that would answer awaiting_approval
// or pending is answered with a task whose id is its execution id, which
// the ledger holds before the answer leaves (the extension requires the
// task to exist durably first), across restarts and on every node of a
// fleet. tasks/get reads the ledger (within the principal's scope, as GET
// /v1/executions/{id} does) and answers the task's status; once a
// reviewer has approved the call, the first tasks/get runs it (once, as a
// re-send of the call would) and answers its outcome. The completed
// task's result is the tools/call result the call would have answered.

// ExtensionTasks is the identifier of the tasks extension.
const ExtensionTasks = "io.modelcontextprotocol/tasks"

// The methods of the tasks extension.
const (
	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"
)

// codeMissingCapability is the JSON-RPC error code of a request that
// needs a client capability the client did not declare.
const codeMissingCapability = -32021

// The polling intervals a task suggests: a human decides in minutes, a
// retry is due in seconds.
const (
	pollApproval = 5 * time.Second
	pollPending  = time.Second
)

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
	// InputResponses (tasks/update) answer a task's input requests; this
	// server asks none through tasks (it asks before a task exists, with
	// the call's own input request), so they are ignored, as the
	// extension says of keys that are not outstanding.
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
}

// taskResult is a Task as the extension shapes it: CreateTaskResult
// (ResultType "task") and GetTaskResult (ResultType "complete").
type taskResult struct {
	mcp.ResultBase
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs"` // always null: the ledger's retention decides
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
	// Result is the tools/call result of a completed task.
	Result *mcp.CallToolResult `json:"result,omitempty"`
}

// ackResult is the empty acknowledgement of tasks/update and tasks/cancel.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// registerTasks adds the extension's methods and middleware to the SDK
// server.
func (s *Server) registerTasks() {
	for _, m := range []string{methodTasksGet, methodTasksUpdate, methodTasksCancel} {
		// The middleware answers these; the SDK needs them registered to
		// accept and decode them.
		err := mcp.AddReceivingCustomMethod(s.srv, m, func(context.Context, *mcp.ServerSession, *taskParams) (*ackResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tasks: served by the middleware"}
		})
		if err != nil {
			panic(err) // only for a standard method's name
		}
	}
	s.srv.AddReceivingMiddleware(s.tasks)
}

// taskSlotKey is the context key of a tools/call's taskSlot.
type taskSlotKey struct{}

// taskSlot is where callTool leaves the task that answers a tools/call of
// a client that declared the extension.
type taskSlot struct{ task *taskResult }

// tasks is the receiving middleware of the extension.
func (s *Server) tasks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			if !declaresTasks(req) {
				return next(ctx, method, req)
			}
			slot := &taskSlot{}
			res, err := next(context.WithValue(ctx, taskSlotKey{}, slot), method, req)
			if err == nil && slot.task != nil {
				return slot.task, nil
			}
			return res, err
		case methodTasksGet, methodTasksUpdate, methodTasksCancel:
			return s.serveTask(ctx, method, req)
		}
		return next(ctx, method, req)
	}
}

// declaresTasks reports whether a request of protocol 2026-07-28 or later
// declares the tasks extension in its per-request capabilities.
func declaresTasks(req mcp.Request) bool {
	r, ok := req.(interface {
		ProtocolVersion() string
		ClientCapabilities() *mcp.ClientCapabilities
	})
	if !ok || r.ProtocolVersion() < statelessVersion {
		return false
	}
	caps := r.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok = caps.Extensions[ExtensionTasks]
	return ok
}

// answersWithTask reports whether a tools/call answers an unfinished
// execution with a task (the client declared the extension): the task
// replaces holding the call open.
func answersWithTask(ctx context.Context) bool {
	_, ok := ctx.Value(taskSlotKey{}).(*taskSlot)
	return ok
}

// answerOrTask is the answer of a tools/call whose execution is not
// finished (awaiting_approval, pending): a task for a client that declared
// the extension, else the result.
func (s *Server) answerOrTask(ctx context.Context, id identity, res host.Result, note string) *mcp.CallToolResult {
	out := s.answer(id, res, note)
	if slot, ok := ctx.Value(taskSlotKey{}).(*taskSlot); ok && res.ExecutionID != "" {
		slot.task = s.taskOf(id, res)
		slot.task.ResultType = "task"
	}
	return out
}

// taskOf is the task of execution res, whose call has identity id.
func (s *Server) taskOf(id identity, res host.Result) *taskResult {
	t := &taskResult{ResultType: "complete", TaskID: res.ExecutionID,
		CreatedAt: res.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: res.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	out := s.answer(id, res, "")
	switch res.Status {
	case host.StatusAwaitingApproval:
		t.Status, t.PollIntervalMs = "working", pollApproval.Milliseconds()
		t.StatusMessage = fmt.Sprintf("A human must approve this call before it runs (approval %s, expires %s); nothing has been done yet.",
			res.Approval.ID, res.Approval.ExpiresAt.UTC().Format(time.RFC3339))
	case host.StatusPending:
		t.Status, t.PollIntervalMs = "working", pollPending.Milliseconds()
		t.StatusMessage = firstLine(textOf(out))
	case host.StatusCancelled:
		t.Status, t.StatusMessage = "cancelled", firstLine(textOf(out))
	default:
		// Every outcome the tools/call would answer, isError ones
		// included (the extension keeps "failed" for JSON-RPC errors).
		t.Status, t.Result = "completed", out
	}
	return t
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// serveTask answers tasks/get, tasks/update and tasks/cancel.
func (s *Server) serveTask(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	if !declaresTasks(req) {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}}})
		return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: "Missing required client capability: " + method +
			" needs the " + ExtensionTasks + " extension in the request's client capabilities", Data: data}
	}
	p, _ := req.GetParams().(*taskParams)
	if p == nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + method + " needs a taskId"}
	}
	if prob, err := s.waitStarted(ctx); err != nil || prob != nil {
		if err != nil {
			return nil, err // the connection is gone
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Failed to retrieve task: " + prob.Detail}
	}
	extra := req.GetExtra()
	if sc, ok := scopeFromExtra(extra); ok {
		ctx = host.WithScope(ctx, sc)
	}
	rec, evs, err := s.ex.Get(ctx, p.TaskID)
	if err != nil {
		if errors.Is(err, host.ErrNotFound) || errors.Is(err, host.ErrPruned) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: task not found: " + firstLine(host.Detail(err))}
		}
		s.opts.Logger.ErrorContext(ctx, "mcpserver: read a task's execution", "task_id", p.TaskID, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Failed to retrieve task: " + firstLine(err.Error())}
	}
	id := recordIdentity(rec, evs)
	switch method {
	case methodTasksUpdate:
		return &ackResult{ResultType: "complete"}, nil
	case methodTasksCancel:
		if !rec.State.Terminal() {
			who := s.callerFrom(extra)
			if _, err := s.ex.Cancel(ctx, rec.ID, who.actor); err != nil {
				// Cancellation is cooperative: a call whose outcome is
				// unknown is not cancelled, and the task says what it is.
				s.opts.Logger.InfoContext(ctx, "mcpserver: tasks/cancel", "task_id", rec.ID, "err", err)
			}
		}
		return &ackResult{ResultType: "complete"}, nil
	}
	res := host.ResultOf(rec)
	if rec.State == ledger.StateApproved {
		// Approved since the task was made: run it now, once, as the
		// call's re-send would.
		call := host.ToolCall{Namespace: rec.Namespace, SessionID: rec.SessionID, ToolCallID: rec.ToolCallID,
			Tool: rec.Connector + "." + rec.Operation, Arguments: rec.Args, Resumed: rec.Resumed}
		if res, err = s.ex.Execute(ctx, call); err != nil {
			// Refused (a fenced session, a limit): the task says what the
			// execution is now.
			s.opts.Logger.WarnContext(ctx, "mcpserver: tasks/get: run the approved call", "task_id", rec.ID, "err", err)
			if rec, _, err = s.ex.Get(ctx, rec.ID); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Failed to retrieve task: " + firstLine(err.Error())}
			}
			res = host.ResultOf(rec)
		}
	}
	return s.taskOf(id, res), nil
}

// recordIdentity is the identity a call of rec had, as its first audit
// event says (see identity.note).
func recordIdentity(rec ledger.Record, evs []ledger.Event) identity {
	id := identity{Namespace: rec.Namespace, SessionID: rec.SessionID, ToolCallID: rec.ToolCallID, Kind: IdentityClient}
	if len(evs) > 0 {
		note := evs[0].Reason
		switch {
		case strings.HasPrefix(note, perRequestNote):
			id.Kind, id.Source = IdentityPerRequest, "made up for this request"
		case strings.HasPrefix(note, "mcp: identity from "):
			id.Source = strings.TrimPrefix(note, "mcp: identity from ")
			for _, k := range RuntimeKeys {
				if strings.HasPrefix(id.Source, "_meta "+k.Key+" ") {
					id.Kind = IdentityRuntime
				}
			}
		}
	}
	return id
}
