package front

import (
	"context"
	"fmt"
	"net"
	"syscall"
)

// Listen opens the front's client-facing TCP listener, tuned for a front
// whose per-connection cost matters (the handoff paths, where accepting is
// most of what the front does; measured in bench/handoff-cpu.sh):
//
//   - TCP_DEFER_ACCEPT (1 s): the kernel completes accept only once the
//     client's first bytes have arrived, so the request head is read in the
//     same wakeup instead of parking the goroutine on an empty socket —
//     nginx's `listen … deferred`, HAProxy's `defer-accept`. It cut the
//     front's CPU per Connection: close request by about a third here.
//   - no TCP keep-alive probes on client connections (Go enables them by
//     default, four setsockopt calls per accept); nginx and HAProxy leave
//     them off too, and HeaderTimeout/IdleTimeout bound idle clients.
//
// Where the option is unavailable the listener works without it.
func Listen(addr string) (net.Listener, error) {
	lc := net.ListenConfig{
		KeepAlive: -1,
		Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) {
				deferAccept(int(fd))
			})
		},
	}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("front: listen %s: %w", addr, err)
	}
	return ln, nil
}
