package up

import "syscall"

// childAttr puts a child in its own process group and has the kernel send
// it SIGTERM if this process dies (see spawn).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
}
