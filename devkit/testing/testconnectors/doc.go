// Package testconnectors holds connector modules used as test fixtures:
// adversarial ones for the host runtime tests, a fault-injecting one for the
// executor, and deliberately broken ones for the crash matrix. Each subdirectory is a main package
// built to wasip1 with internal/wasmbuild; none of them is a real connector.
//
//   - noop: echo operations for benchmarks and happy-path calls.
//   - trap: operations that trap, panic, loop, sleep, exhaust memory,
//     return too much output or exit.
//   - badenvelope: hand-written exports (no guest SDK) returning malformed
//     envelopes and out-of-bounds pointers.
//   - httpprobe: operations that exercise the host functions (http, config,
//     log, execution id, sleep).
//   - noreconcile: implements execute only, so a manifest that declares
//     idempotent-retry or reconcile refuses to load.
//   - badversion: reports ABI version 2.
//   - logflood: logs, and prints to stdout and stderr, in loops, so the
//     host's log budget and stream capture can be tested.
//   - effect: performs a countable effect on a provider the test controls,
//     so executor tests can inject every fault (devkit/testing/testconnectors/effect).
//   - brokenkey: declares idempotent-retry but sends a fresh key on every
//     attempt; connhost crashtest must catch it.
//   - brokenreconcile: its reconcile always answers not_applied; connhost
//     crashtest must catch it.
//   - pocketbase: a connector for PocketBase's records API, a real
//     provider without idempotency keys: it makes a record once by a
//     unique field and reconciles by it; connhost crashtest proves it
//     against a real PocketBase through its probe config.
package testconnectors
