package front

import "syscall"

// deferAccept sets TCP_DEFER_ACCEPT (1 s) on a listening socket (see Listen).
func deferAccept(fd int) {
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, 1)
}

// undeferAccept clears TCP_DEFER_ACCEPT again (TLSListener).
func undeferAccept(fd int) {
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, 0)
}
