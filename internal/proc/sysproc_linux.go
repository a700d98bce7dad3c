package proc

import "syscall"

// sysProcAttr puts a child in a process group of its own and, when
// dieWithParent, has the kernel SIGKILL it when its parent dies.
func sysProcAttr(dieWithParent bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if dieWithParent {
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}
