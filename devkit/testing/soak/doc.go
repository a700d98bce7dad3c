// Package soak holds connhost's bounded kill-storm soak (issue #5): a test
// that runs the real `connhost dev` binary against the provider emulators of
// `connhost sandbox` (in a process of its own, so the providers outlive every
// host kill), drives calls through the HTTP API from concurrent workers as
// an agent runtime would, SIGKILLs and restarts the host at random moments,
// and then checks the global invariants: no call lost or stuck, no provider
// effect duplicated beyond what each operation's recovery policy allows, the
// ledger and the providers agree on every succeeded call, and re-issuing a
// call returns the result it returned before.
//
// The package has no non-test code. Run it with
//
//	go test ./devkit/testing/soak/ -run TestKillStorm -v [-soak.seed=N]
//
// `go test -short` skips it. See RATIONALE.md, "Kill-storm soak".
package soak

// The test, one idea per file:
//
//   - soak_test.go: TestKillStorm from setup to verdict, the calls it
//     issues and the figures it reports;
//   - storm_test.go: the workers that issue calls and the killer that
//     SIGKILLs and restarts the host, with provider latency and holds;
//   - drive_test.go: the runtime, driving one call to a final status and
//     checking every answer it is given;
//   - operator_test.go: the operator's pass over recovery_required calls;
//   - evidence_test.go: what the providers hold and the audit trails;
//   - checks_test.go: the end-state checks, and the tests proving they fail;
//   - api_test.go: the HTTP API client; proc_test.go: the processes.
