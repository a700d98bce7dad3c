// Package guest is the connector author's SDK: write plain Go handlers,
// register them in init, build with GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared, and the SDK does the ABI's memory and envelope
// plumbing (exports, host imports, envelopes).
//
// A handler returns a typed [abi.Outcome] built with [OK], [Retryable],
// [Permanent], [Uncertain], [InProgress] (execute and execute_with_key) or
// [Applied], [NotApplied], [Unknown] (reconcile). Pick the one that tells
// the truth about the effect: Retryable and Permanent promise that this
// attempt did nothing; when a request was sent and its answer is lost, the
// truth is Uncertain. A handler that panics traps the instance: the host
// treats that as an uncertain outcome and applies the operation's declared
// recovery policy. The SDK does not recover panics into errors, because a
// panic after the provider applied the effect is not a failure.
//
// Handlers reach the outside world only through [Call]: HTTP to the hosts
// the manifest allows, config values the manifest declares, a structured
// log, and a clock whose sleep ends at the call's deadline.
//
// # A call's identity
//
// A call has two identities, and only one belongs in the provider:
//
//   - [Call.Key] ("ck_…") is the idempotency key: the same on every attempt
//     of one call (retries and recovery's re-dispatches), another for every
//     other call, scoped to the connector and namespace. It is what the
//     provider keeps, and what a lookup finds the call's effect by: an
//     Idempotency-Key header, or a field with a unique index the connector
//     fills with it. It is set in ExecuteWithKey and Reconcile handlers;
//     under plain Execute it is empty.
//   - [Call.ExecutionID] ("ex_…") names the execution to people: the API's
//     answers, the audit trail, logs. It is not the key (a connector that
//     tags its effect with one and looks it up by the other finds nothing,
//     which crashtest catches as a duplicate).
//
// What the host calls, per the operation's recovery policy in the
// manifest:
//
//   - idempotent-retry: ExecuteWithKey for every dispatch, sending Key to a
//     provider that deduplicates by it; after a crash the host dispatches
//     again with the same key.
//   - reconcile: ExecuteWithKey for every dispatch, putting Key where the
//     provider keeps it (it need not deduplicate: a unique field will do),
//     and after a crash or an uncertain outcome Reconcile, with the same
//     Key and the call's original arguments as the host recorded them. It
//     answers Applied (with the result and receipt the call would have
//     returned), NotApplied (authoritative: the provider says no attempt
//     took effect), or Unknown. An operation with no key to look up — a
//     delete by id, say — may register plain Execute and reconcile by what
//     its arguments name.
//   - manual: Execute, or ExecuteWithKey where the provider takes a key
//     anyway; after a crash an operator decides, and nothing runs again.
//
// A read (effect "read") registers Execute; the host runs it again freely.
// Each policy has a runnable example in this package's documentation.
//
// Handlers that decode their arguments with [ReadArgs] and provider
// answers with package codec, and write results with codec.AppendObject,
// avoid encoding/json's reflection, which dominates a call's cost in wasm.
//
// The package depends on the standard library, [abi] and [codec] only.
package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/codec"
)

// Handler answers one call of an operation. args are the model's JSON
// arguments exactly as recorded by the host; they never carry the
// execution identity.
type Handler func(c *Call, args []byte) abi.Outcome

// Operation binds an operation name to its handlers. Execute or
// ExecuteWithKey is required; Reconcile is optional. When ExecuteWithKey is
// registered the host calls it for every dispatch, with the call's
// idempotency key in Call.Key, and never Execute: register it whenever the
// key must reach the provider, to be deduplicated by (idempotent-retry) or
// kept where Reconcile finds it (reconcile). Registering Reconcile tells
// the host the operation can find out whether an earlier attempt took
// effect; it gets the same key and the original arguments. See "A call's
// identity" in the package documentation.
type Operation struct {
	Name           string
	Execute        Handler
	ExecuteWithKey Handler
	Reconcile      Handler
}

var registry = map[string]Operation{}
var order []string

// Register adds operations to the module. It panics on a missing name, a
// duplicate, or an operation without Execute and ExecuteWithKey: these are
// programming errors found the first time the module is loaded.
func Register(ops ...Operation) {
	for _, op := range ops {
		switch {
		case op.Name == "":
			panic("guest: Register: operation without a name")
		case op.Execute == nil && op.ExecuteWithKey == nil:
			panic(fmt.Sprintf("guest: Register: operation %q has neither Execute nor ExecuteWithKey", op.Name))
		}
		if _, dup := registry[op.Name]; dup {
			panic(fmt.Sprintf("guest: Register: operation %q registered twice", op.Name))
		}
		registry[op.Name] = op
		order = append(order, op.Name)
	}
}

// Describe returns the module's self-description, in registration order.
func Describe() abi.Description {
	d := abi.Description{ABI: abi.Version, Operations: make([]abi.OperationInfo, 0, len(order))}
	for _, name := range order {
		op := registry[name]
		d.Operations = append(d.Operations, abi.OperationInfo{
			Name:           name,
			Execute:        op.Execute != nil,
			ExecuteWithKey: op.ExecuteWithKey != nil,
			Reconcile:      op.Reconcile != nil,
		})
	}
	return d
}

// Host is what a [Call] needs from its environment. In a wasip1 build it is
// the connhost host functions; natively, tests supply their own through
// [Invoke].
type Host interface {
	ExecutionID() string
	Config(key string) (value string, status int32)
	HTTP(req abi.HTTPRequest) abi.HTTPResponse
	Log(level int32, msg string)
	Now() time.Time
	// Sleep sleeps for d or until the call's deadline; it reports whether
	// the full duration elapsed.
	Sleep(d time.Duration) bool
}

// Call is one invocation of an operation. It is valid only during the
// handler that received it.
type Call struct {
	// Operation is the operation's name.
	Operation string
	// Key is the call's idempotency key ("ck_…") in ExecuteWithKey and
	// Reconcile handlers, empty in Execute. It is the same on every attempt
	// of one call — retries, recovery's re-dispatches, and its Reconcile —
	// and another for every other call; it is scoped to the namespace and
	// connector. This, not ExecutionID, is what the provider keeps and
	// what a lookup finds the call by.
	Key  string
	host Host
}

// ErrConfigNotDeclared reports a config key the manifest does not declare;
// ErrConfigNotSet a declared key with no configured value.
var (
	ErrConfigNotDeclared = errors.New("guest: config key not declared in the manifest")
	ErrConfigNotSet      = errors.New("guest: config key has no value")
)

// ExecutionID returns the host's execution id for this call ("ex_…"): the
// id the API, the audit trail and the logs name it by, the same in every
// handler of the call. It is not the idempotency key (see Key): tag the
// provider's object with Key, and use ExecutionID to tell people which
// call it was.
func (c *Call) ExecutionID() string { return c.host.ExecutionID() }

// Config returns a configuration value the manifest declares.
func (c *Call) Config(key string) (string, error) {
	v, st := c.host.Config(key)
	switch st {
	case 0:
		return v, nil
	case abi.StatusNotDeclared:
		return "", fmt.Errorf("%w: %q", ErrConfigNotDeclared, key)
	default:
		return "", fmt.Errorf("%w: %q", ErrConfigNotSet, key)
	}
}

// HTTP performs a request through the host's http capability. A response
// with Err != abi.HTTPOK was not completed (denied, timeout, network error,
// too large); check it before reading Status.
func (c *Call) HTTP(req abi.HTTPRequest) abi.HTTPResponse { return c.host.HTTP(req) }

// Debug, Info, Warn and Error write to the host's structured log, tagged
// with connector, operation and execution id.
func (c *Call) Debug(msg string) { c.host.Log(abi.LevelDebug, msg) }

// Info logs at info level; see [Call.Debug].
func (c *Call) Info(msg string) { c.host.Log(abi.LevelInfo, msg) }

// Warn logs at warn level; see [Call.Debug].
func (c *Call) Warn(msg string) { c.host.Log(abi.LevelWarn, msg) }

// Error logs at error level; see [Call.Debug].
func (c *Call) Error(msg string) { c.host.Log(abi.LevelError, msg) }

// Now returns the host's wall-clock time.
func (c *Call) Now() time.Time { return c.host.Now() }

// Sleep sleeps for d, but never past the call's deadline; it reports whether
// the full duration elapsed.
func (c *Call) Sleep(d time.Duration) bool { return c.host.Sleep(d) }

// OK returns a successful outcome whose result is result marshalled as JSON
// (a []byte or json.RawMessage is taken as already-encoded JSON). receipt
// names the external object, if any. A result that cannot be marshalled
// panics (the instance traps): the effect happened, so an error outcome
// would be a lie, and the host treats the trap as an uncertain outcome.
func OK(result any, receipt string) abi.Outcome {
	return withResult(abi.OutcomeOK, result, receipt)
}

// Applied is reconcile's answer when the original call took effect.
func Applied(result any, receipt string) abi.Outcome {
	return withResult(abi.OutcomeApplied, result, receipt)
}

func withResult(kind abi.OutcomeKind, result any, receipt string) abi.Outcome {
	var b []byte
	switch r := result.(type) {
	case nil:
	case []byte:
		b = r
	case json.RawMessage:
		b = r
	default:
		var err error
		if b, err = json.Marshal(r); err != nil {
			// The effect already happened: reporting an error would tell the
			// host it did not. Trap instead, so the host treats the call as
			// uncertain and applies the declared recovery policy.
			panic("guest: marshal result after the effect: " + err.Error())
		}
	}
	return abi.Outcome{Kind: kind, Result: b, Receipt: receipt}
}

// Retryable reports a failure of this attempt that did not take effect and
// may be retried: a rate limit or refusal before the provider acted, a
// request that was never sent. When the request may have been acted on
// (its answer was lost, timed out, or leaves the result open), return
// [Uncertain] instead: the host trusts Retryable to mean "nothing happened"
// and may end the execution failed once attempts run out.
func Retryable(format string, a ...any) abi.Outcome {
	return abi.Outcome{Kind: abi.OutcomeRetryable, Error: fmt.Sprintf(format, a...)}
}

// Uncertain reports an attempt that may have taken effect: the request was
// sent and its answer was lost, timed out, or does not settle the result
// (e.g. a provider 5xx to a POST). The host then applies the operation's
// recovery policy, as after a crash: re-dispatch with the same key
// (idempotent-retry), reconcile, or ask an operator (manual).
func Uncertain(format string, a ...any) abi.Outcome {
	return abi.Outcome{Kind: abi.OutcomeUncertain, Error: fmt.Sprintf(format, a...)}
}

// InProgress reports that the provider is still processing an earlier
// request with this call's idempotency key (e.g. Stripe's 409
// idempotency_key_in_use). The host waits and asks again with the same key;
// it never turns this answer into a failure.
func InProgress(format string, a ...any) abi.Outcome {
	return abi.Outcome{Kind: abi.OutcomeInProgress, Error: fmt.Sprintf(format, a...)}
}

// Permanent reports a failure that did not take effect and will not succeed
// on retry.
func Permanent(format string, a ...any) abi.Outcome {
	return abi.Outcome{Kind: abi.OutcomePermanent, Error: fmt.Sprintf(format, a...)}
}

// NotApplied is reconcile's answer when there is authoritative evidence the
// original call had no effect.
func NotApplied(format string, a ...any) abi.Outcome {
	return abi.Outcome{Kind: abi.OutcomeNotApplied, Error: fmt.Sprintf(format, a...)}
}

// Unknown is reconcile's answer when it cannot decide.
func Unknown(format string, a ...any) abi.Outcome {
	return abi.Outcome{Kind: abi.OutcomeUnknown, Error: fmt.Sprintf(format, a...)}
}

// DecodeArgs decodes a call's JSON arguments into v strictly: unknown
// fields and trailing data are errors. A strict decode is what keeps the
// model from smuggling data a connector would silently ignore (an
// "idempotency_key", say): the execution identity comes only from the
// Call, never from the arguments. [ReadArgs] does the same without
// reflection, at a fraction of the cost in wasm.
func DecodeArgs(args []byte, v any) error { return abi.UnmarshalStrict(args, v) }

// ReadArgs reads a call's JSON arguments, an object, strictly and without
// reflection: fn is called for each member and reads it through v. A
// member fn leaves unread is an error (codec.ErrUnknownField), as are a
// name given twice, text encoding/json would alter (invalid UTF-8, unpaired
// surrogate escapes) and anything after the object. It keeps DecodeArgs'
// guarantees; unlike DecodeArgs it matches member names exactly, never
// case-insensitively.
func ReadArgs(args []byte, fn codec.MemberFunc) error { return codec.DecodeObjectStrict(args, fn) }

// Invoke runs the registered handler for export (one of abi.ExportExecute,
// abi.ExportExecuteWithKey, abi.ExportReconcile) against h. The wasip1
// exports use it with the real host functions; connector tests can call it
// natively with a fake Host.
func Invoke(h Host, export, operation, key string, args []byte) abi.Outcome {
	// reconcile must answer with a reconcile kind: a module that cannot
	// reconcile does not know, it has not proven "not applied".
	refuse := Permanent
	if export == abi.ExportReconcile {
		refuse = Unknown
	}
	op, ok := registry[operation]
	if !ok {
		return refuse("guest: unknown operation %q", operation)
	}
	var fn Handler
	switch export {
	case abi.ExportExecute:
		fn = op.Execute
	case abi.ExportExecuteWithKey:
		fn = op.ExecuteWithKey
	case abi.ExportReconcile:
		fn = op.Reconcile
	}
	if fn == nil {
		return refuse("guest: operation %q does not implement %s", operation, export)
	}
	return fn(&Call{Operation: operation, Key: key, host: h}, args)
}
