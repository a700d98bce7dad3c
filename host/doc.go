// Package host is connhost's executor: it runs tool calls of agent
// runtimes through connectors (WebAssembly modules) durably, and after a
// crash it decides from the ledger and each operation's declared recovery
// policy what to do with every call whose outcome is unknown.
//
// An agent runtime opens an [Executor] with [Open] and sends each model
// tool call as a [ToolCall] to [Executor.Execute]. The answer is a
// [Result] whose Status is what the runtime branches on; [Result.Err]
// turns the statuses that need a human into typed errors. Reviewers
// decide approval requests ([Executor.Approve], [Executor.Reject]),
// operators settle calls recovery could not decide ([Executor.Resolve]).
//
// On a ledger shared by several nodes (a ledger.Fleet: ledger/pgledger)
// the executor is one node of a fleet, with a lease it renews, writes
// fenced by that lease, and the takeover of the calls of nodes whose lease
// expired (fleet.go).
//
// The recovery decision table is one pure function (decide.go, its cases
// in testdata/decide); the state grammar is ledger/grammar.go, and
// docs/design.md explains the crash points. The wasm runtime the executor
// calls connectors through lives in internal/wasmrt; the ledger in package
// ledger.
package host
