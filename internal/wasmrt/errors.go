package wasmrt

import (
	"errors"
	"fmt"
)

// Sentinel errors of the wasm runtime. Load errors wrap them with the
// connector's name; call errors are *CallError values that unwrap to them.
var (
	// ErrDigestMismatch: the module's sha256 differs from the digest pinned
	// in the manifest. The module is not loaded. See *DigestMismatchError.
	ErrDigestMismatch = errors.New("wasmrt: module digest does not match the pinned digest")
	// ErrUnpinned: the manifest pins no module digest and the load did not
	// allow unpinned modules.
	ErrUnpinned = errors.New("wasmrt: module digest not pinned")
	// ErrABIVersion: the module (or the manifest) speaks another ABI version
	// than this host.
	ErrABIVersion = errors.New("wasmrt: abi version mismatch")
	// ErrMissingExport: the module lacks an export the ABI or the manifest
	// requires (e.g. recovery idempotent-retry without execute_with_key).
	ErrMissingExport = errors.New("wasmrt: missing export")
	// ErrMissingOperation: the manifest declares an operation the module
	// does not implement.
	ErrMissingOperation = errors.New("wasmrt: operation not implemented by the module")
	// ErrBadModule: the module does not compile, instantiate or describe
	// itself correctly.
	ErrBadModule = errors.New("wasmrt: bad module")
	// ErrBadCapability: a capabilities.http entry is not scheme://host:port.
	ErrBadCapability = errors.New("wasmrt: bad capability")
	// ErrConnectorClosed: the connector (or its runtime) was closed.
	ErrConnectorClosed = errors.New("wasmrt: connector closed")
	// ErrBusy: every instance of the connector stayed taken by other calls
	// for as long as Reserve was to wait. Nothing was called.
	ErrBusy = errors.New("wasmrt: every instance of the connector is busy")

	// ErrTrap: the guest trapped, panicked or exited during a call.
	ErrTrap = errors.New("wasmrt: guest trapped")
	// ErrTimeout: the call ran past its deadline (Limits.Timeout or the
	// caller's deadline) and was cut.
	ErrTimeout = errors.New("wasmrt: call deadline exceeded")
	// ErrCanceled: the caller canceled the call's context.
	ErrCanceled = errors.New("wasmrt: call canceled")
	// ErrMemoryLimit: the guest ran out of memory under Limits.MemoryMiB.
	ErrMemoryLimit = errors.New("wasmrt: guest memory limit exceeded")
	// ErrOutputTooLarge: the outcome envelope is larger than
	// Limits.MaxOutputKiB.
	ErrOutputTooLarge = errors.New("wasmrt: outcome larger than the output cap")
	// ErrBadEnvelope: the outcome does not decode, lies outside guest
	// memory, or has a kind that does not fit the export.
	ErrBadEnvelope = errors.New("wasmrt: malformed outcome envelope")
	// ErrUnknownOperation: the operation is not in the manifest or not
	// implemented by the module. Nothing was called.
	ErrUnknownOperation = errors.New("wasmrt: unknown operation")
	// ErrUnsupportedExport: the operation does not implement the requested
	// export (e.g. reconcile on an operation without Reconcile). Nothing was
	// called.
	ErrUnsupportedExport = errors.New("wasmrt: operation does not support the export")
)

// DigestMismatchError reports a module whose sha256 differs from the
// digest pinned in its manifest. It unwraps to [ErrDigestMismatch].
type DigestMismatchError struct {
	Connector string
	Module    string // path of the module file
	Pinned    string // hex sha256 from the manifest
	Actual    string // hex sha256 of the module bytes
}

func (e *DigestMismatchError) Error() string {
	return fmt.Sprintf("connector[%s]: %v: manifest pins sha256 %s, module %s has %s",
		e.Connector, ErrDigestMismatch, e.Pinned, e.Module, e.Actual)
}

// Unwrap returns [ErrDigestMismatch].
func (e *DigestMismatchError) Unwrap() error { return ErrDigestMismatch }

// CallErrorKind classifies a failed connector call.
type CallErrorKind uint8

// Call error kinds. Each unwraps to the sentinel of the same name.
const (
	KindTrap              CallErrorKind = iota + 1 // ErrTrap
	KindTimeout                                    // ErrTimeout
	KindCanceled                                   // ErrCanceled
	KindMemoryLimit                                // ErrMemoryLimit
	KindOutputTooLarge                             // ErrOutputTooLarge
	KindBadEnvelope                                // ErrBadEnvelope
	KindUnknownOperation                           // ErrUnknownOperation
	KindUnsupportedExport                          // ErrUnsupportedExport
	KindClosed                                     // ErrConnectorClosed
	KindBusy                                       // ErrBusy
)

var kindInfo = [...]struct {
	name string
	err  error
}{
	KindTrap:              {"trap", ErrTrap},
	KindTimeout:           {"timeout", ErrTimeout},
	KindCanceled:          {"canceled", ErrCanceled},
	KindMemoryLimit:       {"memory_limit", ErrMemoryLimit},
	KindOutputTooLarge:    {"output_too_large", ErrOutputTooLarge},
	KindBadEnvelope:       {"bad_envelope", ErrBadEnvelope},
	KindUnknownOperation:  {"unknown_operation", ErrUnknownOperation},
	KindUnsupportedExport: {"unsupported_export", ErrUnsupportedExport},
	KindClosed:            {"closed", ErrConnectorClosed},
	KindBusy:              {"busy", ErrBusy},
}

// String returns the kind's name ("trap", "timeout", …).
func (k CallErrorKind) String() string {
	if int(k) < len(kindInfo) && kindInfo[k].err != nil {
		return kindInfo[k].name
	}
	return fmt.Sprintf("call_error(%d)", uint8(k))
}

// Sentinel returns the sentinel error the kind unwraps to (nil for an
// unknown kind).
func (k CallErrorKind) Sentinel() error {
	if int(k) < len(kindInfo) {
		return kindInfo[k].err
	}
	return nil
}

// CallError is the error of a connector call that did not produce a valid
// outcome. errors.Is matches it against the sentinel of its Kind and against
// Err; errors.As extracts it for the connector, operation and export.
type CallError struct {
	Connector string
	Operation string
	Export    string
	Kind      CallErrorKind
	// Err describes what happened (a wazero error, a decode error, …).
	Err error
	// entered reports that the guest's call export was entered.
	entered bool
}

func (e *CallError) Error() string {
	return fmt.Sprintf("connector[%s] op[%s] export[%s]: %s: %v", e.Connector, e.Operation, e.Export, e.Kind, e.Err)
}

// Unwrap returns the kind's sentinel and the underlying error.
func (e *CallError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if s := e.Kind.Sentinel(); s != nil {
		errs = append(errs, s)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// MayHaveActed reports whether the connector might have performed the
// operation's effect before the call failed. It is false only for errors
// raised before the guest's call export was entered (unknown operation,
// unsupported export, no instance available before the deadline, a failure
// while writing the input); the host denies the http capability outside
// the call export, so nothing the guest did before that can have acted.
// See RATIONALE.md, "Why are errors inside the connector uncertain, not
// failures?".
func (e *CallError) MayHaveActed() bool { return e.entered }
