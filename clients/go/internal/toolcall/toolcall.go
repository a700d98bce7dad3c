// Package toolcall is what the Go adapters share: the tools an executor
// offers a model, the text and fields a model reads of each answer, and
// the settle and wait steps of resume by reconciliation.
//
// The texts follow the MCP server's (server/mcpserver): a model told
// "Do not issue this call again" does not, and a call that never ran is
// the one case where it is told it may issue the call again.
package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/tooldefs"
)

// Def is one tool as a model sees it.
type Def struct {
	// Tool is "connector.operation", as host.ToolCall.Tool names it.
	Tool string
	// Name is the model's name of the tool ("connector_operation").
	Name        string
	Description string
	// Parameters is the operation's JSON Schema.
	Parameters json.RawMessage
	// Read: the operation's effect is "read"; it has nothing to
	// duplicate.
	Read bool
}

// Defs lists the tools of ex's connectors, sorted by name; with names,
// only those (model names or "connector.operation").
func Defs(ex *host.Executor, names []string) ([]Def, error) {
	all, err := tooldefs.Tools(ex.Manifests())
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Def
	for _, t := range all {
		if len(names) > 0 && !want[t.Name] && !want[t.ModelName] {
			continue
		}
		delete(want, t.Name)
		delete(want, t.ModelName)
		out = append(out, Def{Tool: t.Name, Name: t.ModelName, Description: t.Description, Parameters: t.Parameters, Read: t.Effect == "read"})
	}
	for n := range want {
		return nil, fmt.Errorf("%w: no connector offers a tool %q", host.ErrUnknownTool, n)
	}
	return out, nil
}

// Statuses an answer has beside host's: "refused", for a call the
// executor refused before recording anything.
const StatusRefused = "refused"

// Answer is what the model is told of one call.
type Answer struct {
	// Status is the host.Status of the execution, or StatusRefused.
	Status string
	// Text is what the model reads: the outcome and what it may do next.
	Text string
	// Final reports that the call has its outcome: nothing more will
	// happen to it, and the history may hold this answer as its result.
	// Awaiting approval, pending and recovery_required are not final.
	Final bool
	// MayIssueAgain is set only for a call that never ran because it never
	// reached connhost: the model may issue it again if still wanted.
	MayIssueAgain bool
	// Result is the execution, when there is one.
	Result *host.Result
}

// Fields are the answer as a JSON object: the status, the text, the
// execution's ids and, for a success, its receipt and result; for an
// approval, its id and the arguments' digest. Runtimes that show a model
// only structured output show it these.
func (a Answer) Fields() map[string]any {
	m := map[string]any{"status": a.Status, "message": a.Text}
	if r := a.Result; r != nil {
		if r.ExecutionID != "" {
			m["execution_id"] = r.ExecutionID
		}
		if r.SessionID != "" {
			m["session_id"], m["tool_call_id"] = r.SessionID, r.ToolCallID
		}
		if r.Receipt != "" {
			m["receipt"] = r.Receipt
		}
		if len(r.Result) > 0 {
			var v any
			if json.Unmarshal(r.Result, &v) == nil {
				m["result"] = v
			}
		}
		if ap := r.Approval; ap != nil && r.Status == host.StatusAwaitingApproval {
			m["approval"] = map[string]any{"id": ap.ID, "args_digest": ap.ArgsDigest, "expires_at": ap.ExpiresAt.UTC().Format(time.RFC3339)}
		}
	}
	return m
}

// Of is the answer to a call that ended with res, or with err (a call the
// executor refused: nothing was recorded or dispatched for it).
func Of(res host.Result, err error) Answer {
	if err != nil {
		return refused(err)
	}
	a := Answer{Status: string(res.Status), Result: &res}
	var text strings.Builder
	switch res.Status {
	case host.StatusSucceeded:
		a.Final = true
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
		if ap == nil {
			ap = &ledgerApprovalNone
		}
		if res.DuplicateOf != "" {
			fmt.Fprintf(&text, "Held for a human: this call has the same arguments as execution %s, made shortly before in this session, so it may repeat it; nothing has been done. "+
				"A human must decide whether it runs (approval %s, arguments digest %s, expires %s).",
				res.DuplicateOf, ap.ID, ap.ArgsDigest, ap.ExpiresAt.UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintf(&text, "A human must approve this call before it runs; nothing has been done yet (approval %s, arguments digest %s, expires %s).",
				ap.ID, ap.ArgsDigest, ap.ExpiresAt.UTC().Format(time.RFC3339))
		}
		text.WriteString(" Do not issue this call again: the run pauses here, and this same call runs, once, when a reviewer approves it.")
	case host.StatusPending:
		fmt.Fprintf(&text, "Not finished yet (execution %s, attempt %d", res.ExecutionID, res.Attempt)
		if !res.NextAttemptAt.IsZero() {
			fmt.Fprintf(&text, ", next attempt at %s", res.NextAttemptAt.UTC().Format(time.RFC3339))
		}
		text.WriteString("). Do not issue this call again: when the run resumes, this same call returns its outcome, and it will not run twice.")
	case host.StatusRecoveryRequired:
		fmt.Fprintf(&text, "Outcome unknown (recovery_required): the call may or may not have taken effect, and an operator must resolve execution %s before this session takes new calls. Do not issue it again. %s",
			res.ExecutionID, firstLine(res.Error))
	case host.StatusRejected:
		a.Final = true
		fmt.Fprintf(&text, "Not done: rejected (execution %s)", res.ExecutionID)
		if ap := res.Approval; ap != nil && ap.By != "" {
			fmt.Fprintf(&text, " by %s", ap.By)
			if ap.Reason != "" {
				fmt.Fprintf(&text, ": %s", firstLine(ap.Reason))
			}
		}
		text.WriteString(". A reviewer refused this call. Do not issue it again; tell the user it was rejected.")
	case host.StatusCancelled:
		a.Final = true
		if res.Attempt == 0 && res.Error == host.NeverReceived {
			a.MayIssueAgain = true
			fmt.Fprintf(&text, "Not done: this call never reached connhost before the run stopped, so it did not run (execution %s). If it is still wanted, issue it again.", res.ExecutionID)
			break
		}
		fmt.Fprintf(&text, "Not done: cancelled (execution %s)", res.ExecutionID)
		if res.Error != "" {
			fmt.Fprintf(&text, ": %s", firstLine(res.Error))
		}
		text.WriteString(". Do not issue it again unless the user asks.")
	default: // failed, expired, abandoned
		a.Final = true
		fmt.Fprintf(&text, "Not done: %s (execution %s)", res.Status, res.ExecutionID)
		if res.Error != "" {
			fmt.Fprintf(&text, ": %s", firstLine(res.Error))
		}
		text.WriteString(".")
		if res.Status == host.StatusExpired {
			text.WriteString(" No reviewer decided in time. Do not issue it again unless the user asks.")
		}
	}
	a.Text = text.String()
	return a
}

// refused is the answer to a call the executor refused.
// ledgerApprovalNone stands in for an approval an awaiting answer lacks.
var ledgerApprovalNone ledger.Approval

func refused(err error) Answer {
	a := Answer{Status: StatusRefused, Final: true}
	var fenced *host.FencedError
	var args *host.ArgumentsError
	switch {
	case errors.As(err, &args):
		a.Text = fmt.Sprintf("Refused: %s. Nothing was done; correct the arguments and call the tool again.", firstLine(err.Error()))
	case errors.As(err, &fenced):
		a.Text = fmt.Sprintf("Refused: %s. Nothing was done: an operator has to resolve the uncertain call(s) of this session first. Do not issue it again.", firstLine(err.Error()))
	case errors.Is(err, host.ErrIntentMismatch):
		a.Text = fmt.Sprintf("Refused: %s. This tool-call id was already used with other arguments; nothing was done.", firstLine(err.Error()))
	default:
		a.Text = fmt.Sprintf("Refused: %s. Nothing was done. Do not issue this call again; tell the user.", firstLine(err.Error()))
	}
	return a
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "no detail"
	}
	return s
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
