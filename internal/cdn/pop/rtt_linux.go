package pop

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// tcpRTT returns the kernel's smoothed RTT of a TCP connection (TCP_INFO
// tcpi_rtt): a link delay sample that costs no traffic.
func tcpRTT(c net.Conn) (time.Duration, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var rtt time.Duration
	var ierr error
	err = rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if ierr == nil {
			rtt = time.Duration(info.Rtt) * time.Microsecond
		}
	})
	if err != nil || ierr != nil || rtt <= 0 {
		return 0, false
	}
	return rtt, true
}

// quickAck turns delayed ACKs off until the next time the kernel re-arms
// them (TCP_QUICKACK is not sticky, so it is set after every read).
func quickAck(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	if rc, err := tc.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1) })
	}
}
