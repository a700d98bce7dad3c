//go:build unix

package main

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with that pid exists (signal 0
// checks without sending anything; EPERM means it exists but is not
// ours).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// isLockConflict reports whether err is the ledger's lock refusing this
// process because another one holds it (Pebble's fcntl F_SETLK answers
// EAGAIN: "resource temporarily unavailable").
func isLockConflict(err error) bool {
	return errors.Is(err, syscall.EAGAIN)
}
