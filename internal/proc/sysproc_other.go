//go:build !linux

package proc

import "syscall"

// sysProcAttr puts a child in a process group of its own; a child cannot
// be tied to its parent's death here.
func sysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
