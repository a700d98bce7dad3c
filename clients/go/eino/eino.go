// Package eino runs the tool calls of Eino agents
// (github.com/cloudwego/eino) through connhost's executor, in process, so
// that a crash never performs an approved action twice and an approved
// call runs once, on Eino's own path: its checkpoints, interrupts and
// Runner.Resume.
//
// Identity: each call is a host.ToolCall with the run's checkpoint id as
// its session (the id under which Eino saves and resumes the run) and the
// model's tool call id (compose.GetToolCallID) as its tool-call id.
//
// Saved before it runs: Eino saves a run only when it is interrupted, so
// under [Adapter.Run] each connhost call first interrupts (a "save"
// interrupt): the Runner writes its checkpoint, which holds the model's
// message with the call, and the adapter resumes the run at once, which
// runs the call. A run stopped after that point resumes from that
// checkpoint.
//
// Resume by reconciliation: [Adapter.Resume] resumes the run from its
// checkpoint (Runner.Resume). Each connhost call the checkpoint holds
// unanswered runs again under its original ids and is settled through the
// executor (the recorded outcome; a dispatched call's recovery; a call
// that never reached connhost is recorded as cancelled and the model is
// told it did not run) before the model is asked anything.
//
// Approvals: a call that awaits a reviewer's approval interrupts the run
// (tool.StatefulInterrupt); the Runner saves the checkpoint. With
// Options.ApprovalWait the adapter waits for the decision and resumes the
// run itself; otherwise the interrupt event ends the iteration and the
// application calls Resume once a reviewer decided (console, CLI, HTTP
// API). Resumed, the same call runs once if it was approved, without a new
// model call; a rejected one reaches the model as a refusal it will not
// retry.
//
// The recipe (see clients/go/README.md):
//
//	ce, err := eino.New(ex, eino.Options{ApprovalWait: 10 * time.Minute})
//	a, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{ /* … */
//		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: ce.Tools()}}})
//	r := adk.NewRunner(ctx, adk.RunnerConfig{Agent: a, CheckPointStore: store})
//	iter := ce.Run(ctx, r, runID, msgs)    // instead of r.Run
//	iter, err := ce.Resume(ctx, r, runID)  // after a stop, instead of r.Resume
package eino

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/connhost/connhost/clients/go/internal/toolcall"
	"github.com/connhost/connhost/host"
)

// Options configure an [Adapter].
type Options struct {
	// Namespace is the namespace of every call. The default value is the
	// executor's (host.Options.Namespace).
	Namespace string
	// Tools names the tools to offer, by model name
	// ("payments_create_payment") or "connector.operation". The default
	// value offers every operation of the executor's connectors.
	Tools []string
	// ApprovalWait is how long Run and Resume wait for a reviewer to
	// decide the calls a run paused on before they end the iteration with
	// the interrupt event. The default value 0 does not wait.
	ApprovalWait time.Duration
	// Logger gets one INFO line for each call a run pauses on awaiting a
	// reviewer's approval, with the approval id and the arguments' digest
	// a reviewer decides on. The default value is slog.Default().
	Logger *slog.Logger
}

// Adapter offers connhost's tools to Eino agents and drives their runs
// through Eino's checkpoints. It is safe for concurrent use.
type Adapter struct {
	ex    *host.Executor
	opts  Options
	tools []tool.BaseTool
}

// New returns an adapter over ex, which stays the caller's to close.
func New(ex *host.Executor, opts Options) (*Adapter, error) {
	defs, err := toolcall.Defs(ex, opts.Tools)
	if err != nil {
		return nil, fmt.Errorf("eino: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &Adapter{ex: ex, opts: opts}
	for _, d := range defs {
		s := &jsonschema.Schema{}
		if err := json.Unmarshal(d.Parameters, s); err != nil {
			return nil, fmt.Errorf("eino: tool %s: input schema: %w", d.Tool, err)
		}
		a.tools = append(a.tools, &connTool{a: a, def: d, info: &schema.ToolInfo{
			Name: d.Name, Desc: d.Description, ParamsOneOf: schema.NewParamsOneOfByJSONSchema(s),
		}})
	}
	return a, nil
}

// Tools returns one Eino tool per connhost operation, for a ToolsNode
// (compose.ToolsNodeConfig.Tools).
func (a *Adapter) Tools() []tool.BaseTool { return append([]tool.BaseTool(nil), a.tools...) }

// Kinds of a connhost interrupt.
const (
	// KindSave: the call is saved in the checkpoint before it runs; the
	// adapter resumes the run at once.
	KindSave = "save"
	// KindApproval: the call awaits a reviewer's approval.
	KindApproval = "approval"
)

// Interrupt is the info of a connhost call's interrupt
// (adk.InterruptCtx.Info).
type Interrupt struct {
	Kind       string
	Tool       string
	ToolCallID string
	// ExecutionID, ApprovalID and ArgsDigest name what a reviewer decides
	// (KindApproval).
	ExecutionID string
	ApprovalID  string
	ArgsDigest  string
	// Message is what the model would be told.
	Message string
}

// String is the interrupt as a person reads it.
func (i *Interrupt) String() string {
	if i.Kind == KindApproval {
		return "connhost: " + i.Message
	}
	return "connhost: call " + i.ToolCallID + " of " + i.Tool + " saved before it runs"
}

// paused is a connhost call's interrupt state, saved in the checkpoint.
type paused struct {
	Kind        string
	ExecutionID string
}

// resumeData is the adapter's resume data for a save interrupt: run it now.
type resumeData struct{ Run bool }

func init() {
	schema.RegisterName[*Interrupt]("_connhost_eino_interrupt")
	schema.RegisterName[*paused]("_connhost_eino_paused")
	schema.RegisterName[*resumeData]("_connhost_eino_resume")
}

// The session values the adapter's runs carry (adk.WithSessionValues); the
// checkpoint keeps them.
const (
	sessionKey = "connhost.session_id"
	saveKey    = "connhost.save_first"
)

type sessionCtxKey struct{}

// WithSession returns a context whose connhost calls run under the session
// id: for tools used outside Run and Resume (a compose graph, the react
// agent of flow/agent/react). Such calls are not saved before they run.
func WithSession(ctx context.Context, sessionID string) context.Context {
	return context.WithValue(ctx, sessionCtxKey{}, sessionID)
}

// sessionOf returns the session of the calls under ctx and whether they
// are saved in a checkpoint before they run.
func sessionOf(ctx context.Context) (string, bool) {
	if v, ok := adk.GetSessionValue(ctx, sessionKey); ok {
		if s, ok := v.(string); ok && s != "" {
			save, _ := adk.GetSessionValue(ctx, saveKey)
			b, _ := save.(bool)
			return s, b
		}
	}
	s, _ := ctx.Value(sessionCtxKey{}).(string)
	return s, false
}

// connTool is one connhost operation as an Eino tool.
type connTool struct {
	a    *Adapter
	def  toolcall.Def
	info *schema.ToolInfo
}

func (t *connTool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

// InvokableRun executes the call through connhost, or interrupts: to be
// saved before it runs, or while it awaits a reviewer.
func (t *connTool) InvokableRun(ctx context.Context, argumentsInJSON string, _ ...tool.Option) (string, error) {
	callID := compose.GetToolCallID(ctx)
	sessionID, saveFirst := sessionOf(ctx)
	if argumentsInJSON == "" {
		argumentsInJSON = "{}"
	}
	call := host.ToolCall{Namespace: t.a.opts.Namespace, SessionID: sessionID, ToolCallID: callID, Tool: t.def.Tool,
		Arguments: json.RawMessage(argumentsInJSON)}
	if sessionID == "" {
		return toolcall.Of(host.Result{}, fmt.Errorf("%w: no session id: run the agent through eino.Adapter.Run, or give the context one with eino.WithSession", host.ErrBadCall)).Text, nil
	}
	var res host.Result
	var err error
	was, hasState, st := tool.GetInterruptState[*paused](ctx)
	switch {
	case !was || !hasState:
		if saveFirst && !t.def.Read { // a read has nothing to duplicate
			return "", tool.StatefulInterrupt(ctx, &Interrupt{Kind: KindSave, Tool: t.def.Tool, ToolCallID: callID}, &paused{Kind: KindSave})
		}
		res, err = t.a.ex.Execute(ctx, call)
	case st.Kind == KindSave:
		if target, ok, data := tool.GetResumeContext[*resumeData](ctx); target && ok && data != nil && data.Run {
			res, err = t.a.ex.Execute(ctx, call) // saved a moment ago: run it
		} else {
			res, err = toolcall.Settle(ctx, t.a.ex, call) // resumed after a stop
		}
	default: // KindApproval
		res, err = toolcall.Settle(ctx, t.a.ex, call)
	}
	ans := toolcall.Of(res, err)
	if ans.Status == string(host.StatusAwaitingApproval) {
		in := &Interrupt{Kind: KindApproval, Tool: t.def.Tool, ToolCallID: callID, ExecutionID: res.ExecutionID, Message: ans.Text}
		if ap := res.Approval; ap != nil {
			in.ApprovalID, in.ArgsDigest = ap.ID, ap.ArgsDigest
		}
		return "", tool.StatefulInterrupt(ctx, in, &paused{Kind: KindApproval, ExecutionID: res.ExecutionID})
	}
	return ans.Text, nil
}

// Run starts a run of r (whose Runner needs a CheckPointStore) under
// checkpointID, which is also the connhost session of its calls, and
// returns its events. Each connhost call is saved in the checkpoint
// before it runs: the adapter resumes the run past those interrupts
// itself. A call that awaits a reviewer ends the iteration with its
// interrupt event (after Options.ApprovalWait, if the reviewer has not
// decided by then); continue with Resume.
func (a *Adapter) Run(ctx context.Context, r *adk.Runner, checkpointID string, msgs []adk.Message, opts ...adk.AgentRunOption) *adk.AsyncIterator[*adk.AgentEvent] {
	opts = a.runOptions(checkpointID, opts)
	return a.drive(ctx, r, checkpointID, r.Run(ctx, msgs, opts...), opts)
}

// Resume resumes the run saved under checkpointID (Runner.Resume): each
// connhost call it holds unanswered is settled by its original ids before
// the model is asked anything; a call approved meanwhile runs, once. It
// returns the run's events as Run does.
func (a *Adapter) Resume(ctx context.Context, r *adk.Runner, checkpointID string, opts ...adk.AgentRunOption) (*adk.AsyncIterator[*adk.AgentEvent], error) {
	opts = a.runOptions(checkpointID, opts)
	it, err := r.Resume(ctx, checkpointID, opts...)
	if err != nil {
		return nil, fmt.Errorf("eino: resume %s: %w", checkpointID, err)
	}
	return a.drive(ctx, r, checkpointID, it, opts), nil
}

func (a *Adapter) runOptions(checkpointID string, opts []adk.AgentRunOption) []adk.AgentRunOption {
	return append(append([]adk.AgentRunOption(nil), opts...),
		adk.WithCheckPointID(checkpointID),
		adk.WithSessionValues(map[string]any{sessionKey: checkpointID, saveKey: true}))
}

// drive forwards it's events and resumes the run past connhost's
// interrupts: at once past save interrupts, after the reviewer's decision
// past approval ones (within Options.ApprovalWait).
func (a *Adapter) drive(ctx context.Context, r *adk.Runner, checkpointID string, it *adk.AsyncIterator[*adk.AgentEvent], opts []adk.AgentRunOption) *adk.AsyncIterator[*adk.AgentEvent] {
	out, gen := adk.NewAsyncIteratorPair[*adk.AgentEvent]()
	go func() {
		defer gen.Close()
		for {
			var interrupt *adk.AgentEvent
			for {
				ev, ok := it.Next()
				if !ok {
					break
				}
				if ev.Action != nil && ev.Action.Interrupted != nil {
					interrupt = ev
					continue
				}
				gen.Send(ev)
			}
			if interrupt == nil {
				return
			}
			saves, approvals, others := classify(interrupt.Action.Interrupted.InterruptContexts)
			var err error
			switch {
			case len(others) > 0 || len(saves)+len(approvals) == 0:
				gen.Send(interrupt) // the application's own interrupt
				return
			case len(saves) > 0:
				targets := map[string]any{}
				for _, ic := range saves {
					targets[ic.ID] = &resumeData{Run: true}
				}
				it, err = r.ResumeWithParams(ctx, checkpointID, &adk.ResumeParams{Targets: targets}, opts...)
			default:
				if !a.decided(ctx, approvals) {
					gen.Send(interrupt)
					return
				}
				it, err = r.Resume(ctx, checkpointID, opts...)
			}
			if err != nil {
				gen.Send(&adk.AgentEvent{Err: fmt.Errorf("eino: resume %s: %w", checkpointID, err)})
				return
			}
		}
	}()
	return out
}

// classify sorts an interrupt's root causes: connhost's save and approval
// interrupts, and the others.
func classify(ics []*adk.InterruptCtx) (saves, approvals, others []*adk.InterruptCtx) {
	for _, ic := range ics {
		if ic == nil || !ic.IsRootCause {
			continue
		}
		in, ok := ic.Info.(*Interrupt)
		switch {
		case !ok:
			others = append(others, ic)
		case in.Kind == KindSave:
			saves = append(saves, ic)
		default:
			approvals = append(approvals, ic)
		}
	}
	return saves, approvals, others
}

// decided waits up to Options.ApprovalWait until no call of approvals
// awaits a reviewer any more, and reports whether that happened.
func (a *Adapter) decided(ctx context.Context, approvals []*adk.InterruptCtx) bool {
	for _, ic := range approvals {
		in := ic.Info.(*Interrupt)
		toolcall.LogAwaiting(a.opts.Logger, "eino", in.ApprovalID, in.ArgsDigest, in.ExecutionID, in.ToolCallID, a.opts.ApprovalWait)
	}
	if a.opts.ApprovalWait <= 0 {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, a.opts.ApprovalWait)
	defer cancel()
	for _, ic := range approvals {
		in := ic.Info.(*Interrupt)
		res, err := a.ex.AwaitDecision(wctx, in.ExecutionID)
		if err != nil || toolcall.Undecided(res, time.Now()) {
			return false
		}
	}
	return true
}
