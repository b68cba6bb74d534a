package loadgen

import (
	"errors"
	"net"

	"shoal/internal/base/rawio"
)

// plainConn is the raw-syscall I/O of a plain TCP connection (TLS keeps
// net.Conn's own calls). Through net.Conn a keep-alive request costs three
// bookkept system calls: the write, a read that answers EAGAIN (the server
// cannot have answered yet) and the read after the poller's wake-up; the
// bookkeeping (entersyscall/exitsyscall) also wakes the runtime's sysmon
// thread. plainConn writes the request and waits for the answer inside one
// syscall.RawConn.Read, as the front's node connections do: Go's poller
// forgets readiness only at the start of a RawConn.Read, and nothing can
// arrive for a request not yet written, so the first read waits for
// readiness instead of answering EAGAIN; a server that closed the
// connection meanwhile answers the write with a reset, which wakes the
// wait. The system calls are raw (internal/base/rawio): they run on a
// non-blocking socket and cannot block.
//
// It is the respReader's io.Reader: the first Read after arm sends the
// request and reads the first bytes of the answer; later Reads (a long
// body, a head split over segments) read raw, waiting in the poller only
// after EAGAIN. Deadlines set from another goroutine (the watchdog's kill,
// the end of the run) wake every wait. Nothing allocates per request: step
// is exchangeStep bound once.
type plainConn struct {
	io   rawio.Conn
	step func(fd uintptr) bool
	// req is the armed request, nil once sent; wn its bytes written.
	req []byte
	wn  int
	// sent reports that the exchange's write was tried; rb, rn and rerr
	// are its read's buffer and result.
	sent bool
	rb   []byte
	rn   int
	rerr error
}

// bind makes c serve nc when it is a plain TCP connection and reports
// whether it does.
func (c *plainConn) bind(nc net.Conn) bool {
	c.req = nil
	if c.step == nil {
		c.step = c.exchangeStep
	}
	return c.io.Bind(nc)
}

// unbind forgets the connection (it is being closed).
func (c *plainConn) unbind() { c.io.Unbind(); c.req = nil }

// active reports whether c is bound to a connection.
func (c *plainConn) active() bool { return c.io.Active() }

// arm makes the next Read send req before it reads.
func (c *plainConn) arm(req []byte) { c.req = req }

// Read sends the armed request and reads the start of its answer, or,
// with none armed, reads once, as net.Conn's Read does.
func (c *plainConn) Read(p []byte) (int, error) {
	if c.req == nil {
		return c.io.Read(p)
	}
	return c.exchange(p)
}

// errArmed is discard called before the armed request went out: nothing
// can have arrived for it, so dropping bytes would be a bug.
var errArmed = errors.New("loadgen: discard before the request was sent")

// discard drops up to n received bytes in the socket (rawio's
// TryDiscard), waiting in the poller while it is empty.
func (c *plainConn) discard(n int) (int, error) {
	if c.req != nil {
		return 0, errArmed
	}
	return c.io.Discard(n)
}

// exchange writes the armed request and reads the first bytes of its
// answer into p within one RawConn.Read.
func (c *plainConn) exchange(p []byte) (int, error) {
	req := c.req
	c.wn, c.sent, c.rb, c.rn, c.rerr = 0, false, p, 0, nil
	err := c.io.Loop(c.step)
	c.req, c.rb = nil, nil
	switch {
	case err != nil: // a deadline or a close before the step read
		return 0, err
	case c.rerr == nil && c.wn < len(req):
		return c.finish(req[c.wn:], p)
	}
	return c.rn, c.rerr
}

// finish sends the rest of a request the socket did not take whole (a
// send buffer full of a long URL) the ordinary way, a write that waits in
// the poller, then reads.
func (c *plainConn) finish(rest, p []byte) (int, error) {
	if _, err := c.io.Write(rest, nil); err != nil {
		return 0, err
	}
	return c.io.Read(p)
}

// exchangeStep is exchange's RawConn.Read callback: its first call writes
// the request and returns false to wait for the answer (true if the
// write failed or stopped short); later calls, after the poller reported
// the socket readable, read.
func (c *plainConn) exchangeStep(fd uintptr) bool {
	if !c.sent {
		c.sent = true
		n, again, err := rawio.TryWrite(int(fd), c.req)
		c.wn, c.rerr = n, err
		return again || err != nil
	}
	n, again, err := rawio.TryRead(int(fd), c.rb)
	if again {
		return false
	}
	c.rn, c.rerr = n, err
	return true
}
