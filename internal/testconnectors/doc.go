// Package testconnectors holds adversarial connector modules used as test
// fixtures by the host runtime tests. Each subdirectory is a main package
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
package testconnectors
