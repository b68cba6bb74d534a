package front

import (
	"io"

	"golang.org/x/sys/unix"

	"shoal/internal/base/rawio"
)

// The keep-alive loop. A plain TCP client connection on the relay (or
// redirect) path serves its requests after the first inside one
// rawio.Conn.Loop, that is one RawConn.Read: the callback reads the
// socket raw, parses, serves each complete request and returns false only
// to wait for more bytes. Go's poller resets a socket's read readiness at
// the start of every Read, so a connection that called Read again for each
// request had to try the socket once more before it could wait: after
// each response, a read that answered EAGAIN. Within one Read the readiness
// is kept from one wait to the next, and the loop waits as soon as its
// last read came back short (the socket was drained then; bytes arriving
// later make the poller report it readable again), as an event loop does.
//
// Inside the loop nothing may read the client connection through net.Conn
// (its read lock is held) or close it (Close would wait for the loop): a
// request with a body, whose body is read from the connection, goes back
// to the ordinary loop (serve), and Server.Close shuts a looping
// connection down instead of closing it (shutLoop).

// loopEnd is how a keep-alive loop ended.
type loopEnd uint8

const (
	loopClose    loopEnd = iota // the connection closes
	loopNormal                  // serve's ordinary loop goes on: a request the loop leaves to it is buffered, or the wait failed
	loopDetached                // a path took the connection over
)

// loopState is the keep-alive loop's state, reused across connections.
type loopState struct {
	step    func(fd uintptr) bool // loopStep bound once, so a loop allocates nothing
	started bool                  // a head has begun (HeaderTimeout runs)
	end     loopEnd
}

// loopable reports whether cc's requests may be served in the keep-alive
// loop: a plain TCP connection whose requests go by relay or redirect,
// which never read the client connection for a request without a body.
func (cc *clientConn) loopable() bool {
	s := cc.s
	if !cc.io.Active() || cc.tls || s.cfg.Choose != nil {
		return false
	}
	switch s.cfg.Path.(type) {
	case relayPath, redirectPath:
		return true
	}
	return false
}

// serveLoop serves cc's requests in the keep-alive loop until the
// connection ends, a path detaches it, or a request or an error needs the
// ordinary loop. It is entered after a request was served, never while
// shutting down: Server.Close sets closing before it looks at looping.
func (cc *clientConn) serveLoop() loopEnd {
	cc.looping.Store(true)
	defer cc.looping.Store(false)
	if cc.s.closing.Load() {
		return loopNormal
	}
	lp := &cc.lp
	if lp.step == nil {
		lp.step = cc.loopStep
	}
	lp.end = loopNormal
	lp.started = cc.armHead(false)
	if err := cc.io.Loop(lp.step); err != nil {
		// A deadline or a close ended the wait: readHead finds out
		// which, as it does for a read (a buffered head first, then 408
		// for a begun one).
		return loopNormal
	}
	return lp.end
}

// loopStep is serveLoop's callback: called at once, then each time the
// poller reports the socket readable. Each time, the socket is read before
// the loop may wait again; after that, only a read that filled the buffer
// (the socket may hold more) is followed by another before the wait.
func (cc *clientConn) loopStep(fd uintptr) bool {
	lp := &cc.lp
	owed := true
	for {
		switch cc.parseHead(false, &lp.started) {
		case headEnd:
			lp.end = loopClose
			return true
		case headReady:
			if cc.req.HasBody() {
				lp.end = loopNormal // its body is read through net.Conn
				return true
			}
			if !cc.loopServe() {
				return true
			}
			lp.started = cc.armHead(false)
			continue
		}
		cc.markWait()
		if !owed {
			return false
		}
		n, full, err := cc.readRaw(int(fd))
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			owed = false
		case err != nil:
			lp.end = loopClose
			return true
		default:
			cc.s.ctr.bytesIn.Add(uint64(n))
			owed = full
		}
	}
}

// loopServe serves the parsed request and reports whether the loop goes
// on, setting lp.end when it does not.
func (cc *clientConn) loopServe() bool {
	res := cc.handle()
	switch {
	case res.Detached:
		cc.lp.end = loopDetached
	case res.Close:
		cc.lp.end = loopClose
	default:
		return true
	}
	return false
}

// readRaw reads fd once into cc.in's free space, compacting first as
// inbuf.fill does; full reports that the read filled the space (the socket
// may hold more). The end of the stream is io.EOF.
func (cc *clientConn) readRaw(fd int) (n int, full bool, err error) {
	ib := &cc.in
	if ib.w == len(ib.b) {
		if ib.r == 0 {
			return 0, false, errBufFull
		}
		ib.w = copy(ib.b, ib.b[ib.r:ib.w])
		ib.r = 0
	}
	space := len(ib.b) - ib.w
	n, err = rawio.Read(fd, ib.b[ib.w:])
	if err != nil {
		return 0, false, err
	}
	if n == 0 {
		return 0, false, io.EOF
	}
	ib.w += n
	return n, n == space, nil
}

// shutLoop ends a connection serving in the keep-alive loop without
// waiting for it (Close would wait until the loop's callback returns,
// which may be a node's answer away): shutdown(2) wakes its wait and fails
// its writes, and its goroutine closes it. It reports false when cc is not
// looping (the caller closes it).
func (cc *clientConn) shutLoop() bool {
	return cc.looping.Load() && cc.io.Shutdown() == nil
}
