//go:build linux

package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/base/uring"
)

// The uring engine (Config.Engine "uring") runs every connection of a
// closed-loop run from one goroutine on one io_uring: each request's send
// is linked to the receive of its answer, the remainder of a body is
// dropped in the socket by a MSG_TRUNC receive, and one io_uring_enter
// submits all that became ready and waits for the next completions. The
// goroutines engine pays a system call per send and per receive, and a
// wake-up of its goroutine per answer; on a core shared with the server
// under test that is the share this engine gives back. Heads are parsed
// by the same reader (respReader.readHead) once they are whole in the
// buffer; bodies must be framed by Content-Length (errRingFraming
// otherwise).

// ringConn is one connection of the uring engine.
type ringConn struct {
	nc  net.Conn // holds the socket open; fd is its descriptor
	fd  int
	buf []byte // read buffer; buf[:w] is received and not yet parsed
	w   int
	req []byte
	// target is the target req was built for.
	target string
	// ops counts the ring operations in flight on the connection; its
	// buffers are the kernel's until it is back to 0.
	ops int
	// start is when the request in flight was sent (offset from t0), -1
	// when none is.
	start time.Duration
	// body: the head is parsed and rem body bytes are still to drop; resp
	// is the answer so far.
	body bool
	rem  int64
	resp response
	// failed: the exchange failed and the socket is shut down; the
	// connection closes once its operations have ended.
	failed bool
	// redial: the last connect failed; the watchdog's next tick tries
	// again.
	redial bool
	onConn uint64
}

// Operation kinds in a completion's user data (bits 16–17; the
// connection's index is in bits 0–15).
const (
	opSend = iota
	opHead
	opBody
)

type ringEngine struct {
	r     *Runner
	ring  *uring.Ring
	conns []ringConn
	rd    respReader // parses a head in place in a connection's buffer
	res   Result
	busy  int   // connections with an exchange or operations in flight
	err   error // what ended the run early (errRingFraming)
}

// runRing is Run for the uring engine.
func (r *Runner) runRing(ctx context.Context) (*Result, error) {
	// The ring is made single-issuer: every io_uring_enter must come
	// from this thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A connection has at most two operations queued (a send and its
	// receive, or one receive) and each is submitted before its completion
	// can queue the next, so two entries a connection never fill the queue.
	entries := uint32(8)
	for entries < uint32(2*r.cfg.Connections+8) {
		entries <<= 1
	}
	ring, err := uring.New(entries)
	if err != nil {
		return nil, fmt.Errorf("engine uring: %w", err)
	}
	defer ring.Close()
	e := &ringEngine{r: r, ring: ring, conns: make([]ringConn, r.cfg.Connections)}
	e.rd.rd = noMore{}
	tick := min(max(r.cfg.Timeout/10, time.Millisecond), 100*time.Millisecond)
	r.t0 = time.Now()
	for i := range e.conns {
		c := &e.conns[i]
		c.buf, c.start = make([]byte, defaultBufSize), -1
		e.next(i)
	}
	end := time.Duration(-1)
	watched := time.Duration(0)
	for e.busy > 0 {
		now := time.Since(r.t0)
		if end < 0 && (ctx.Err() != nil || e.err != nil || r.cfg.Duration > 0 && now >= r.cfg.Duration) {
			end = now
			e.stop()
			continue
		}
		wait := tick
		if r.cfg.Duration > 0 && end < 0 {
			wait = min(wait, r.cfg.Duration-now+time.Millisecond)
		}
		if err := ring.Enter(wait); err != nil {
			e.err = err
			break
		}
		ring.Reap(e.complete)
		if now = time.Since(r.t0); now-watched >= tick {
			watched = now
			e.watchdog(now)
		}
	}
	if end < 0 {
		end = time.Since(r.t0)
	}
	for i := range e.conns {
		if c := &e.conns[i]; c.nc != nil {
			c.nc.Close()
		}
	}
	e.res.Duration = end
	return &e.res, e.err
}

// next starts connection i's next request, connecting first when needed;
// the connection goes idle when the run has no request left for it.
func (e *ringEngine) next(i int) {
	r, c := e.r, &e.conns[i]
	for !r.stopped.Load() {
		n := r.next.Add(1) - 1
		if r.limit > 0 && n >= r.limit {
			break
		}
		if c.nc == nil && !e.dial(c) {
			// Counted; the next attempt waits for the watchdog's tick, so
			// a dead server cannot hold the loop past the run's end.
			r.ringDone.Add(1)
			c.redial = true
			e.busy++
			return
		}
		if t := r.cfg.Workload.Target(n); t != c.target || c.req == nil {
			c.req, c.target = r.appendRequest(c.req[:0], t), t
		}
		c.start, c.body, c.failed = time.Since(r.t0), false, false
		e.ring.Send(c.fd, c.req, true, user(i, opSend))
		e.ring.Recv(c.fd, c.buf[c.w:], 0, user(i, opHead))
		c.ops += 2
		e.busy++
		return
	}
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
}

// noMore is the head parser's reader: parse hands it whole heads only, so
// a read for more is a bug reported as a protocol error, not a wait.
type noMore struct{}

func (noMore) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func user(i, op int) uint64 { return uint64(op)<<16 | uint64(i) }

// dial connects c (blocking: connections are made once and kept).
func (e *ringEngine) dial(c *ringConn) bool {
	d := net.Dialer{Timeout: e.r.cfg.Timeout}
	nc, err := d.Dial("tcp", e.r.addr)
	if err == nil {
		var raw syscall.RawConn
		if raw, err = nc.(*net.TCPConn).SyscallConn(); err == nil {
			err = raw.Control(func(fd uintptr) { c.fd = int(fd) })
		}
		if err != nil {
			nc.Close()
		}
	}
	if err != nil {
		if !e.r.stopped.Load() {
			e.res.Errors[ErrConnect]++
		}
		return false
	}
	e.res.Connects++
	c.nc, c.w, c.onConn = nc, 0, 0
	return true
}

// complete handles one completion.
func (e *ringEngine) complete(u uint64, res int32) {
	i, op := int(u&0xffff), int(u>>16)
	c := &e.conns[i]
	c.ops--
	switch {
	case c.failed:
		if c.ops == 0 {
			e.closeFailed(i)
		}
	case res < 0: // (a receive cancelled by its failed send finds c.failed set)
		e.fail(i, classify(syscall.Errno(-res)))
	case op == opSend:
		if int(res) < len(c.req) {
			e.fail(i, ErrOther)
		}
	case res == 0:
		e.fail(i, e.eofKind(c))
	case op == opHead:
		c.w += int(res)
		e.parse(i)
	default:
		c.rem -= int64(res)
		if c.rem > 0 {
			e.dropRest(i)
		} else {
			e.done(i, 0)
		}
	}
}

// eofKind classifies a connection the server closed mid-exchange.
func (e *ringEngine) eofKind(c *ringConn) ErrorKind {
	switch {
	case c.body:
		return ErrShortBody
	case c.w == 0:
		return ErrReset
	}
	return ErrProtocol
}

// parse reads what c's buffer holds of the answer: a whole head is parsed
// (interim 1xx answers skipped), the body bytes that came with it counted
// and the rest dropped; an unfinished head waits for more.
func (e *ringEngine) parse(i int) {
	c := &e.conns[i]
	for {
		if headEnd(c.buf[:c.w]) < 0 {
			if c.w == len(c.buf) {
				e.fail(i, ErrProtocol) // a head longer than the buffer
				return
			}
			e.ring.Recv(c.fd, c.buf[c.w:], 0, user(i, opHead))
			c.ops++
			return
		}
		p := &e.rd
		p.buf, p.r, p.w, p.n = c.buf[:c.w], 0, c.w, 0
		resp, length, chunked, err := p.readHead()
		switch {
		case err != nil:
			e.fail(i, classify(err))
			return
		case resp.status == 101:
			e.fail(i, ErrProtocol)
			return
		case resp.status < 200:
			c.w = copy(c.buf, c.buf[p.r:c.w]) // an interim answer: the real one follows
			continue
		case e.r.cfg.Method == "HEAD" || resp.status == 204 || resp.status == 304:
			c.resp = resp
			e.done(i, p.r)
			return
		case chunked || length < 0:
			e.err = errRingFraming
			e.fail(i, ErrProtocol)
			return
		}
		have := min(int64(c.w-p.r), length)
		resp.bodyBytes, resp.wireBytes = length, int64(p.r)+length
		c.resp, c.rem = resp, length-have
		if c.rem == 0 {
			e.done(i, p.r+int(have))
			return
		}
		c.w, c.body = 0, true // every received byte was this answer's
		e.dropRest(i)
		return
	}
}

// headEnd returns the offset just past the blank line ending the head in b,
// or -1 (a bare LF ends a line, as respReader.line accepts).
func headEnd(b []byte) int {
	for off := 0; ; {
		j := bytes.IndexByte(b[off:], '\n')
		if j < 0 {
			return -1
		}
		off += j + 1
		if off < len(b) && b[off] == '\n' {
			return off + 1
		}
		if off+1 < len(b) && b[off] == '\r' && b[off+1] == '\n' {
			return off + 2
		}
	}
}

// dropRest queues a receive that drops the rest of c's body in the socket.
func (e *ringEngine) dropRest(i int) {
	c := &e.conns[i]
	e.ring.Discard(c.fd, uint32(min(c.rem, maxDiscard)), user(i, opBody))
	c.ops++
}

// done ends c's exchange with the answer c.resp, whose last byte is at
// consumed in the buffer (what follows stays for the next answer), and
// starts the next request.
func (e *ringEngine) done(i, consumed int) {
	r, c := e.r, &e.conns[i]
	c.w = copy(c.buf, c.buf[consumed:c.w])
	res := &e.res
	res.Latency.Record(time.Since(r.t0) - c.start)
	res.Requests++
	res.WireBytes += c.resp.wireBytes
	res.BodyBytes += c.resp.bodyBytes
	switch s := c.resp.status; {
	case s >= 500:
		res.Errors[ErrStatus5xx]++
	case s >= 400:
		res.Errors[ErrStatus4xx]++
	default:
		res.OK++
	}
	r.ringDone.Add(1)
	c.start, c.body = -1, false
	c.onConn++
	e.busy--
	if c.resp.close || r.cfg.ConnRequests > 0 && c.onConn >= r.cfg.ConnRequests {
		c.nc.Close()
		c.nc = nil
	}
	e.next(i)
}

// fail ends c's exchange with an error of kind k (not counted once the
// run is stopping): the socket is shut down, which ends its operations,
// and the connection closes when the last one has.
func (e *ringEngine) fail(i int, k ErrorKind) {
	c := &e.conns[i]
	if !e.r.stopped.Load() {
		e.res.Errors[k]++
	}
	e.r.ringDone.Add(1)
	c.failed, c.start = true, -1
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
	if c.ops == 0 {
		e.closeFailed(i)
	}
}

// closeFailed closes a failed connection whose operations have ended and
// goes on with the next request on a new one.
func (e *ringEngine) closeFailed(i int) {
	c := &e.conns[i]
	c.nc.Close()
	c.nc, c.failed, c.body = nil, false, false
	e.busy--
	e.next(i)
}

// watchdog fails every exchange in flight for longer than the timeout.
func (e *ringEngine) watchdog(now time.Duration) {
	for i := range e.conns {
		c := &e.conns[i]
		switch {
		case c.redial:
			c.redial = false
			e.busy--
			e.next(i)
		case c.start >= 0 && !c.failed && now-c.start > e.r.cfg.Timeout:
			e.fail(i, ErrTimeout)
		}
	}
}

// stop ends the run: no request starts any more and those in flight are
// cut short, uncounted.
func (e *ringEngine) stop() {
	e.r.stopped.Store(true)
	for i := range e.conns {
		if c := &e.conns[i]; c.start >= 0 && !c.failed {
			c.failed, c.start = true, -1
			unix.Shutdown(c.fd, unix.SHUT_RDWR)
		}
	}
}
