// Package wasmrt is the WebAssembly runtime behind the executor: it loads
// a connector's module (wazero, one runtime per connector, a shared
// compilation cache), checks it against its manifest (pinned digest, ABI
// version, exports), keeps a pool of instances, and calls an operation's
// export with deadline enforcement. The host functions a guest may call
// (config, http with the manifest's allowlist, log, clock, take) are one
// file each (hostfn_*.go).
//
// A [Connector] is safe for concurrent use: each call takes its own
// instance. An instance that trapped, timed out or answered garbage is
// discarded, never reused. Errors of a call are *[CallError] values whose
// MayHaveActed says whether the guest was entered (and so whether the
// call may have had an effect).
//
// The package knows nothing of the ledger or of recovery policies: the
// executor (package host) decides what a call's answer means.
package wasmrt
