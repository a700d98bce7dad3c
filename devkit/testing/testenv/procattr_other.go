//go:build !linux

package testenv

import "syscall"

// postgresSupported is false: the test clusters rely on Linux's parent
// death signal, so that a killed test binary never leaves a server behind.
const postgresSupported = false

func (p *Postgres) procAttr(bool) *syscall.SysProcAttr { return nil }
