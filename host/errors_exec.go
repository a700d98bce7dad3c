package host

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/manifests"
)

// Sentinel errors of the executor. Typed errors below wrap them, so callers
// may test with errors.Is or extract details with errors.As.
var (
	// ErrBadCall: the call lacks a session id, tool-call id or tool name,
	// or an identity field is not valid UTF-8, holds a control character
	// or is longer than MaxIdentityBytes.
	ErrBadCall = errors.New("host: bad call")
	// ErrUnknownTool: no loaded connector offers the tool.
	ErrUnknownTool = errors.New("host: unknown tool")
	// ErrInvalidArguments: the arguments are not a JSON object or fail the
	// operation's schema. Nothing was recorded.
	ErrInvalidArguments = errors.New("host: invalid arguments")
	// ErrIntentMismatch: the tool-call id was already used with other
	// arguments (or another tool). Nothing was dispatched.
	ErrIntentMismatch = errors.New("host: intent mismatch")
	// ErrSessionFenced: the session holds recovery_required executions; no
	// new execution is admitted until an operator resolves them.
	ErrSessionFenced = errors.New("host: session fenced by uncertain executions")
	// ErrApprovalRequired: the call waits for a reviewer.
	ErrApprovalRequired = errors.New("host: approval required")
	// ErrRecoveryRequired: the call's outcome is unknown and needs an
	// operator. It is Result.Err of a recovery_required execution, and the
	// error of Cancel on one: only Resolve settles such a call.
	ErrRecoveryRequired = errors.New("host: recovery required")
	// ErrNotFound: no execution or approval with that id.
	ErrNotFound = errors.New("host: not found")
	// ErrApprovalDigest: the reviewer saw other arguments than the ones
	// recorded.
	ErrApprovalDigest = errors.New("host: approval digest does not match the recorded arguments")
	// ErrApprovalExpired: the approval request expired.
	ErrApprovalExpired = errors.New("host: approval expired")
	// ErrNotAwaitingApproval: approve/reject on an execution that is not
	// waiting for one (already decided, or never needed one).
	ErrNotAwaitingApproval = errors.New("host: execution is not awaiting approval")
	// ErrStateUsed: a decision names the request state whose answer was
	// recorded already (Decision.StateNonce): nothing was decided again.
	ErrStateUsed = errors.New("host: request state already used")
	// ErrNotRecoveryRequired: resolve on an execution that is not
	// recovery_required.
	ErrNotRecoveryRequired = errors.New("host: execution is not recovery_required")
	// ErrPruned: the execution was pruned by retention; its id stays fenced
	// and is never executed again as new.
	ErrPruned = errors.New("host: execution pruned by retention")
	// ErrClosed: the executor was closed.
	ErrClosed = errors.New("host: closed")
	// ErrConnectorBusy: every instance of the call's connector stayed
	// taken by other calls for Options.InstanceWait, so the call was not
	// dispatched: nothing was recorded for a new call, and a recorded one
	// is as it was. Send the same call again later; see *BusyError.
	ErrConnectorBusy = errors.New("host: connector busy")
	// ErrMissingConfig: a config key a manifest requires has no value.
	// Open refuses to start; see *MissingConfigError.
	ErrMissingConfig = errors.New("host: required config has no value")
	// ErrApproverNotConfigured: on a shared ledger, a gated call's
	// approval names a reviewer this node's configuration does not
	// authorise for the call's namespace (Options.ApprovalKeys,
	// Options.ApprovalNamespaces), so it cannot verify it: the call is
	// left as it is, neither dispatched nor ended, for a node whose
	// configuration holds the reviewer.
	ErrApproverNotConfigured = errors.New("host: the approval's reviewer is not configured on this node")
	// ErrConfigURLDenied: a configured URL (base_url, *_url) points at an
	// origin the connector may not reach. Open refuses to start; see
	// *ConfigURLError.
	ErrConfigURLDenied = errors.New("host: configured URL outside the connector's allowlist")
)

// Errors of loading a connector, which Open returns wrapped with the
// connector's name; they come from the wasm runtime.
var (
	// ErrDigestMismatch: the module's sha256 differs from the digest pinned
	// in the manifest. See *DigestMismatchError.
	ErrDigestMismatch = wasmrt.ErrDigestMismatch
	// ErrUnpinned: the manifest pins no module digest and unpinned modules
	// are not allowed (Options.AllowUnpinned).
	ErrUnpinned = wasmrt.ErrUnpinned
	// ErrABIVersion: the module (or the manifest) speaks another ABI
	// version than this host.
	ErrABIVersion = wasmrt.ErrABIVersion
	// ErrMissingExport: the module lacks an export the ABI or the manifest
	// requires (e.g. recovery idempotent-retry without execute_with_key).
	ErrMissingExport = wasmrt.ErrMissingExport
	// ErrMissingOperation: the manifest declares an operation the module
	// does not implement.
	ErrMissingOperation = wasmrt.ErrMissingOperation
	// ErrBadModule: the module does not compile, instantiate or describe
	// itself correctly.
	ErrBadModule = wasmrt.ErrBadModule
)

// refusalError is how the executor refuses a request: the sentinel that
// callers test with errors.Is, and a sentence for people naming what was
// refused and why. Error() chains the two, as logs want; Detail() is the
// sentence alone, which the HTTP API's problems and the CLI show.
type refusalError struct {
	sentinel error
	detail   string
}

func refuse(sentinel error, format string, args ...any) error {
	return &refusalError{sentinel: sentinel, detail: fmt.Sprintf(format, args...)}
}

func (e *refusalError) Error() string  { return e.sentinel.Error() + ": " + e.detail }
func (e *refusalError) Unwrap() error  { return e.sentinel }
func (e *refusalError) Detail() string { return e.detail }

// Detail returns what err says for people, without the chain of package
// prefixes that Error() carries for logs: the sentence of the executor's
// refusal or typed error found in err's chain (every error of this
// package that a request can cause has one), or "" when there is none.
func Detail(err error) string {
	var d interface{ Detail() string }
	if errors.As(err, &d) {
		return d.Detail()
	}
	return ""
}

// DigestMismatchError reports a module whose sha256 differs from the
// digest pinned in its manifest (errors.As finds it in Open's error).
type DigestMismatchError = wasmrt.DigestMismatchError

// IntentMismatchError reports a tool-call id reused with other arguments.
type IntentMismatchError struct {
	ExecutionID    string
	ToolCallID     string
	RecordedTool   string
	GivenTool      string
	RecordedDigest string
	GivenDigest    string
}

func (e *IntentMismatchError) Error() string {
	return fmt.Sprintf("host: intent mismatch: execution[%s] tool_call[%s] was recorded as %s with args digest %s, now called as %s with args digest %s",
		e.ExecutionID, e.ToolCallID, e.RecordedTool, short(e.RecordedDigest), e.GivenTool, short(e.GivenDigest))
}

// Detail says what differs and what to do.
func (e *IntentMismatchError) Detail() string {
	what := "other arguments"
	if e.RecordedTool != e.GivenTool {
		what = "another tool"
	}
	return fmt.Sprintf("tool call %s was recorded as %s with args digest %s and is now called with %s (%s, args digest %s); nothing was dispatched: a tool-call id names one call, so give new arguments a new tool-call id",
		e.ToolCallID, e.RecordedTool, short(e.RecordedDigest), what, e.GivenTool, short(e.GivenDigest))
}

// Unwrap returns ErrIntentMismatch.
func (e *IntentMismatchError) Unwrap() error { return ErrIntentMismatch }

// UncertainCall names one recovery_required execution.
type UncertainCall struct {
	ExecutionID string `json:"execution_id"`
	ToolCallID  string `json:"tool_call_id"`
	Tool        string `json:"tool"`
	Attempt     int    `json:"attempt"`
}

// FencedError reports a session fenced by uncertain executions.
type FencedError struct {
	Namespace string
	SessionID string
	Calls     []UncertainCall
}

func (e *FencedError) Error() string {
	ids := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		ids[i] = c.ToolCallID + "(" + c.ExecutionID + ")"
	}
	return fmt.Sprintf("host: session %s/%s is fenced until an operator resolves %d uncertain call(s): %s",
		e.Namespace, e.SessionID, len(e.Calls), strings.Join(ids, ", "))
}

// Unwrap returns ErrSessionFenced.
func (e *FencedError) Unwrap() error { return ErrSessionFenced }

// Detail names the session and the calls that fence it.
func (e *FencedError) Detail() string {
	return strings.TrimPrefix(e.Error(), "host: ")
}

// ArgumentsError reports arguments refused before anything was recorded.
type ArgumentsError struct {
	Tool string
	Err  error
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("host: invalid arguments for %s: %v", e.Tool, e.Err)
}

// Unwrap returns both ErrInvalidArguments and the underlying error.
func (e *ArgumentsError) Unwrap() []error { return []error{ErrInvalidArguments, e.Err} }

// Detail names the tool and every failing argument path.
func (e *ArgumentsError) Detail() string {
	var ae *manifests.ArgsError
	if !errors.As(e.Err, &ae) {
		return fmt.Sprintf("the arguments of %s are refused: %v", e.Tool, e.Err)
	}
	parts := make([]string, len(ae.Problems))
	for i, p := range ae.Problems {
		path := p.Path
		if path == "" {
			path = "/"
		}
		parts[i] = path + ": " + p.Msg
	}
	return fmt.Sprintf("the arguments do not match the input schema of %s: %s", e.Tool, strings.Join(parts, "; "))
}

// UnknownToolError reports a tool that no loaded connector offers.
type UnknownToolError struct {
	// Tool is the name as given.
	Tool string
	// Reason says which part is unknown.
	Reason string
	// Available lists the tools the executor offers ("connector.operation"),
	// sorted.
	Available []string
}

func (e *UnknownToolError) Error() string { return "host: " + e.Detail() }

// Unwrap returns ErrUnknownTool.
func (e *UnknownToolError) Unwrap() error { return ErrUnknownTool }

// Detail names the tool, what is unknown about it, and the tools there are.
func (e *UnknownToolError) Detail() string {
	avail := "none is loaded"
	if len(e.Available) > 0 {
		avail = strings.Join(e.Available, ", ")
	}
	return fmt.Sprintf("unknown tool %q: %s; the available tools are: %s", e.Tool, e.Reason, avail)
}

// ApprovalRequiredError is Result.Err for an execution awaiting approval.
type ApprovalRequiredError struct {
	ExecutionID string
	ApprovalID  string
	ArgsDigest  string
	ExpiresAt   time.Time
}

func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("host: execution[%s] awaits approval %s (args digest %s) until %s",
		e.ExecutionID, e.ApprovalID, short(e.ArgsDigest), e.ExpiresAt.Format(time.RFC3339))
}

// Unwrap returns ErrApprovalRequired.
func (e *ApprovalRequiredError) Unwrap() error { return ErrApprovalRequired }

// RecoveryRequiredError is Result.Err for a recovery_required execution.
type RecoveryRequiredError struct {
	ExecutionID string
	ToolCallID  string
	Reason      string
}

func (e *RecoveryRequiredError) Error() string {
	return fmt.Sprintf("host: execution[%s] tool_call[%s] needs an operator: %s", e.ExecutionID, e.ToolCallID, e.Reason)
}

// Unwrap returns ErrRecoveryRequired.
func (e *RecoveryRequiredError) Unwrap() error { return ErrRecoveryRequired }

// prunedError refuses an execution pruned by retention.
func prunedError(id string) error {
	return refuse(ErrPruned, "execution %s was pruned by retention; its tool-call id stays used and is never executed again", id)
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// BusyError reports a call not dispatched because every instance of its
// connector stayed taken by other calls for Options.InstanceWait. It
// unwraps to ErrConnectorBusy. Nothing was dispatched: the same call, sent
// again, runs once an instance is free.
type BusyError struct {
	Connector   string
	Namespace   string
	ExecutionID string
	Waited      time.Duration
	// RetryAfter is when to send the call again.
	RetryAfter time.Duration
	// Recorded: the execution is recorded (an approved call, or a retry)
	// and stays as it was; otherwise nothing was recorded.
	Recorded bool
}

func (e *BusyError) Error() string { return "host: " + e.Detail() }

// Unwrap returns ErrConnectorBusy.
func (e *BusyError) Unwrap() error { return ErrConnectorBusy }

// Detail says what was not done and when to call again.
func (e *BusyError) Detail() string {
	what := "nothing was recorded or dispatched"
	if e.Recorded {
		what = "the call was not dispatched and stays as recorded"
	}
	return fmt.Sprintf("every instance of connector %s stayed busy with other calls for %s; %s: send the same call again (same ids and arguments) in %s",
		e.Connector, e.Waited.Round(time.Millisecond), what, e.RetryAfter.Round(time.Second))
}
