package main

import "github.com/connhost/connhost/abi/guest/guesttest"

// The shared native test host (real HTTP, allowlist, timeouts, size caps).
type testHost = guesttest.Host

var (
	newTestHost = guesttest.New
	invoke      = guesttest.Invoke
	wantKind    = guesttest.WantKind
)
