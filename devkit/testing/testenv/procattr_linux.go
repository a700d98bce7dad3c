package testenv

import "syscall"

const postgresSupported = true

// procAttr runs a PostgreSQL program as the cluster's user, and with
// server set, has the kernel send it SIGQUIT (PostgreSQL's immediate
// shutdown) if this process dies without stopping it. Go sets the parent
// death signal after the credentials, whose change would clear it.
func (p *Postgres) procAttr(server bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if p.asUser {
		a.Credential = &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid)}
	}
	if server {
		a.Pdeathsig = syscall.SIGQUIT
	}
	return a
}
