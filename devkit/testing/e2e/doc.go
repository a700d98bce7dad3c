// Package e2e holds the end-to-end tests of the shipped connectors: the
// real wasm modules built from plugins/ (internal/wasmbuild), loaded by the
// host (host.Runtime) from the shipped manifests, calling the providers
// through the host's http capability — the Stripe emulator of
// devkit/sandbox for payments and a real Mailpit (devkit/testing/testenv) for
// email. Effects are counted on the provider side, never taken from the
// connector's answer.
//
// The package has no exported API; everything lives in its tests and
// benchmarks (bench_test.go compares each end-to-end call with the same
// provider request made directly with net/http).
package e2e
