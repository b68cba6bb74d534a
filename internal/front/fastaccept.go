//go:build linux

package front

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"shoal/internal/cluster"
	"shoal/internal/handoff"
	"shoal/internal/httpwire"
	"shoal/internal/policy"

	"golang.org/x/sys/unix"
)

// The raw accept path: under passfd alone (Config.Path is PassFD, no
// Choose), a connection whose whole request arrived with it costs the
// front four system calls and no allocation — accept4, read, sendmsg,
// close — instead of a net.Conn, a netpoller registration (two epoll_ctl),
// getsockname, TCP_NODELAY, a read deadline timer and a goroutine. With one
// request per connection that fixed cost is most of what a handoff front
// does (README "Data paths"; bench/handoff-cpu.sh), the same reason nginx
// and HAProxy accept in their event loop without a thread per connection.
//
// One goroutine per listener accepts (the listener stays in the netpoller,
// so Shutdown's Close wakes it), reads the head non-blocking into one reused
// buffer (TCP_DEFER_ACCEPT, listen.go, makes it normally already there),
// parses it, asks the policy and passes the bare descriptor to the node
// with a send that never waits. Anything else — a partial head, a parse
// error, CONNECT, no node, a node without a handoff socket, a full node
// socket, a failed send, EOF — wraps the descriptor into a net.Conn with
// the bytes read and serves it on the normal path (its own goroutine), so
// refusals, the header timeout (slowloris), relay fallbacks and retries
// behave exactly as they did; nothing blocks the accept loop.

// The repair path (Config.Path is a *RepairPath, no Choose) takes the same
// loop: it freezes the accepted descriptor, steers its flow and sends its
// state to the node without waiting for the answer; the node's control
// channel reader finishes the connection when the answer comes (repairfast.go).

// rawAccept is one listener's raw accept loop and the state it reuses.
type rawAccept struct {
	s   *Server
	p   *passfdPath // one of p and rp is set
	rp  *RepairPath
	buf []byte
	req httpwire.Request
	// pr lives here so that passing it to the policy does not allocate;
	// url caches the last path as a string while it repeats.
	pr      policy.Request
	url     string
	vh      vhostState
	pathCtr *atomic.Uint64
	// fetch is the last decision's handoff.FDHeader.Fetch (peer fetch).
	fetch uint16
}

// fastAccept returns the raw accept loop's state when ln can be served by
// it: under passfd or repair alone, on a TCP listener.
func (s *Server) fastAccept(ln net.Listener) (*net.TCPListener, *rawAccept) {
	if s.cfg.NoFastAccept || s.cfg.Choose != nil {
		return nil, nil
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil, nil
	}
	switch p := s.cfg.Path.(type) {
	case *passfdPath:
		return tl, &rawAccept{s: s, p: p}
	case *RepairPath:
		return tl, &rawAccept{s: s, rp: p}
	}
	return nil, nil
}

// rawListener is what Serve registers for a listener served by the raw
// accept loop: closing it (Shutdown, Close) closes the loop's duplicate of
// the listening descriptor too, which wakes the loop and stops listening.
type rawListener struct {
	*net.TCPListener
	f *os.File
}

func (l rawListener) Close() error {
	l.f.Close()
	return l.TCPListener.Close()
}

// serveRaw is Serve's loop for the raw accept path. A listener's own
// RawConn cannot wait for readiness (its Read is not supported), so the
// loop waits on a duplicate of the descriptor (TCPListener.File, which
// stays non-blocking and in the netpoller). Stop it with Shutdown or Close:
// closing only ln leaves the duplicate listening.
func (s *Server) serveRaw(tl *net.TCPListener, ra *rawAccept) error {
	f, err := tl.File()
	if err != nil {
		return fmt.Errorf("front: accept: %w", err)
	}
	rl := rawListener{tl, f}
	s.mu.Lock()
	delete(s.listeners, tl)
	closing := s.closing.Load()
	if !closing {
		s.listeners[rl] = struct{}{}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, rl)
		s.mu.Unlock()
		f.Close()
	}()
	if closing {
		return ErrServerClosed
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("front: accept: %w", err)
	}
	ra.buf = make([]byte, s.inSize())
	var backoff time.Duration
	for {
		var fd int
		var aerr error
		err := rc.Read(func(lfd uintptr) bool {
			for {
				// No peer address: the handoff does not need it, and
				// the fallback's net.FileConn asks the kernel itself.
				// Raw system calls throughout: none of them can block (the
				// descriptors are non-blocking), and the runtime's syscall
				// bookkeeping costs a sysmon wakeup per call when idle.
				r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, lfd, 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
				switch e {
				case 0:
					fd, aerr = int(r), nil
					return true
				case unix.EINTR, unix.ECONNABORTED:
					continue // the client gave up while queued; take the next
				case unix.EAGAIN:
					return false // wait in the netpoller
				}
				fd, aerr = -1, e
				return true
			}
		})
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			return fmt.Errorf("front: accept: %w", err)
		}
		if aerr != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			switch aerr {
			case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
				// Out of descriptors or memory: back off like Serve.
				if backoff == 0 {
					backoff = 5 * time.Millisecond
				} else if backoff *= 2; backoff > time.Second {
					backoff = time.Second
				}
				s.logf("front: accept: %v; retrying in %v", aerr, backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("front: accept: %w", aerr)
		}
		backoff = 0
		ra.conn(fd)
	}
}

// conn serves one accepted descriptor: passed to a node here, or handed to
// the normal path.
func (ra *rawAccept) conn(fd int) {
	s := ra.s
	if s.closing.Load() {
		rawClose(fd)
		return
	}
	n, err := rawRead(fd, ra.buf)
	switch {
	case n > 0:
		s.ctr.bytesIn.Add(uint64(n))
	case err == unix.EAGAIN || err == unix.EINTR:
		n = 0 // nothing yet (the deferred accept timed out): normal path
	default:
		// EOF or a reset before any byte: what the normal path would have
		// done after accepting it.
		s.ctr.connsAccepted.Add(1)
		rawClose(fd)
		return
	}
	data := ra.buf[:n]
	var id uint64
	var relay, ok bool
	if ra.rp != nil {
		id, relay, ok = ra.repair(fd, data)
	} else {
		id, relay, ok = ra.pass(fd, data)
	}
	if ok {
		return
	}
	s.handoff.fastFallback.Add(1)
	s.serveFD(fd, id, data, relay)
}

// serveFD serves the accepted descriptor fd on the normal path (its own
// goroutine) with data already read from it; id is its connection id (0:
// allocate one) and relay makes its first request relayed without a
// handoff.
func (s *Server) serveFD(fd int, id uint64, data []byte, relay bool) {
	c, err := handoff.WrapFD(fd) // closes fd
	if err != nil {
		s.ctr.connsAccepted.Add(1)
		s.logf("front: accept: %v", err)
		return
	}
	cc := s.acceptConn(c)
	if cc == nil {
		return // refused by a limit, or shutting down: closed
	}
	if id != 0 {
		cc.id = id // the policy saw this id already
	}
	cc.in.w = copy(cc.in.b, data)
	cc.relayOnce = relay
	cc.rawHeld = id != 0 // released at its next pick if held (held.go)
	go cc.serve()
}

// pick parses the request head in data and asks the policy for a node: the
// first step of a handoff from the accept loop. It returns the
// connection's id (0 when the head did not parse or was a CONNECT), the
// chosen node (nil: none, or no parsable head: the normal path answers the
// request), and the time routing began when an Observer wants it.
func (ra *rawAccept) pick(data []byte) (id uint64, b *cluster.Backend, start time.Time) {
	s := ra.s
	if len(data) == 0 {
		return 0, nil, start
	}
	req := &ra.req
	if _, err := s.parser.Parse(data, req); err != nil || req.IsMethod("CONNECT") {
		return 0, nil, start
	}
	if s.cfg.Observer != nil {
		start = time.Now()
	}
	id = s.nextConn.Add(1)
	ra.url = contentKey(s.cfg.VHosts, req, ra.url, &ra.vh)
	if internalKey(ra.url, s.cfg.VHosts != nil) {
		return 0, nil, start // the normal path answers 404
	}
	ra.pr = policy.Request{URL: ra.url, Size: -1, Conn: id, Holder: -1}
	d, b := s.cl.Pick(&ra.pr)
	if d.Node < 0 {
		b = nil
	}
	ra.fetch = handoff.FetchOf(d.Fetch, d.Node)
	return id, b, start
}

// pass moves the connection on fd, whose first bytes are data, to the node
// the policy picks, and reports whether it did. If not, the caller serves
// the connection on the normal path with id as its id (0: allocate one),
// relaying its first request without a handoff when relay is set.
func (ra *rawAccept) pass(fd int, data []byte) (id uint64, relay, ok bool) {
	s, p := ra.s, ra.p
	id, b, start := ra.pick(data)
	if b == nil {
		return id, false, false // the normal path answers it (400, 503, …)
	}
	pr := &ra.pr
	st := b.LastStatus()
	if st == nil || st.HandoffSocket == "" {
		s.cl.Done(b, pr)
		return id, false, false // the normal path counts it and relays
	}
	back := p.handBack(s)
	h := handoff.FDHeader{Kind: handoff.FDHandoff, Flags: handoff.FDFlagEnded, Node: int32(b.Index), Moves: 1, Conn: id, Fetch: ra.fetch}
	if back {
		h.Flags = handoff.FDFlagReturn
		p.owe(st.HandoffSocket, id) // before the send: it may come back at once
	}
	s.cl.Hold(b, id) // until the node returns or ends it (held.go)
	err := p.client(s, st.HandoffSocket).TrySendRaw(h, fd, data)
	s.cl.Done(b, pr)
	if err != nil {
		p.settle(st.HandoffSocket, id)
		if errors.Is(err, handoff.ErrWouldBlock) {
			// The node is slow to take handoffs: the normal path waits
			// for it (up to SendTimeout) on its own goroutine; the hold
			// stays until it picks again (held.go).
			s.handoff.fastBlocked.Add(1)
			return id, false, false
		}
		s.cl.Release(id)
		if !p.refused(s, b.URL, st.HandoffSocket, err) {
			s.handoff.fallbackSend.Add(1)
			s.logf("front: passfd to %s: %v; relaying", b.URL, err)
		}
		return id, true, false
	}
	rawClose(fd) // the node holds the connection now
	if !back {
		s.cl.CloseConn(id) // as the normal path does when it lets go
	}
	s.ctr.connsAccepted.Add(1)
	s.ctr.requests.Add(1)
	if ra.pathCtr == nil {
		ra.pathCtr = s.pathCounter(p.Name())
	}
	ra.pathCtr.Add(1)
	s.handoff.passed.Add(1)
	s.handoff.fastPassed.Add(1)
	if o := s.cfg.Observer; o != nil {
		o.Observe(Observation{Node: b.Index, NodeURL: b.URL, Path: p.Name(), Elapsed: time.Since(start)})
	}
	return id, false, true
}

// rawRead reads from the non-blocking socket fd without the runtime's
// syscall bookkeeping.
func rawRead(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
