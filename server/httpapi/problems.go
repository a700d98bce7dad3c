package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// Code is a stable, machine-readable problem code. Clients branch on it,
// never on the title or detail text. Codes are never renamed or reused.
type Code string

// Problem codes the API emits. Each one is listed, with its HTTP status, in
// codes below and in openapi.json (components.schemas.ProblemCode); a test
// keeps the three in step.
const (
	CodeBadRequest             Code = "bad_request"
	CodeInvalidArguments       Code = "invalid_arguments"
	CodeUnknownTool            Code = "unknown_tool"
	CodeIntentMismatch         Code = "intent_mismatch"
	CodeSessionFenced          Code = "session_fenced"
	CodeNotFound               Code = "not_found"
	CodeApprovalDigestMismatch Code = "approval_digest_mismatch"
	CodeApprovalExpired        Code = "approval_expired"
	CodeNotAwaitingApproval    Code = "not_awaiting_approval"
	CodeNotRecoveryRequired    Code = "not_recovery_required"
	CodeRecoveryRequired       Code = "recovery_required"
	CodeApprovalRequired       Code = "approval_required"
	CodePruned                 Code = "pruned"
	CodeUnauthorized           Code = "unauthorized"
	CodeForbiddenHost          Code = "forbidden_host"
	CodeForbiddenRole          Code = "forbidden_role"
	CodeApprovalNotConfigured  Code = "approval_not_configured"
	CodeIdentityMismatch       Code = "identity_mismatch"
	CodeNamespaceForbidden     Code = "namespace_forbidden"
	CodeRateLimited            Code = "rate_limited"
	CodePendingApprovalsLimit  Code = "too_many_pending_approvals"
	CodeArgumentsTooLarge      Code = "arguments_too_large"
	CodePayloadTooLarge        Code = "payload_too_large"
	CodeUnsupportedMediaType   Code = "unsupported_media_type"
	CodeMethodNotAllowed       Code = "method_not_allowed"
	CodeUnavailable            Code = "unavailable"
	// CodeConnectorBusy: every instance of the call's connector stayed
	// taken by other calls; nothing was dispatched (nothing recorded for
	// a new call), so the same call may be sent again after Retry-After.
	CodeConnectorBusy Code = "connector_busy"
	CodeInternal      Code = "internal"
	// CodeLedgerDamaged: the ledger is not what this node acknowledged
	// (a shared ledger found restored, emptied or dropped while the node
	// runs), or holds a record of the call the node cannot read; the
	// CLI's code too, when the ledger is missing, damaged or behind its
	// mark or witness, so the command did not start.
	CodeLedgerDamaged Code = "ledger_damaged"
	// CodeInvalidConfig: the CLI's code for a config it refuses (a value
	// that does not parse, a problem of the config as a whole, a
	// connector key no manifest declares, a required value missing, a
	// URL outside its connector's allowlist, a listen address refused):
	// the command, serve included, did not start, and nothing was
	// recorded. No HTTP handler answers it.
	CodeInvalidConfig Code = "invalid_config"
)

type codeInfo struct {
	status int
	title  string
}

// codes maps every Code to its HTTP status and title.
var codes = map[Code]codeInfo{
	CodeBadRequest:             {http.StatusBadRequest, "Malformed request"},
	CodeInvalidArguments:       {http.StatusUnprocessableEntity, "Arguments do not match the tool's input schema"},
	CodeUnknownTool:            {http.StatusNotFound, "Unknown tool"},
	CodeIntentMismatch:         {http.StatusConflict, "Tool call id reused with other arguments"},
	CodeSessionFenced:          {http.StatusConflict, "Session fenced by uncertain calls"},
	CodeNotFound:               {http.StatusNotFound, "Not found"},
	CodeApprovalDigestMismatch: {http.StatusConflict, "Approval digest does not match the recorded arguments"},
	CodeApprovalExpired:        {http.StatusGone, "Approval expired"},
	CodeNotAwaitingApproval:    {http.StatusConflict, "Execution is not awaiting approval"},
	CodeNotRecoveryRequired:    {http.StatusConflict, "Execution is not recovery_required"},
	CodeRecoveryRequired:       {http.StatusConflict, "Execution is recovery_required; only a resolution settles it"},
	CodeApprovalRequired:       {http.StatusConflict, "Execution was never approved; it cannot be retried"},
	CodePruned:                 {http.StatusGone, "Execution pruned by retention"},
	CodeUnauthorized:           {http.StatusUnauthorized, "Missing or wrong bearer token"},
	CodeForbiddenHost:          {http.StatusForbidden, "Host header not allowed"},
	CodeForbiddenRole:          {http.StatusForbidden, "The credential's principal lacks the role this route needs"},
	CodeApprovalNotConfigured:  {http.StatusForbidden, "No principal of this server may make this decision"},
	CodeIdentityMismatch:       {http.StatusBadRequest, "The body's by names another principal than the credential"},
	CodeNamespaceForbidden:     {http.StatusForbidden, "The credential's principal does not act in this namespace"},
	CodeRateLimited:            {http.StatusTooManyRequests, "The principal's call rate limit is reached"},
	CodePendingApprovalsLimit:  {http.StatusTooManyRequests, "The principal's limit of pending approvals is reached"},
	CodeArgumentsTooLarge:      {http.StatusRequestEntityTooLarge, "The arguments exceed the principal's limit"},
	CodePayloadTooLarge:        {http.StatusRequestEntityTooLarge, "Request body too large"},
	CodeUnsupportedMediaType:   {http.StatusUnsupportedMediaType, "Request body must be application/json"},
	CodeMethodNotAllowed:       {http.StatusMethodNotAllowed, "Method not allowed"},
	CodeUnavailable:            {http.StatusServiceUnavailable, "Executor unavailable"},
	CodeConnectorBusy:          {http.StatusServiceUnavailable, "Every instance of the connector is busy; send the same call again later"},
	CodeInternal:               {http.StatusInternalServerError, "Internal error"},
	CodeLedgerDamaged:          {http.StatusServiceUnavailable, "Ledger damaged or missing"},
	CodeInvalidConfig:          {http.StatusBadRequest, "The config is refused"},
}

// cliOnly holds the codes no HTTP handler emits: the CLI's problems share
// the table and the document's enum.
var cliOnly = map[Code]bool{CodeInvalidConfig: true}

// ProblemTypePrefix prefixes a problem's code to form its type URI.
const ProblemTypePrefix = "urn:connhost:problem:"

// Problem is an RFC 9457 problem document (application/problem+json) with
// connhost's extension members. Code is stable; Title and Detail are for
// people.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   Code   `json:"code"`

	// ArgumentErrors lists the failing argument paths (invalid_arguments).
	ArgumentErrors []manifests.ArgProblem `json:"argument_errors,omitempty"`
	// AvailableTools lists the tools the server offers
	// ("connector.operation", sorted) when the one asked for is unknown
	// (unknown_tool).
	AvailableTools []string `json:"available_tools,omitempty"`
	// ExecutionID names the execution concerned, when there is one.
	ExecutionID string `json:"execution_id,omitempty"`
	// RecordedTool, GivenTool, RecordedDigest and GivenDigest describe an
	// intent_mismatch.
	RecordedTool   string `json:"recorded_tool,omitempty"`
	GivenTool      string `json:"given_tool,omitempty"`
	RecordedDigest string `json:"recorded_digest,omitempty"`
	GivenDigest    string `json:"given_digest,omitempty"`
	// UncertainCalls lists the calls that fence a session
	// (session_fenced).
	UncertainCalls []host.UncertainCall `json:"uncertain_calls,omitempty"`
	// RequiredRoles are the roles the route needs (forbidden_role,
	// approval_not_configured).
	RequiredRoles []Role `json:"required_roles,omitempty"`
	// RetryAfter is how many seconds to wait before sending the same call
	// again (rate_limited, connector_busy); the HTTP answer carries it as
	// Retry-After too.
	RetryAfter int `json:"retry_after,omitempty"`
	// Execution is the execution as it stands when an operation was
	// refused because of it (not_awaiting_approval, not_recovery_required,
	// recovery_required, approval_required, approval_digest_mismatch,
	// approval_expired), in the shape of every execution (see Execution).
	Execution *host.Result `json:"execution,omitempty"`
}

// NewProblem returns the problem for code with the given detail.
func NewProblem(code Code, detail string) *Problem {
	ci, ok := codes[code]
	if !ok {
		code, ci = CodeInternal, codes[CodeInternal]
	}
	return &Problem{Type: ProblemTypePrefix + string(code), Title: ci.title, Status: ci.status, Detail: detail, Code: code}
}

// ProblemOf maps an executor error to its problem. res is the Result the
// executor returned with the error (it may be zero). The detail is what
// the error says for people (host.Detail), never its chain of package
// prefixes; the caller logs the whole error where it needs it. Errors the
// API does not recognise become CodeInternal with a generic detail, so
// internal messages (paths, ledger keys) do not leak.
func ProblemOf(err error, res host.Result) *Problem {
	var (
		im *host.IntentMismatchError
		fe *host.FencedError
		ut *host.UnknownToolError
		ae *manifests.ArgsError
		rl *host.RateLimitedError
		be *host.BusyError
		de *ledger.DamageError
	)
	detail := host.Detail(err)
	if detail == "" {
		// A refusal built outside the executor (without a sentence of its
		// own): its message, less the package prefix.
		detail = strings.TrimPrefix(err.Error(), "host: ")
	}
	var p *Problem
	switch {
	case errors.As(err, &im):
		p = NewProblem(CodeIntentMismatch, detail)
		p.ExecutionID, p.RecordedTool, p.GivenTool = im.ExecutionID, im.RecordedTool, im.GivenTool
		p.RecordedDigest, p.GivenDigest = im.RecordedDigest, im.GivenDigest
		return p
	case errors.As(err, &fe):
		p = NewProblem(CodeSessionFenced, detail)
		p.UncertainCalls = fe.Calls
		if p.UncertainCalls == nil {
			p.UncertainCalls = []host.UncertainCall{}
		}
		return p
	case errors.Is(err, host.ErrInvalidArguments):
		p = NewProblem(CodeInvalidArguments, detail)
		if errors.As(err, &ae) {
			p.ArgumentErrors = ae.Problems
		}
		return p
	case errors.Is(err, host.ErrBadCall):
		return NewProblem(CodeBadRequest, detail)
	case errors.As(err, &ut):
		p = NewProblem(CodeUnknownTool, detail)
		p.AvailableTools = ut.Available
		if p.AvailableTools == nil {
			p.AvailableTools = []string{}
		}
		return p
	case errors.Is(err, host.ErrUnknownTool):
		return NewProblem(CodeUnknownTool, detail)
	case errors.Is(err, host.ErrNotFound):
		return NewProblem(CodeNotFound, detail)
	case errors.Is(err, host.ErrPruned):
		return NewProblem(CodePruned, detail)
	case errors.Is(err, host.ErrApprovalDigest):
		p = NewProblem(CodeApprovalDigestMismatch, detail)
	case errors.Is(err, host.ErrApprovalExpired):
		p = NewProblem(CodeApprovalExpired, detail)
	case errors.Is(err, host.ErrNotAwaitingApproval):
		p = NewProblem(CodeNotAwaitingApproval, detail)
	case errors.Is(err, host.ErrNotRecoveryRequired):
		p = NewProblem(CodeNotRecoveryRequired, detail)
	case errors.Is(err, host.ErrRecoveryRequired):
		p = NewProblem(CodeRecoveryRequired, detail)
	case errors.Is(err, host.ErrApprovalRequired):
		p = NewProblem(CodeApprovalRequired, detail)
	case errors.Is(err, host.ErrNamespaceForbidden):
		return NewProblem(CodeNamespaceForbidden, detail)
	case errors.As(err, &rl):
		p = NewProblem(CodeRateLimited, detail)
		p.RetryAfter = max(1, int(math.Ceil(rl.RetryAfter.Seconds())))
		return p
	case errors.As(err, &be):
		p = NewProblem(CodeConnectorBusy, detail)
		p.RetryAfter = max(1, int(math.Ceil(be.RetryAfter.Seconds())))
		if be.Recorded {
			p.ExecutionID = be.ExecutionID
		}
		return p
	case errors.Is(err, host.ErrPendingApprovalsLimit):
		return NewProblem(CodePendingApprovalsLimit, detail)
	case errors.Is(err, host.ErrArgumentsTooLarge):
		return NewProblem(CodeArgumentsTooLarge, detail)
	case errors.As(err, &de):
		// Before ErrLeaseLost: a node whose ledger is damaged loses its
		// lease too, and the damage is what the caller must know. The
		// detail names no database, path or witness: the log has them.
		return NewProblem(CodeLedgerDamaged, "the ledger is not what this node acknowledged: it was restored from an older copy, emptied or replaced; this node runs nothing and records nothing until an operator restores it or accepts the restore (connhost ledger accept-restore); see the server log")
	case errors.Is(err, ledger.ErrCorrupt):
		return NewProblem(CodeLedgerDamaged, "the ledger holds a record of this call that this node cannot read (edited or copied in the database): the call is neither run nor ended; an operator restores the record; see the server log")
	case errors.Is(err, host.ErrClosed):
		return NewProblem(CodeUnavailable, "the executor is closed")
	case errors.Is(err, host.ErrApproverNotConfigured):
		p = NewProblem(CodeUnavailable, detail)
	case errors.Is(err, host.ErrLeaseLost):
		return NewProblem(CodeUnavailable, "this node holds no live lease on the shared ledger and takes no new work; send the call to another node")
	case errors.Is(err, ledger.ErrUnavailable):
		return NewProblem(CodeUnavailable, "the shared ledger cannot be reached; send the call again later (it is answered from what the ledger holds)")
	default:
		return NewProblem(CodeInternal, "internal error; see the server log")
	}
	if res.ExecutionID != "" {
		r := res
		p.Execution = &r
		p.ExecutionID = res.ExecutionID
	}
	return p
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *Problem) {
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"urn:connhost:problem:internal","title":"Internal error","status":500,"code":"internal"}`)
		p.Status = http.StatusInternalServerError
	}
	if n := noteWriter(w); n != nil {
		n.code = p.Code
	}
	h := w.Header()
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}
