package main

import (
	"os"
	"runtime"
)

// spareProcs is how many Ps connhost runs beyond the Go runtime's default
// (the CPUs it may use), unless the GOMAXPROCS environment variable sets
// the number.
//
// Every ledger commit ends in an fsync, a blocking system call made by
// Pebble's WAL writer, and flushes and compactions make more. A P whose
// goroutine is in a system call stays with it until the runtime's monitor
// retakes it, after 20 µs at the earliest, so on a small machine a large
// share of one CPU sits unused while callers wait to run. With two spare
// Ps the executor ran 15–40% more executions per second at 64 callers on
// a 2-CPU machine (see RATIONALE.md, "Why two spare Ps in the `connhost`
// binary?"). When no P is blocked the operating system shares the CPUs
// among the extra threads; the figure above includes that cost.
const spareProcs = 2

// procs returns the GOMAXPROCS connhost runs with, given whether the
// environment sets it and the runtime's current value.
func procs(envSet bool, current int) int {
	if envSet {
		return current
	}
	return current + spareProcs
}

// raiseGOMAXPROCS applies procs to this process.
func raiseGOMAXPROCS() {
	_, set := os.LookupEnv("GOMAXPROCS")
	runtime.GOMAXPROCS(procs(set, runtime.GOMAXPROCS(0)))
}
