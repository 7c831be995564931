package s3test

import "syscall"

// sysProcAttr makes the kernel kill the server when the test process dies,
// so a test binary that never calls Stop (no Main) leaks no server.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
