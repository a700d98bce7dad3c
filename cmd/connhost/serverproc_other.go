//go:build !linux

package main

// serverProcessChecks says, for messages, what checkServerProcess checks
// on this platform.
const serverProcessChecks = "a live process"

// checkServerProcess cannot inspect another process on this platform: the
// pid is only checked to be alive (processAlive), and the server proof
// (POST /v1/auth/proof) is what keeps a token from an impostor.
func checkServerProcess(pid int, rawURL string) error { return nil }
