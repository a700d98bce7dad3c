package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/tooldefs"
)

// execute serves POST /v1/executions. The body is a host.ToolCall, whose
// tool may also be given by the name the tool definitions list
// ("connector_operation", or the older "connector__operation"; see
// package tooldefs).
func (a *api) execute(w http.ResponseWriter, r *http.Request) {
	wait, ok := a.waitParam(w, r)
	if !ok {
		return
	}
	var req host.ToolCall
	if !a.decode(w, r, &req, false) {
		return
	}
	var missing []string
	for _, f := range []struct {
		name  string
		empty bool
	}{
		{"session_id", req.SessionID == ""},
		{"tool_call_id", req.ToolCallID == ""},
		{"tool", req.Tool == ""},
		{"arguments", len(req.Arguments) == 0 || string(req.Arguments) == "null"},
	} {
		if f.empty {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		writeProblem(w, NewProblem(CodeBadRequest, "missing required field(s): "+strings.Join(missing, ", ")))
		return
	}
	// A name that is neither form goes to the executor as given, which
	// refuses it with the list of the tools there are.
	if tool, ok := a.names.Canonical(req.Tool); ok {
		req.Tool = tool
	}
	res, err := a.ex.Execute(r.Context(), req)
	if err == nil && wait > 0 && res.Status == host.StatusAwaitingApproval {
		res, err = a.holdForDecision(r, req, res, wait)
		if r.Context().Err() != nil {
			return // the client is gone; the call stays as recorded
		}
	}
	if err != nil {
		a.fail(w, r, err, res)
		return
	}
	// See RATIONALE.md, "Why is every execution status a 200?".
	writeJSON(w, http.StatusOK, res)
	// The answer has left (a lazily written outcome may still be
	// unsynced): the crash point after_answer is here.
	_ = http.NewResponseController(w).Flush()
	crash.At(crash.AfterAnswer)
}

// waitParam parses the wait parameter of POST /v1/executions: a Go
// duration ("90s", "5m") of at most Options.MaxApprovalWait. Absent, it
// is 0 (no hold).
func (a *api) waitParam(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > a.opts.MaxApprovalWait {
		writeProblem(w, NewProblem(CodeBadRequest, fmt.Sprintf("wait=%q: want a duration such as 60s or 5m, at most %s", v, a.opts.MaxApprovalWait)))
		return 0, false
	}
	return d, true
}

// holdForDecision holds a call that awaits approval for up to wait, until
// a reviewer decides it (or its approval expires), then sends the same
// call again, which runs it once if approved. Still undecided, it answers
// res: awaiting approval, as without the hold.
func (a *api) holdForDecision(r *http.Request, call host.ToolCall, res host.Result, wait time.Duration) (host.Result, error) {
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	if _, err := a.ex.AwaitDecision(ctx, res.ExecutionID); err != nil {
		if ctx.Err() != nil {
			return res, nil
		}
		return res, err
	}
	return a.ex.Execute(r.Context(), call)
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	rec, evs, err := a.ex.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err, host.Result{})
		return
	}
	writeJSON(w, http.StatusOK, NewExecution(rec, evs))
}

// MaxListLimit caps the limit parameter of GET /v1/executions.
const MaxListLimit = 1000

// MaxListBytes caps the JSON of the executions one page of GET
// /v1/executions holds: a page ends early, with a next, once another
// execution would take it past this (a page holds at least one), so
// that neither a thousand small calls nor a few with arguments of a
// quarter of a megabyte make a page of megabytes.
const MaxListBytes = 1 << 20

// ListResponse is the answer of GET /v1/executions.
type ListResponse struct {
	Executions []Execution `json:"executions"`
	// Next, when set, is the value of the after parameter that continues
	// the listing: the id of the last execution listed, or, in expiry
	// order, its position (see ExpiryCursor).
	Next string `json:"next,omitempty"`
	// Total, listing the executions awaiting approval (state
	// awaiting_approval, no session_id), is how many of them the listing
	// covers, counted from the ledger's approval index when the page was
	// read; pages of the same listing may differ by what was decided or
	// asked meanwhile. Absent for other listings.
	Total *int `json:"total,omitempty"`
}

// NewListResponse returns the answer listing recs, which f selected: at
// most MaxListBytes of them, and a Next whenever the listing goes on.
func NewListResponse(recs []ledger.Record, f ledger.Filter) ListResponse {
	out := ListResponse{Executions: make([]Execution, 0, len(recs))}
	size := 0
	for i, rec := range recs {
		e := Execution{Result: host.ResultOf(rec)}
		if b, err := json.Marshal(e); err == nil {
			size += len(b) + 1
		}
		if i > 0 && size > MaxListBytes {
			out.Next = Cursor(recs[i-1], f.Order)
			return out
		}
		out.Executions = append(out.Executions, e)
	}
	if len(recs) == f.Limit && len(recs) > 0 {
		out.Next = Cursor(recs[len(recs)-1], f.Order)
	}
	return out
}

// Cursor returns the after parameter that continues a listing in order
// past rec: its id, or in ledger.OrderDue its position (ExpiryCursor).
func Cursor(rec ledger.Record, order ledger.Order) string {
	if order == ledger.OrderDue {
		return ExpiryCursor(rec)
	}
	return rec.ID
}

// ExpiryCursor is the position of rec in a listing in expiry order: its
// due time (for a call awaiting approval, its approval's expiry) in Unix
// nanoseconds, a dot, and its id. A position, not a reference: the
// listing goes on from it whatever happened to rec meanwhile.
func ExpiryCursor(rec ledger.Record) string {
	due, _ := ledger.DueAt(rec)
	return strconv.FormatInt(ledger.DueUnixNano(due), 10) + "." + rec.ID
}

// parseExpiryCursor sets f's position from an ExpiryCursor.
func parseExpiryCursor(f *ledger.Filter, s string) error {
	n, id, ok := strings.Cut(s, ".")
	ns, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || id == "" {
		return fmt.Errorf("after %q is not the next of a listing in expiry order (want <unix nanoseconds>.<execution id>)", s)
	}
	f.After, f.AfterDue = id, time.Unix(0, ns).UTC()
	return nil
}

// knownStates are the values the state filter accepts.
var knownStates = []ledger.State{
	ledger.StateAwaitingApproval, ledger.StateApproved, ledger.StateDispatched, ledger.StateRetryWait,
	ledger.StateRecoveryRequired, ledger.StateSucceeded, ledger.StateFailed, ledger.StateRejected,
	ledger.StateExpired, ledger.StateAbandoned, ledger.StateCancelled,
}

// ParseFilter parses list query parameters (state, session_id, namespace,
// after, limit) into a ledger filter that lists the newest executions
// first (ledger.OrderNewest). The CLI's ls uses it too.
func ParseFilter(state, session, namespace, after, limit string) (ledger.Filter, error) {
	f := ledger.Filter{State: ledger.State(state), SessionID: session, Namespace: namespace, After: after, Limit: 100, Order: ledger.OrderNewest}
	if state != "" {
		ok := false
		for _, s := range knownStates {
			ok = ok || s == f.State
		}
		if !ok {
			names := make([]string, len(knownStates))
			for i, s := range knownStates {
				names[i] = string(s)
			}
			return f, fmt.Errorf("unknown state %q (want one of %s)", state, strings.Join(names, ", "))
		}
	}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxListLimit {
			return f, fmt.Errorf("limit must be an integer from 1 to %d", MaxListLimit)
		}
		f.Limit = n
	}
	return f, nil
}

// Orders of a listing (the order parameter of GET /v1/executions).
const (
	// OrderNewest lists the most recently created executions first. It
	// is the default.
	OrderNewest = "newest"
	// OrderExpiry lists the calls of state awaiting_approval or approved
	// whose approval expires soonest first, across every call the
	// listing covers.
	OrderExpiry = "expiry"
)

// SetOrder sets the order of f, which ParseFilter returned, from the
// order parameter ("", OrderNewest or OrderExpiry). OrderExpiry needs
// state awaiting_approval or approved, and reads f.After as an
// ExpiryCursor.
func SetOrder(f *ledger.Filter, order string) error {
	switch order {
	case "", OrderNewest:
		return nil
	case OrderExpiry:
	default:
		return fmt.Errorf("unknown order %q (want %s or %s)", order, OrderNewest, OrderExpiry)
	}
	if f.State != ledger.StateAwaitingApproval && f.State != ledger.StateApproved {
		return fmt.Errorf("order %s lists approvals: it needs state %s or %s", OrderExpiry, ledger.StateAwaitingApproval, ledger.StateApproved)
	}
	f.Order = ledger.OrderDue
	if f.After != "" {
		return parseExpiryCursor(f, f.After)
	}
	return nil
}

// CountAwaiting returns how many executions await approval within f's
// namespaces (f.Namespace, else f.Namespaces, else all), from the
// ledger's approval index, and false when f lists something else (another
// state, or one session) that the index does not count.
func CountAwaiting(ctx context.Context, led ledger.Ledger, f ledger.Filter) (int, bool, error) {
	if f.State != ledger.StateAwaitingApproval || f.SessionID != "" {
		return 0, false, nil
	}
	nss := []string{f.Namespace}
	if f.Namespace == "" && len(f.Namespaces) > 0 {
		nss = slices.Compact(slices.Sorted(slices.Values(f.Namespaces)))
	}
	total := 0
	for _, ns := range nss {
		n, err := led.AwaitingApproval(ctx, ns)
		if err != nil {
			return 0, false, err
		}
		total += n
	}
	return total, true, nil
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "state", "session_id", "namespace", "after", "limit", "order":
		default:
			writeProblem(w, NewProblem(CodeBadRequest, fmt.Sprintf("unknown query parameter %q", k)))
			return
		}
	}
	f, err := ParseFilter(q.Get("state"), q.Get("session_id"), q.Get("namespace"), q.Get("after"), q.Get("limit"))
	if err == nil {
		err = SetOrder(&f, q.Get("order"))
	}
	if err != nil {
		writeProblem(w, NewProblem(CodeBadRequest, err.Error()))
		return
	}
	if !a.scopeFilter(w, r, &f) {
		return
	}
	recs, err := a.ex.Ledger().List(r.Context(), f)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		writeProblem(w, NewProblem(CodeBadRequest, fmt.Sprintf("after names no execution (%q); pass the next of a previous answer", f.After)))
		return
	case errors.Is(err, ledger.ErrPruned):
		writeProblem(w, NewProblem(CodePruned, fmt.Sprintf("after names execution %s, which was pruned by retention meanwhile; list again from the start", f.After)))
		return
	case err != nil:
		a.fail(w, r, err, host.Result{})
		return
	}
	lr := NewListResponse(recs, f)
	if n, ok, err := CountAwaiting(r.Context(), a.ex.Ledger(), f); err != nil {
		a.fail(w, r, err, host.Result{})
		return
	} else if ok {
		lr.Total = &n
	}
	writeJSON(w, http.StatusOK, lr)
}

// scopeFilter confines f to the namespaces of the request's principal
// (host.Scope): a namespace outside them is refused (namespace_forbidden),
// no namespace lists all of them, and an after naming an execution of
// another namespace is answered as one that does not exist. It writes the
// problem and returns false on refusal.
func (a *api) scopeFilter(w http.ResponseWriter, r *http.Request, f *ledger.Filter) bool {
	s, ok := host.ScopeFrom(r.Context())
	if !ok || len(s.Namespaces) == 0 {
		return true
	}
	if f.Namespace != "" && !s.Allows(f.Namespace) {
		writeProblem(w, NewProblem(CodeNamespaceForbidden, fmt.Sprintf(
			"principal %q acts in namespace %s, not %q: list without namespace for all of its executions", s.Principal, quoted(s.Namespaces), f.Namespace)))
		return false
	}
	f.Namespaces = s.Namespaces
	// In expiry order after is a position, of which nothing is read: any
	// id answers alike, so nothing says whether another namespace's
	// exists.
	if f.After != "" && f.Order != ledger.OrderDue {
		rec, err := a.ex.Ledger().Get(r.Context(), f.After)
		if (err == nil || errors.Is(err, ledger.ErrPruned)) && !s.Allows(rec.Namespace) {
			writeProblem(w, NewProblem(CodeBadRequest, fmt.Sprintf("after names no execution (%q); pass the next of a previous answer", f.After)))
			return false
		}
	}
	return true
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// ResolveRequest is the body of POST /v1/executions/{id}/resolve. Applied
// is required: a missing field must not silently mean "abandon".
type ResolveRequest struct {
	Applied *bool           `json:"applied"`
	Result  json.RawMessage `json:"result,omitempty"`
	Receipt string          `json:"receipt,omitempty"`
	Retry   bool            `json:"retry,omitempty"`
	// By is optional and never recorded as the actor: the resolution is
	// recorded under the authenticated principal's name. When set it must
	// be that name (identity_mismatch otherwise); without credentials
	// (dev) it is kept in the reason as a claim.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason"`
}

func (a *api) resolve(w http.ResponseWriter, r *http.Request) {
	var req ResolveRequest
	if !a.decode(w, r, &req, false) {
		return
	}
	applied := ""
	if req.Applied != nil {
		applied = "present"
	}
	if !requireFields(w, [2]string{"applied", applied}, [2]string{"reason", req.Reason}) {
		return
	}
	by, reason, ok := a.actor(w, r, req.By, req.Reason)
	if !ok {
		return
	}
	res, err := a.ex.Resolve(r.Context(), r.PathValue("id"), host.Resolution{
		Applied: *req.Applied, Result: req.Result, Receipt: req.Receipt, Retry: req.Retry, By: by, Reason: reason,
	})
	if err != nil {
		a.fail(w, r, err, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// CancelRequest is the body of POST /v1/executions/{id}/cancel; the body
// may be empty.
type CancelRequest struct {
	// By is optional, as in ResolveRequest: the cancellation is recorded
	// under the authenticated principal's name.
	By string `json:"by,omitempty"`
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	var req CancelRequest
	if !a.decode(w, r, &req, true) {
		return
	}
	// Cancel records no reason, so a claim without proof has nowhere to go
	// but the log.
	by, why, ok := a.actor(w, r, req.By, "")
	if !ok {
		return
	}
	if why != "" {
		a.opts.Logger.InfoContext(r.Context(), "httpapi: cancel", "actor", by, "note", why)
	}
	res, err := a.ex.Cancel(r.Context(), r.PathValue("id"), by)
	if err != nil {
		a.fail(w, r, err, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// DecisionRequest is the body of POST /v1/approvals/{id}/approve and
// /reject. Digest is the argument digest the reviewer was shown (the
// approval's args_digest); approve requires it.
type DecisionRequest struct {
	// By is optional and never recorded as the reviewer: the decision is
	// recorded under the authenticated principal's name. When set it must
	// be that name (identity_mismatch otherwise); without credentials
	// (dev) it is kept in the reason as a claim.
	By     string `json:"by,omitempty"`
	Digest string `json:"digest"`
	Reason string `json:"reason,omitempty"`
}

// approvalView serves GET /v1/approvals/{id}: host.ApprovalView, what a
// reviewer is shown (the console, the CLI through a server).
func (a *api) approvalView(w http.ResponseWriter, r *http.Request) {
	v, err := a.ex.ApprovalView(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err, host.Result{})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *api) approve(w http.ResponseWriter, r *http.Request) { a.decide(w, r, true) }
func (a *api) reject(w http.ResponseWriter, r *http.Request)  { a.decide(w, r, false) }

func (a *api) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	var req DecisionRequest
	if !a.decode(w, r, &req, false) {
		return
	}
	digest := req.Digest
	if !approve {
		digest = "optional"
	}
	if !requireFields(w, [2]string{"digest", digest}) {
		return
	}
	by, reason, ok := a.actor(w, r, req.By, req.Reason)
	if !ok {
		return
	}
	d := host.Decision{By: by, ArgsDigest: req.Digest, Reason: reason}
	var (
		res host.Result
		err error
	)
	if approve {
		res, err = a.ex.Approve(r.Context(), r.PathValue("id"), d)
	} else {
		res, err = a.ex.Reject(r.Context(), r.PathValue("id"), d)
	}
	if err != nil {
		a.fail(w, r, err, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (a *api) recoverAll(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if !a.decode(w, r, &req, true) {
		return
	}
	rep, err := a.ex.Recover(r.Context())
	if err != nil {
		a.fail(w, r, err, host.Result{})
		return
	}
	if rep.Uncertain == nil {
		rep.Uncertain = []host.UncertainCall{}
	}
	writeJSON(w, http.StatusOK, rep)
}

// BackupRequest is the body of POST /v1/ledger/backup.
type BackupRequest struct {
	// Dir is where the backup goes: an absolute path on the server's
	// machine, of a directory that does not exist yet.
	Dir string `json:"dir"`
}

// backuper is a ledger that copies itself while it serves (the Pebble
// ledger, ledger.DB.Backup).
type backuper interface {
	Backup(ctx context.Context, dir string) (ledger.BackupInfo, error)
}

// backup serves POST /v1/ledger/backup: a consistent copy of the ledger
// taken while it serves. It copies every namespace's executions, so only
// an operator of every namespace may take one.
func (a *api) backup(w http.ResponseWriter, r *http.Request) {
	var req BackupRequest
	if !a.decode(w, r, &req, false) {
		return
	}
	if s, ok := host.ScopeFrom(r.Context()); ok && len(s.Namespaces) > 0 {
		writeProblem(w, NewProblem(CodeNamespaceForbidden, "a backup copies the executions of every namespace: only an operator of every namespace (namespaces = [\"*\"]) may take one"))
		return
	}
	if !filepath.IsAbs(req.Dir) {
		writeProblem(w, NewProblem(CodeBadRequest, fmt.Sprintf("dir %q must be an absolute path on the server's machine, of a directory that does not exist yet", req.Dir)))
		return
	}
	b, ok := a.ex.Ledger().(backuper)
	if !ok {
		writeProblem(w, NewProblem(CodeBadRequest, "this server's ledger is shared on PostgreSQL: back it up with the database's own tools (pg_dump, point-in-time recovery), and restore it with connhost ledger accept-restore"))
		return
	}
	info, err := b.Backup(r.Context(), filepath.Clean(req.Dir))
	if errors.Is(err, ledger.ErrBackupExists) {
		writeProblem(w, NewProblem(CodeBadRequest, fmt.Sprintf("%s exists: a backup goes into a new directory", filepath.Clean(req.Dir))))
		return
	}
	if err != nil {
		a.fail(w, r, err, host.Result{})
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (a *api) tools(w http.ResponseWriter, r *http.Request) {
	f, err := tooldefs.ParseFormat(r.URL.Query().Get("format"))
	if err != nil {
		writeProblem(w, NewProblem(CodeBadRequest, err.Error()))
		return
	}
	// A failure here is the server's (a manifest whose names cannot be
	// mapped for a model): fail logs it and answers a generic internal
	// problem, so connector and operation names stay out of the answer.
	v, err := tooldefs.Build(a.ex.Manifests(), f)
	if err != nil {
		a.fail(w, r, fmt.Errorf("tool definitions: %w", err), host.Result{})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	if err := a.ex.Health(); err != nil {
		// The lease is this node's, not a secret: say why.
		writeProblem(w, NewProblem(CodeUnavailable, err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// metrics serves the registry to principals of every namespace only: its
// counters and gauges (transitions, pending approvals and their ages,
// connector calls) add up every tenant's work, so a principal bound to
// namespaces is refused (namespace_forbidden) rather than shown the
// others'.
func (a *api) metrics(w http.ResponseWriter, r *http.Request) {
	if p := principalOf(r); len(p.Namespaces) > 0 {
		writeProblem(w, NewProblem(CodeNamespaceForbidden, fmt.Sprintf(
			"/metrics counts the calls and approvals of every namespace, and principal %q acts in namespace %s only: scrape with a principal of role metrics whose namespaces are every namespace (namespaces = [\"*\"])",
			p.Name, quoted(p.Namespaces))))
		return
	}
	a.metricsH.ServeHTTP(w, r)
}

func (a *api) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(a.openapiDoc)
}

// mcp hands /mcp to the MCP server (Options.MCP).
func (a *api) mcp(w http.ResponseWriter, r *http.Request) {
	if a.opts.MCP == nil {
		writeProblem(w, NewProblem(CodeNotFound, "this server does not serve MCP"))
		return
	}
	a.opts.MCP.ServeHTTP(w, r)
}
