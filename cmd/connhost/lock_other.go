//go:build !unix

package main

// processAlive cannot tell on this platform; the caller then asks the
// server's URL.
func processAlive(pid int) bool { return true }

// isLockConflict cannot tell on this platform.
func isLockConflict(err error) bool { return false }
