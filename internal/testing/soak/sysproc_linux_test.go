//go:build linux

package soak

import "syscall"

// sysProcAttr puts a child in a process group of its own (so a kill
// reaches everything it started) and has the kernel SIGKILL it if the test
// binary dies without running its cleanups (a -timeout panic, a kill).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
