// Package fleet holds connhost's fleet kill test: three `connhost serve`
// processes (nodes) share one ledger on PostgreSQL and the provider
// emulators of `connhost sandbox` (a process of its own). Workers send
// approval-gated payments and emails through all three, as agent runtimes
// would, each step of a call to a random node (the intent through one,
// the approval through another, the dispatch through a third), while the
// test SIGKILLs nodes mid-call, lets nodes kill themselves at crash
// points, and pauses one (SIGSTOP) past its lease before resuming it. The
// live nodes take the dead nodes' calls over once their lease has expired.
// Then every call is sent again through another node, and the test checks
// that no provider effect was duplicated, no execution was lost, every
// taken-over call's history names the node that recovered it, and no node
// wrote anything after its calls were taken over.
//
// TestFleetPausedNode is the paused node on its own, made deterministic: the
// provider holds the node's call while it is paused, and another call's
// dispatch waits for it; after the takeover and its resume, its former
// lease epoch must record nothing.
//
// The package has no non-test code. Run it with
//
//	go test ./devkit/testing/fleet/ -v
//
// It needs PostgreSQL (see devkit/testing/testenv); `go test -short`
// skips it.
package fleet
