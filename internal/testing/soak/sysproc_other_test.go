//go:build unix && !linux

package soak

import "syscall"

// sysProcAttr puts a child in a process group of its own, so a kill
// reaches everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
