package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/connhost/connhost/internal/argview"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// ArgField is one argument of a call as a reviewer is shown it (see
// ApprovalView.Fields).
type ArgField = argview.Field

// ApprovalView is what a human is shown to decide an approval request,
// wherever they decide it: the MCP client's dialog, `connhost history`
// and `connhost approve`, GET /v1/approvals/{id}. It shows the exact call:
// every argument, decoded, none cut, control, bidirectional and invisible
// characters as escapes, the fields the manifest names for review first
// (in its order), money in major units with its currency, and, for a call
// the duplicate-intent guard held, the execution it may repeat.
type ApprovalView struct {
	ApprovalID  string `json:"approval_id"`
	ExecutionID string `json:"execution_id"`
	// Tool is "connector.operation".
	Tool       string `json:"tool"`
	Namespace  string `json:"namespace"`
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	// Status is the execution's status: awaiting_approval while the
	// request is open.
	Status Status `json:"status"`
	// Decision is the approval's: pending, approved, rejected, expired or
	// cancelled; By and DecidedAt say who decided and when.
	Decision  string    `json:"decision"`
	By        string    `json:"by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// ArgsDigest is what an approval must name (the approve request's
	// digest): the sha256 of the arguments' canonical form.
	ArgsDigest    string    `json:"args_digest"`
	PolicyVersion string    `json:"policy_version"`
	RequestedAt   time.Time `json:"requested_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	// Duplicate is set when the duplicate-intent guard held the call: the
	// earlier execution whose arguments it repeats.
	Duplicate *DuplicateNote `json:"duplicate_of,omitempty"`
	// Fields are every argument in review order (see argview.Render):
	// ArgField.Review marks the ones the manifest names.
	Fields []ArgField `json:"fields"`
	// ReviewOrder says where the order of Fields comes from: "manifest"
	// (its review list) or "path" (the manifest names none, or its
	// operation is not loaded).
	ReviewOrder string `json:"review_order"`
	// Text is the whole view as text, one field per line: what the MCP
	// dialog and the CLI show.
	Text string `json:"text"`
}

// DuplicateNote is the execution a held call may repeat.
type DuplicateNote struct {
	ExecutionID string       `json:"execution_id"`
	ToolCallID  string       `json:"tool_call_id,omitempty"`
	State       ledger.State `json:"state"`
	CreatedAt   time.Time    `json:"created_at,omitzero"`
	Receipt     string       `json:"receipt,omitempty"`
	// Window is the operation's duplicate window when the call was held.
	Window string `json:"window"`
	// Intent, when the held call spells its arguments otherwise than the
	// earlier one, names what they share: the operation's intent
	// arguments (manifests.IntentField), or "every argument" when the
	// manifest names none. Empty: the very same arguments.
	Intent []string `json:"intent,omitempty"`
}

// ApprovalView returns the view of an approval request (an approval id,
// ap_…), decided or not. The order and money of its fields come from the
// loaded manifest of the execution's operation; without it every field
// is shown in path order. Unknown ids are ErrNotFound.
func (e *Executor) ApprovalView(ctx context.Context, approvalID string) (ApprovalView, error) {
	id, ok := ledger.ExecutionIDOfApproval(approvalID)
	if !ok {
		return ApprovalView{}, refuse(ErrNotFound, "no approval %q", approvalID)
	}
	rec, err := e.record(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && rec.Approval == nil) {
		return ApprovalView{}, refuse(ErrNotFound, "no approval %q", approvalID)
	}
	if err != nil {
		return ApprovalView{}, err
	}
	var op *manifests.Operation
	if o, err := e.opOf(rec); err == nil {
		op = o.op
	}
	earlier, err := e.earlierOf(ctx, rec)
	if err != nil {
		return ApprovalView{}, err
	}
	return NewApprovalView(rec, op, earlier)
}

// earlierOf reads the execution rec may repeat (nil when rec is no held
// duplicate). A pruned one is described by its tombstone.
func (e *Executor) earlierOf(ctx context.Context, rec ledger.Record) (*ledger.Record, error) {
	if rec.DuplicateOf == "" {
		return nil, nil
	}
	r, err := e.led.Get(ctx, rec.DuplicateOf)
	switch {
	case err == nil, errors.Is(err, ledger.ErrPruned):
		return &r, nil
	case errors.Is(err, ledger.ErrNotFound):
		return &ledger.Record{ID: rec.DuplicateOf}, nil
	}
	return nil, err
}

// NewApprovalView builds the view of rec's approval request from the
// record alone: op is its operation's manifest entry (nil: not at hand,
// fields in path order), earlier the execution rec.DuplicateOf names
// (nil: not read). It is what Executor.ApprovalView returns, for callers
// that hold a ledger and the manifests but no executor (the CLI's
// history). Arguments that do not parse as the host parses them are an
// error (such a call was never recorded by an executor).
func NewApprovalView(rec ledger.Record, op *manifests.Operation, earlier *ledger.Record) (ApprovalView, error) {
	if rec.Approval == nil {
		return ApprovalView{}, refuse(ErrNotFound, "execution %s has no approval request", rec.ID)
	}
	a := rec.Approval
	v := ApprovalView{
		ApprovalID: a.ID, ExecutionID: rec.ID, Tool: rec.Connector + "." + rec.Operation,
		Namespace: rec.Namespace, SessionID: rec.SessionID, ToolCallID: rec.ToolCallID,
		Status: statusOf(rec.State), Decision: string(a.Decision), By: a.By, DecidedAt: a.DecidedAt,
		ArgsDigest: a.ArgsDigest, PolicyVersion: a.PolicyVersion, RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt,
		ReviewOrder: "path",
	}
	fields, order, err := RenderArgs(rec.Args, op)
	if err != nil {
		return ApprovalView{}, fmt.Errorf("host: approval %s: %w", a.ID, err)
	}
	v.Fields, v.ReviewOrder = fields, order
	if rec.DuplicateOf != "" {
		d := &DuplicateNote{ExecutionID: rec.DuplicateOf, Window: manifests.FormatDuration(rec.DuplicateWindow)}
		if earlier != nil {
			d.ToolCallID, d.State, d.CreatedAt = earlier.ToolCallID, earlier.State, earlier.CreatedAt
			if earlier.Outcome != nil && earlier.State == ledger.StateSucceeded {
				d.Receipt = earlier.Outcome.Receipt
			}
			if earlier.ArgsDigest != "" && earlier.ArgsDigest != rec.ArgsDigest {
				d.Intent = []string{"every argument"}
				if op != nil && len(op.Intent) > 0 {
					d.Intent = d.Intent[:0]
					for _, f := range op.Intent {
						d.Intent = append(d.Intent, f.String())
					}
				}
			}
		}
		v.Duplicate = d
	}
	v.Text = v.text()
	return v, nil
}

// RenderArgs renders a call's arguments for a reviewer (argview.Render)
// with the review list and money of op (nil: none). order is "manifest"
// when op names review fields, else "path".
func RenderArgs(args []byte, op *manifests.Operation) (fields []ArgField, order string, err error) {
	var spec argview.Spec
	order = "path"
	if op != nil {
		spec.Review = op.Review
		for _, m := range op.Money {
			spec.Money = append(spec.Money, argview.Money{Amount: m.Amount, Currency: m.Currency})
		}
		if len(op.Review) > 0 {
			order = "manifest"
		}
	}
	fields, err = argview.Render(args, spec)
	return fields, order, err
}

// text writes the view for people (see ApprovalView.Text).
func (v ApprovalView) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tool: %s\n", v.Tool)
	if d := v.Duplicate; d != nil {
		b.WriteString("POSSIBLE DUPLICATE: ")
		if len(d.Intent) > 0 {
			fmt.Fprintf(&b, "this call is the same intent as execution %s, spelled otherwise (the same %s; text compared in Unicode NFC, empty values as absent)",
				d.ExecutionID, strings.Join(d.Intent, ", "))
		} else {
			fmt.Fprintf(&b, "this call has the same arguments as execution %s", d.ExecutionID)
		}
		var about []string
		if d.State != "" {
			about = append(about, string(d.State))
		}
		if d.ToolCallID != "" {
			about = append(about, "tool call "+shown(d.ToolCallID))
		}
		if !d.CreatedAt.IsZero() {
			about = append(about, "created "+d.CreatedAt.UTC().Format(time.RFC3339))
		}
		if d.Receipt != "" {
			about = append(about, "receipt "+shown(d.Receipt))
		}
		if len(about) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
		}
		fmt.Fprintf(&b, " in the same session, less than %s before it. Approving runs it again.\n", d.Window)
	}
	_ = argview.Write(&b, v.Fields, "  ")
	fmt.Fprintf(&b, "Arguments digest (sha256): %s\n", v.ArgsDigest)
	fmt.Fprintf(&b, "Approval: %s, %s, expires %s\n", v.ApprovalID, v.Decision, v.ExpiresAt.UTC().Format(time.RFC3339))
	session := shown(v.SessionID)
	if v.Namespace != "" && v.Namespace != ledger.DefaultNamespace {
		session = shown(v.Namespace) + "/" + session
	}
	fmt.Fprintf(&b, "Session %s, tool call %s, execution %s\n", session, shown(v.ToolCallID), v.ExecutionID)
	return b.String()
}

// shown is an identifier as a reviewer sees it: as it is, or quoted with
// escapes if it holds a character that must not reach the screen raw.
func shown(s string) string {
	q, escaped := argview.Quote(s)
	if escaped {
		return q
	}
	return s
}
