package front

import (
	"net"
	"net/netip"
	"slices"
	"time"
)

// Client connection limits. A front that accepts every
// connection runs out of descriptors: 19,900 idle keep-alive connections
// once starved `shoal up` so that normal clients timed out and the admin
// API failed with "accept4: too many open files". The front therefore
// holds at most Config.MaxClientConns client connections and at most
// Config.MaxConnsPerIP from one address, leaving the rest of the process's
// RLIMIT_NOFILE to node connections, splice pipes, the admin API and files.
// Near the limit it closes the connections idle the longest first — those
// waiting for a request with nothing buffered, which a client may see
// closed at any time anyway (RFC 9112 §9.3.1 tells it to retry) — as
// nginx's ngx_drain_connections does with its reusable connections; a new
// connection is refused (503, then closed) only when none is idle.

// DefaultMaxConnsPerIP is the default of Config.MaxConnsPerIP. A browser
// opens at most 6 connections per origin, so 256 leaves room for some 40
// browsers behind one NAT address while keeping one address from taking a
// whole front (nginx and HAProxy ship no default; their documentation's
// examples use 10 to 100). Load generators on one address must raise it.
const DefaultMaxConnsPerIP = 256

// DefaultMaxClientConns derives the default of Config.MaxClientConns from
// the process's descriptor limit nofile (RLIMIT_NOFILE, which the Go
// runtime raises to the hard limit at start, as nginx's
// worker_rlimit_nofile does). A reserve of nofile/8, between 32 and 1024,
// stays for the admin API, listeners, logs and health checks; half of the
// rest goes to client connections, because every client connection with a
// request in relay needs a node connection too (and a large body a splice
// pipe). With nofile 20,000 that is 9,488; with 1,024, 448.
func DefaultMaxClientConns(nofile int) int {
	reserve := min(max(nofile/8, 32), 1024)
	return max((nofile-reserve)/2, 1)
}

// Connection states (clientConn.state), for idle shedding: a connection is
// idle while it waits for a request with nothing buffered; the shedder
// claims an idle one by moving it to connShed before closing it, so a
// request that arrives in between is never half served.
const (
	connBusy int32 = iota
	connIdle
	connShed
	connH2 // an HTTP/2 connection: never shed (its idle timeout closes it); Shutdown drains it
)

// The high- and low-water marks of idle shedding, in 1/16ths of
// MaxClientConns: above 14/16 open connections a background pass closes the
// longest-idle ones until 12/16 remain (or none is idle).
const (
	shedHigh = 14
	shedLow  = 12
	// shedPause is the least time between two background passes, so a
	// front full of busy connections is not rescanned at every accept.
	shedPause = 50 * time.Millisecond
	// shedMinIdle is the least time a connection must have been idle to be
	// shed: a connection just accepted, or just answered, is idle only
	// until its goroutine reads the request that is usually already there.
	shedMinIdle = int64(20 * time.Millisecond)
)

// refused503 is sent on a connection refused by a limit, before closing
// it; refused503Body is its body's length, for the access log.
var refused503 = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Content-Length: 20\r\nConnection: close\r\n\r\nService Unavailable\n")

const refused503Body = 20

// remoteAddr is c's peer address (unmapped), or the zero Addr.
func remoteAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if ap := a.AddrPort(); ap.IsValid() {
			return ap.Addr().Unmap()
		}
	}
	return netip.Addr{}
}

// acceptConn registers a newly accepted connection, refusing it (503, then
// closed; nil returned) when it would pass a limit and no idle connection
// can make room. Connections a node hands back take newClientConn instead:
// they are not new, and refusing one would break a client mid-session.
func (s *Server) acceptConn(c net.Conn) *clientConn {
	max, perIP := s.cfg.MaxClientConns, s.cfg.MaxConnsPerIP
	if max > 0 || perIP > 0 {
		addr := netip.Addr{}
		if perIP > 0 {
			addr = remoteAddr(c)
			if len(s.cfg.ProxyFrom) > 0 && s.trusted(addr) {
				addr = netip.Addr{} // a balancer: its clients' addresses come later (readProxy)
			}
		}
		s.mu.Lock()
		n, fromIP := len(s.conns), 0
		if addr.IsValid() {
			fromIP = s.perIP[addr]
		}
		s.mu.Unlock()
		switch {
		case perIP > 0 && fromIP >= perIP:
			s.ctr.refusedPerIP.Add(1)
			s.refuse(c, answerPerIP)
			return nil
		case max > 0 && n >= max && s.shedIdle(n-max*shedLow/16+1) == 0:
			s.ctr.refusedLimit.Add(1)
			s.refuse(c, answerConnLimit)
			return nil
		case max > 0 && n+1 > max*shedHigh/16:
			select {
			case s.shedWake <- struct{}{}:
			default:
			}
		}
	}
	return s.newClientConn(c)
}

// refuse answers 503 on a connection refused by a limit and closes it,
// counting the answer and logging it (answers.go) with its reason why. The
// socket is new, so the short write does not block. A TLS connection is
// closed without an answer: a 503 would need the handshake the limit is
// there to spare; it counts only as refused.
func (s *Server) refuse(c net.Conn, why answerReason) {
	s.ctr.connsAccepted.Add(1)
	if closeTLS(c) {
		return
	}
	start := time.Now()
	n, _ := c.Write(refused503)
	c.Close()
	s.ctr.bytesOut.Add(uint64(n))
	s.ctr.countAnswer(503, why)
	s.answerBare(peerIP(c), start, 503, refused503Body, why)
}

// shedLoop runs the background idle-shedding passes acceptConn asks for.
func (s *Server) shedLoop() {
	t := time.NewTimer(0)
	defer t.Stop()
	for wake(s.done, s.shedWake) {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if k := n - s.cfg.MaxClientConns*shedLow/16; k > 0 {
			s.shedIdle(k)
		}
		t.Reset(shedPause)
		if !wake(s.done, t.C) {
			return
		}
	}
}

// wake waits for c and reports true, or false once done is closed.
func wake[T any](done <-chan struct{}, c <-chan T) bool {
	select {
	case <-done:
		return false
	case <-c:
		return true
	}
}

// idleConn is a shedding candidate.
type idleConn struct {
	cc *clientConn
	at int64
}

// shedIdle closes up to n client connections, those idle the longest
// first, and returns how many it closed.
func (s *Server) shedIdle(n int) int {
	if n <= 0 {
		return 0
	}
	s.shedMu.Lock()
	defer s.shedMu.Unlock()
	old := time.Now().UnixNano() - shedMinIdle
	s.mu.Lock()
	cand := s.shedCand[:0]
	for cc := range s.conns {
		if cc.state.Load() == connIdle && cc.idleAt.Load() <= old {
			cand = append(cand, idleConn{cc, cc.idleAt.Load()})
		}
	}
	if len(cand) > n {
		slices.SortFunc(cand, func(a, b idleConn) int { return int(min(max(a.at-b.at, -1), 1)) })
		cand = cand[:n]
	}
	// Claimed under s.mu, so each cc still serves the connection seen;
	// closed after, by the net.Conn itself (a cc may be reused by then).
	shut := s.shedConns[:0]
	for _, ic := range cand {
		if ic.cc.state.CompareAndSwap(connIdle, connShed) {
			shut = append(shut, ic.cc.c)
		}
	}
	s.mu.Unlock()
	clear(cand)
	s.shedCand = cand[:0]
	for _, c := range shut {
		closeNow(c)
	}
	k := len(shut)
	clear(shut)
	s.shedConns = shut[:0]
	s.ctr.idleShed.Add(uint64(k))
	return k
}

// ConnLimits returns the client connection limits in force (after
// defaults): the global one and the per-address one; 0 means none.
func (s *Server) ConnLimits() (global, perIP int) {
	return max(s.cfg.MaxClientConns, 0), max(s.cfg.MaxConnsPerIP, 0)
}
