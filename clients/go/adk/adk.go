// Package adk runs the tool calls of ADK for Go agents
// (google.golang.org/adk) through connhost's executor, in process, so that
// a crash never performs an approved action twice and an approved call
// runs once, on ADK's own path.
//
// Identity: each call is a host.ToolCall with the ADK session's id
// (tool.Context.SessionID) as its session and the model's function call id
// (tool.Context.FunctionCallID) as its tool-call id. ADK records the model's
// function calls in its session before it runs them, so with a persistent
// session service (session/database) a stopped run's calls are in the
// session when it restarts.
//
// Resume by reconciliation: [Adapter.Resume] reads a session, finds the
// connhost calls that have no final answer there (a call killed while it
// ran has none: ADK never looks at it again by itself), settles each
// through the executor by its original ids, and returns the answers as the
// message that continues the run, before the model is asked anything.
//
// Approvals: a call that awaits a reviewer's approval asks for ADK's tool
// confirmation (tool.Context.RequestConfirmation), which ends the run with
// an adk_request_confirmation event saved in the session. Once a reviewer
// decides out of band (console, CLI, HTTP API), [Adapter.Resume] answers
// the confirmation with connhost's decision, and ADK runs the same call
// again: an approved call runs once, without a new model call; a rejected
// one reaches the model as a refusal it will not retry.
//
// The recipe (see clients/go/README.md):
//
//	ca, err := adk.New(ex, adk.Options{ApprovalWait: 10 * time.Minute})
//	a, err := llmagent.New(llmagent.Config{ /* … */ Tools: ca.Tools()})
//	// before each runner.Run of a session that may have stopped or paused:
//	msg, err := ca.Resume(ctx, sess) // sess: the session service's Get
//	for ev, err := range r.Run(ctx, userID, sessionID, msg, agent.RunConfig{}) { /* … */ }
package adk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/toolconfirmation"
	"google.golang.org/genai"

	"github.com/connhost/connhost/clients/go/internal/toolcall"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// ErrAwaitingApproval is what [Adapter.Resume] returns (wrapped in an
// *AwaitingApprovalError) while a call of the session waits for a
// reviewer: there is nothing to continue the run with until one decides.
var ErrAwaitingApproval = errors.New("adk: a call awaits a reviewer's approval")

// AwaitingApprovalError names the calls that wait for a reviewer.
type AwaitingApprovalError struct {
	// Calls are the executions awaiting approval; each Result.Approval
	// holds the approval id and the arguments' digest a reviewer decides.
	Calls []host.Result
}

func (e *AwaitingApprovalError) Error() string {
	ids := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		ids[i] = c.ExecutionID
		if c.Approval != nil {
			ids[i] = c.Approval.ID
		}
	}
	return fmt.Sprintf("adk: %d call(s) await a reviewer's approval: %s", len(e.Calls), strings.Join(ids, ", "))
}

// Unwrap returns ErrAwaitingApproval.
func (e *AwaitingApprovalError) Unwrap() error { return ErrAwaitingApproval }

// Options configure an [Adapter].
type Options struct {
	// Namespace is the namespace of every call. The default value is the
	// executor's (host.Options.Namespace).
	Namespace string
	// Tools names the tools to offer, by model name
	// ("payments_create_payment") or "connector.operation". The default
	// value offers every operation of the executor's connectors.
	Tools []string
	// ApprovalWait is how long Resume waits for a reviewer to decide a
	// call that awaits approval before it returns an
	// *AwaitingApprovalError. The default value 0 does not wait.
	ApprovalWait time.Duration
	// DeclinedBy is recorded as who cancelled a call whose ADK
	// confirmation the application answered "not confirmed" itself while
	// no reviewer had decided it. The default value is "adk".
	DeclinedBy string
	// Logger gets one INFO line for each call Resume finds awaiting a
	// reviewer's approval, with the approval id and the arguments' digest
	// a reviewer decides on. The default value is slog.Default().
	Logger *slog.Logger
}

// Adapter offers connhost's tools to ADK agents and reconciles their
// sessions. It is safe for concurrent use.
type Adapter struct {
	ex     *host.Executor
	opts   Options
	tools  []tool.Tool
	byName map[string]*connTool
}

// New returns an adapter over ex, which stays the caller's to close.
func New(ex *host.Executor, opts Options) (*Adapter, error) {
	if opts.DeclinedBy == "" {
		opts.DeclinedBy = "adk"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	defs, err := toolcall.Defs(ex, opts.Tools)
	if err != nil {
		return nil, fmt.Errorf("adk: %w", err)
	}
	a := &Adapter{ex: ex, opts: opts, byName: map[string]*connTool{}}
	for _, d := range defs {
		var schema any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil {
			return nil, fmt.Errorf("adk: tool %s: input schema: %w", d.Tool, err)
		}
		t := &connTool{a: a, def: d, decl: &genai.FunctionDeclaration{
			Name: d.Name, Description: d.Description, ParametersJsonSchema: schema,
		}}
		a.tools = append(a.tools, t)
		a.byName[d.Name] = t
	}
	return a, nil
}

// Tools returns one ADK tool per connhost operation, for
// llmagent.Config.Tools.
func (a *Adapter) Tools() []tool.Tool { return append([]tool.Tool(nil), a.tools...) }

// connTool is one connhost operation as an ADK function tool.
type connTool struct {
	a    *Adapter
	def  toolcall.Def
	decl *genai.FunctionDeclaration
}

func (t *connTool) Name() string                            { return t.def.Name }
func (t *connTool) Description() string                     { return t.def.Description }
func (t *connTool) IsLongRunning() bool                     { return false }
func (t *connTool) Declaration() *genai.FunctionDeclaration { return t.decl }

// ProcessRequest adds the tool's declaration to the model request, as
// ADK's own function tools do.
func (t *connTool) ProcessRequest(_ tool.Context, req *model.LLMRequest) error {
	if req.Tools == nil {
		req.Tools = map[string]any{}
	}
	if _, dup := req.Tools[t.Name()]; dup {
		return fmt.Errorf("adk: duplicate tool %q", t.Name())
	}
	req.Tools[t.Name()] = t
	if req.Config == nil {
		req.Config = &genai.GenerateContentConfig{}
	}
	for _, gt := range req.Config.Tools {
		if gt != nil && gt.FunctionDeclarations != nil {
			gt.FunctionDeclarations = append(gt.FunctionDeclarations, t.decl)
			return nil
		}
	}
	req.Config.Tools = append(req.Config.Tools, &genai.Tool{FunctionDeclarations: []*genai.FunctionDeclaration{t.decl}})
	return nil
}

// Run executes the call through connhost under the ADK session's id and
// the function call's id. A call that awaits approval requests ADK's tool
// confirmation; ADK runs it again once the confirmation is answered
// (Resume answers it with the reviewer's decision), and connhost's
// decision, not the answer, says whether it runs.
func (t *connTool) Run(ctx tool.Context, args any) (map[string]any, error) {
	call, err := t.a.call(t.def, ctx.SessionID(), ctx.FunctionCallID(), args)
	if err != nil {
		return toolcall.Of(host.Result{}, err).Fields(), nil
	}
	var res host.Result
	if conf := ctx.ToolConfirmation(); conf == nil {
		res, err = t.a.ex.Execute(ctx, call)
	} else {
		// The call asked for a confirmation, so it is recorded: drive
		// that record. The application's "not confirmed" withdraws a
		// call no reviewer has decided.
		res, err = toolcall.Settle(ctx, t.a.ex, call)
		if err == nil && !conf.Confirmed && res.Status == host.StatusAwaitingApproval {
			res, err = t.a.ex.Cancel(ctx, res.ExecutionID, t.a.opts.DeclinedBy)
		}
	}
	ans := toolcall.Of(res, err)
	if ans.Status == string(host.StatusAwaitingApproval) {
		if err := ctx.RequestConfirmation(ans.Text, pendingOf(res)); err != nil {
			return nil, fmt.Errorf("adk: request confirmation for %s: %w", res.ExecutionID, err)
		}
	}
	return ans.Fields(), nil
}

// Pending is the payload of the confirmation a connhost call requests:
// what a reviewer decides, through connhost (console, `connhost approve`,
// the HTTP API), not through the confirmation's answer.
type Pending struct {
	ExecutionID string    `json:"execution_id"`
	ApprovalID  string    `json:"approval_id"`
	ArgsDigest  string    `json:"args_digest"`
	ExpiresAt   time.Time `json:"expires_at"`
	Tool        string    `json:"tool"`
}

func pendingOf(res host.Result) Pending {
	p := Pending{ExecutionID: res.ExecutionID, Tool: res.Tool}
	if ap := res.Approval; ap != nil {
		p.ApprovalID, p.ArgsDigest, p.ExpiresAt = ap.ID, ap.ArgsDigest, ap.ExpiresAt
	}
	return p
}

// call builds the host.ToolCall of a function call.
func (a *Adapter) call(def toolcall.Def, sessionID, callID string, args any) (host.ToolCall, error) {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return host.ToolCall{}, fmt.Errorf("%w: arguments of %s: %v", host.ErrInvalidArguments, def.Name, err)
	}
	return host.ToolCall{Namespace: a.opts.Namespace, SessionID: sessionID, ToolCallID: callID, Tool: def.Tool, Arguments: raw}, nil
}

// Resume reconciles sess before the run continues: it returns the message
// to pass to runner.Run (nil when there is nothing to answer, which
// continues the run as usual).
//
// For each connhost call of the session without a final answer, it settles
// the call by its original ids (the recorded outcome; a dispatched call's
// recovery; a call that never reached connhost is recorded as cancelled
// and the model is told it did not run) and answers it in the message. For
// each pending confirmation a connhost call requested, it answers the
// confirmation with the reviewer's decision, waiting up to
// Options.ApprovalWait for one; ADK then runs that same call again, which
// runs it once if it was approved. While a call still awaits a reviewer,
// Resume returns an *AwaitingApprovalError and no message.
func (a *Adapter) Resume(ctx context.Context, sess session.Session) (*genai.Content, error) {
	st := a.scan(sess)
	var parts []*genai.Part
	var waiting []host.Result
	for _, c := range st.confirmations {
		res, err := a.decision(ctx, sess.ID(), c.original)
		if err != nil {
			return nil, err
		}
		if res.Status == host.StatusAwaitingApproval {
			waiting = append(waiting, res)
			continue
		}
		confirmed := res.Approval != nil && res.Approval.Decision == ledger.ApprovalApproved
		parts = append(parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{
			ID: c.id, Name: toolconfirmation.FunctionCallName, Response: map[string]any{"confirmed": confirmed},
		}})
	}
	for _, fc := range st.unanswered {
		def := a.byName[fc.Name].def
		call, err := a.call(def, sess.ID(), fc.ID, fc.Args)
		if err != nil {
			return nil, err
		}
		res, err := toolcall.Settle(ctx, a.ex, call)
		if err == nil && res.Status == host.StatusAwaitingApproval {
			if res, err = a.await(ctx, res); err == nil && !toolcall.Undecided(res, time.Now()) {
				res, err = toolcall.Settle(ctx, a.ex, call) // approved: it runs now, once
			}
		}
		if err == nil && res.Status == host.StatusAwaitingApproval {
			waiting = append(waiting, res)
			continue
		}
		if err != nil && ctx.Err() != nil {
			return nil, err
		}
		parts = append(parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{
			ID: fc.ID, Name: fc.Name, Response: toolcall.Of(res, err).Fields(),
		}})
	}
	if len(waiting) > 0 {
		return nil, &AwaitingApprovalError{Calls: waiting}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return &genai.Content{Role: genai.RoleUser, Parts: parts}, nil
}

// decision reads the execution of a call that requested a confirmation,
// waiting for a reviewer as Options.ApprovalWait allows.
func (a *Adapter) decision(ctx context.Context, sessionID string, fc *genai.FunctionCall) (host.Result, error) {
	def := a.byName[fc.Name].def
	call, err := a.call(def, sessionID, fc.ID, fc.Args)
	if err != nil {
		return host.Result{}, err
	}
	ns := call.Namespace
	if ns == "" {
		ns = ledger.DefaultNamespace
	}
	rec, _, err := a.ex.Get(ctx, ledger.ExecutionID(ns, call.SessionID, call.ToolCallID))
	if errors.Is(err, host.ErrNotFound) {
		// Nothing to confirm: the re-run settles it (it did not run).
		return host.Result{Status: host.StatusCancelled}, nil
	}
	if err != nil {
		return host.Result{}, err
	}
	res, err := a.await(ctx, host.ResultOf(rec))
	if err == nil && res.Status == host.StatusAwaitingApproval && !toolcall.Undecided(res, time.Now()) {
		// Expired undecided: settling records the expiry (it cannot run).
		return toolcall.Settle(ctx, a.ex, call)
	}
	return res, err
}

// await waits up to Options.ApprovalWait for res to leave
// awaiting_approval.
func (a *Adapter) await(ctx context.Context, res host.Result) (host.Result, error) {
	if res.Status == host.StatusAwaitingApproval && res.Approval != nil {
		toolcall.LogAwaiting(a.opts.Logger, "adk", res.Approval.ID, res.Approval.ArgsDigest, res.ExecutionID, res.ToolCallID, a.opts.ApprovalWait)
	}
	if res.Status != host.StatusAwaitingApproval || a.opts.ApprovalWait <= 0 {
		return res, nil
	}
	wctx, cancel := context.WithTimeout(ctx, a.opts.ApprovalWait)
	defer cancel()
	got, err := a.ex.AwaitDecision(wctx, res.ExecutionID)
	switch {
	case err == nil:
		return got, nil
	case ctx.Err() != nil:
		return host.Result{}, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return res, nil // still undecided
	}
	return host.Result{}, err
}

// state is what Resume finds in a session.
type state struct {
	// unanswered are connhost calls without a final answer and without a
	// pending confirmation, in session order.
	unanswered []*genai.FunctionCall
	// confirmations are the pending adk_request_confirmation calls of
	// connhost calls.
	confirmations []confirmation
}

type confirmation struct {
	id       string
	original *genai.FunctionCall
}

// scan reads the session's function calls and responses.
func (a *Adapter) scan(sess session.Session) state {
	latest := map[string]*genai.FunctionResponse{}
	var calls []*genai.FunctionCall
	for ev := range sess.Events().All() {
		if ev == nil || ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			switch {
			case p == nil:
			case p.FunctionCall != nil:
				calls = append(calls, p.FunctionCall)
			case p.FunctionResponse != nil:
				latest[p.FunctionResponse.ID] = p.FunctionResponse
			}
		}
	}
	var st state
	confirming := map[string]bool{}
	for _, fc := range calls {
		if fc.Name != toolconfirmation.FunctionCallName || latest[fc.ID] != nil {
			continue
		}
		orig, err := toolconfirmation.OriginalCallFrom(fc)
		if err != nil || a.byName[orig.Name] == nil || orig.ID == "" {
			continue
		}
		confirming[orig.ID] = true
		st.confirmations = append(st.confirmations, confirmation{id: fc.ID, original: orig})
	}
	seen := map[string]bool{}
	for _, fc := range calls {
		if a.byName[fc.Name] == nil || fc.ID == "" || confirming[fc.ID] || seen[fc.ID] {
			continue
		}
		seen[fc.ID] = true
		if final(latest[fc.ID]) {
			continue
		}
		st.unanswered = append(st.unanswered, fc)
	}
	return st
}

// final reports whether a function response of a connhost call holds the
// call's outcome (not awaiting approval, pending or recovery_required).
func final(r *genai.FunctionResponse) bool {
	if r == nil {
		return false
	}
	switch r.Response["status"] {
	case string(host.StatusAwaitingApproval), string(host.StatusPending), string(host.StatusRecoveryRequired):
		return false
	}
	return true
}
