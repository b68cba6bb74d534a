package front

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/base/rawio"
	"shoal/internal/cluster/policy"
)

// clientConn is one client connection and everything reused across its
// requests: the read buffer the head is parsed in, the write buffer heads
// are built in, the parsed request and the exchange. Finished ones go back
// to the server's pool (Server.ccPool) with their buffers, so accepting a
// connection allocates nothing of its own (it used to cost ~21 KB).
type clientConn struct {
	s      *Server
	c      net.Conn
	id     uint64
	ip     string // remote IP for X-Forwarded-For, set on first use (clientIP)
	in     inbuf
	out    []byte
	vec    [2][]byte
	bufs   net.Buffers
	io     rawio.Conn // raw reads and writes of a plain TCP connection
	req    httpwire.Request
	pr     policy.Request
	lr     io.LimitedReader
	x      Exchange
	t      ticket // the current request's route (dispatch.go)
	holder int
	// state is connIdle while the connection waits for a request with
	// nothing buffered, connBusy otherwise, connShed once the idle shedder
	// (limits.go) claimed it; idleAt is when it last became idle (UnixNano)
	// and addr its peer when a per-address limit is on.
	state  atomic.Int32
	idleAt atomic.Int64
	addr   netip.Addr
	// now is the latest clock reading (UnixNano): taken once when a head
	// is parsed and once when the response head arrives, and reused for
	// the coarse deadlines in between (time.Now costs ~100 ns here).
	now    int64
	rdl    deadline
	wdl    deadline
	url    string // last request's content key, reused while it repeats
	vh     vhostState
	sent   int64 // bytes written to the client for the current request (Observation.Bytes)
	tokens [][]byte
	tok    uint64 // the relayed request's token (echo.go)
	// pathName/pathCtr cache the last data path's counter.
	pathName string
	pathCtr  *atomic.Uint64
	// relayOnce makes the passfd and repair paths relay the next request
	// without trying a handoff: the raw accept path already tried and
	// failed (counted there).
	relayOnce bool
	// closeAfter closes the connection after the answer being relayed:
	// the repair path relays a connection it could not hand over, and
	// when nodes accept new connections (RepairConfig.NodesAccept) the
	// steering may send its later packets to a node at any time.
	closeAfter bool
	// tls is set for a TLS client connection (tls.go): its requests are
	// never handed off, and small responses go out in one record.
	tls bool
	// asked: a node handed the connection back in tag mode (its table
	// could not tell, or the front had room), so its next request's URL
	// is told to the policy (tagAsked).
	asked bool
	// moves is the move count a node returned the connection with
	// (handoff.FDHeader.Moves), 0 for one the front accepted: the next
	// handoff continues it, so notes about the moves before are known
	// to be older.
	moves uint32
	// relayed: the hybrid rule counts this connection among those the
	// front relays in tag mode (relayShare).
	relayed bool
	// rawHeld: the raw accept path picked a node for this connection and
	// could not hand it off at once, so it holds the connection against
	// that node (control.Hold) until this path picks again (held.go).
	rawHeld bool
	// log holds the current request's access-log fields (accesslog.go).
	log logReq
	// h2 is the HTTP/2 connection while cc serves one (Shutdown drains it);
	// h2c: readHead found the h2c preface.
	h2  atomic.Pointer[h2conn]
	h2c bool
	// proxied: the peer is in Config.ProxyFrom, so the connection begins
	// with a PROXY header, read first (proxyproto.go).
	proxied bool
	// lp is the keep-alive loop's state; looping is set while the loop
	// may run, for Server.Close (keepalive.go).
	lp      loopState
	looping atomic.Bool
	// turn is signalled when the requests before this one's on a
	// pipelined node connection have read their answers (pipeline.go).
	turn chan struct{}
}

// inSize and outSize are the sizes of a connection's buffers: a maximal
// head plus room for the start of a body; a rewritten head (which adds at
// most XFF and Host) or a node's response head.
func (s *Server) inSize() int  { return s.cfg.MaxHeadBytes + 4096 }
func (s *Server) outSize() int { return s.cfg.MaxHeadBytes + 1024 }

// getClientConn returns a pooled or new clientConn reset for c.
func (s *Server) getClientConn(c net.Conn) *clientConn {
	cc, _ := s.ccPool.Get().(*clientConn)
	if cc == nil {
		cc = &clientConn{s: s, turn: make(chan struct{}, 1)}
		cc.in.b = make([]byte, s.inSize())
		cc.out = make([]byte, 0, s.outSize())
	}
	cc.c, cc.holder = c, -1
	cc.tls = isTLS(c)
	cc.io.Bind(c)
	cc.in.r, cc.in.w = 0, 0
	cc.now = time.Now().UnixNano()
	return cc
}

// putClientConn returns a finished connection's state to the pool,
// dropping every reference to the old connection and its requests.
// Buffers grown past the standard sizes are not kept.
func (s *Server) putClientConn(cc *clientConn) {
	if len(cc.in.b) != s.inSize() || cap(cc.out) > s.outSize() {
		return
	}
	cc.c, cc.ip, cc.id, cc.addr = nil, "", 0, netip.Addr{}
	cc.io.Unbind()
	cc.out = cc.out[:0]
	cc.vec = [2][]byte{}
	cc.bufs = nil
	cc.req = httpwire.Request{Headers: cc.req.Headers[:0]}
	cc.pr = policy.Request{}
	cc.lr = io.LimitedReader{}
	cc.x = Exchange{}
	cc.t = ticket{}
	cc.rdl, cc.wdl = deadline{}, deadline{}
	clear(cc.tokens)
	cc.tokens = cc.tokens[:0]
	cc.relayOnce, cc.rawHeld, cc.proxied, cc.relayed, cc.asked, cc.moves = false, false, false, false, false, 0
	cc.closeAfter = false
	cc.log.captured = false
	s.ccPool.Put(cc)
}

// clientIP returns the client's IP for X-Forwarded-For, formatting it on
// first use: the handoff paths never need it.
func (cc *clientConn) clientIP() string {
	if cc.ip != "" {
		return cc.ip
	}
	ra := cc.c.RemoteAddr()
	if a, ok := ra.(*net.TCPAddr); ok {
		cc.ip = a.IP.String()
	} else if ra != nil {
		if h, _, err := net.SplitHostPort(ra.String()); err == nil {
			cc.ip = h
		}
	}
	return cc.ip
}

func (s *Server) newClientConn(c net.Conn) *clientConn {
	cc := s.getClientConn(c)
	cc.id = s.nextConn.Add(1)
	cc.state.Store(connIdle)
	cc.idleAt.Store(cc.now)
	if len(s.cfg.ProxyFrom) > 0 && s.trusted(remoteAddr(c)) {
		cc.proxied = true // its address comes with the PROXY header (readProxy)
	} else if s.cfg.MaxConnsPerIP > 0 {
		cc.addr = remoteAddr(c)
	}
	s.mu.Lock()
	if s.drained {
		s.mu.Unlock()
		c.Close()
		s.putClientConn(cc)
		return nil
	}
	s.conns[cc] = struct{}{}
	if cc.addr.IsValid() {
		s.perIP[cc.addr]++
	}
	s.mu.Unlock()
	s.ctr.connsAccepted.Add(1)
	s.ctr.connsActive.Add(1)
	return cc
}

func (cc *clientConn) serve() {
	s := cc.s
	detached := false
	defer func() {
		switch {
		case detached:
		case s.closing.Load():
			lingerClose(cc.c)
		default:
			cc.c.Close()
		}
		s.mu.Lock()
		delete(s.conns, cc)
		if cc.addr.IsValid() {
			if s.perIP[cc.addr] <= 1 {
				delete(s.perIP, cc.addr)
			} else {
				s.perIP[cc.addr]--
			}
		}
		s.mu.Unlock()
		s.ctr.connsActive.Add(-1)
		if cc.rawHeld {
			s.cl.Release(cc.id)
		}
		if cc.relayed {
			s.relayEnded(cc)
		}
		if cc.holder >= 0 {
			s.cl.CloseConn(cc.id)
		}
		s.putClientConn(cc)
	}()
	if cc.proxied && !cc.readProxy() {
		return
	}
	if cc.tls {
		h2, ok := cc.handshake()
		if !ok {
			return
		}
		if h2 {
			cc.serveH2(nil)
			return
		}
	}
	first := true
	for {
		if !first && cc.loopable() {
			switch cc.serveLoop() {
			case loopDetached:
				detached = true
				return
			case loopClose:
				return
			}
		}
		if !cc.readHead(first) {
			return
		}
		if cc.h2c {
			cc.h2c = false
			cc.serveH2(cc.in.bytes())
			return
		}
		first = false
		res := cc.handle()
		if res.Detached {
			detached = true
			return
		}
		if res.Close {
			return
		}
	}
}

// readHead reads until a complete head is parsed into cc.req, answering
// refusals itself. It reports false when the connection must close.
func (cc *clientConn) readHead(first bool) bool {
	started := cc.armHead(first)
	for {
		switch cc.parseHead(first, &started) {
		case headReady:
			return true
		case headEnd:
			return false
		}
		cc.markWait()
		n, err := cc.fill()
		if n > 0 {
			cc.s.ctr.bytesIn.Add(uint64(n))
			continue
		}
		if err != nil {
			cc.readFailed(err)
			return false
		}
	}
}

// armHead sets the read deadline for the next head (the head timeout for a
// connection's first, the idle timeout while nothing is buffered, drainAt
// once shutting down) and reports whether a head has begun.
func (cc *clientConn) armHead(first bool) bool {
	s := cc.s
	switch {
	case s.closing.Load():
		// Shutting down: one more request may come until drainAt.
		at := s.drainAt.Load()
		cc.rdl.at = at
		cc.c.SetReadDeadline(time.Unix(0, at))
	case first:
		cc.rdl.setRead(cc.c, cc.now, s.cfg.HeaderTimeout)
	case cc.in.len() == 0:
		cc.rdl.setRead(cc.c, cc.now, s.cfg.IdleTimeout)
	}
	return cc.in.len() > 0
}

// headState is what parseHead made of the buffered bytes.
type headState uint8

const (
	headMore  headState = iota // no complete head yet: read on
	headReady                  // cc.req holds a head, or cc.h2c is set
	headEnd                    // the connection closes (answered if need be)
)

// parseHead parses the buffered bytes into cc.req, answering a malformed
// head itself. *started records that a head has begun, from which it must
// complete within HeaderTimeout; first looks for the h2c preface.
func (cc *clientConn) parseHead(first bool, started *bool) headState {
	s := cc.s
	wait := false
	if first && s.cfg.H2C && !s.cfg.NoHTTP2 && cc.in.len() > 0 {
		switch h2PrefaceState(cc.in.bytes()) {
		case 1:
			cc.h2c = true // the HTTP/2 preface: serve hands over
			return headReady
		case 0:
			wait = true // a prefix of it: read on before parsing
		}
	}
	if cc.in.len() == 0 || wait {
		return headMore
	}
	_, err := s.parser.Parse(cc.in.bytes(), &cc.req)
	if err == nil {
		if cc.state.Swap(connBusy) == connShed {
			return headEnd // closed by the idle shedder as it arrived
		}
		if s.closing.Load() {
			cc.rdl.at = 0 // Shutdown moved the deadline: set it anew
		}
		return headReady
	}
	if err != httpwire.ErrNeedMore {
		cc.refuseHead(first, err)
		return headEnd
	}
	if !*started {
		// The head has begun: from now on it must complete within
		// HeaderTimeout, however slowly the bytes trickle in.
		*started = true
		cc.rdl.setRead(cc.c, time.Now().UnixNano(), s.cfg.HeaderTimeout)
	}
	return headMore
}

// refuseHead answers a head the parser refused with err (400 or the
// status the error names); a PROXY header from outside ProxyFrom is
// dropped unanswered.
func (cc *clientConn) refuseHead(first bool, err error) {
	s := cc.s
	if first && len(s.cfg.ProxyFrom) > 0 && looksLikeProxy(cc.in.bytes()) {
		s.ctr.proxyUntrusted.Add(1) // a PROXY header from outside ProxyFrom
		return
	}
	st := 400
	var he *httpwire.Error
	if errors.As(err, &he) && he.Status != 0 {
		st = he.Status
	}
	s.ctr.requests.Add(1)
	start := time.Now()
	cc.writeError(st, requestReason(st), true)
	s.answerBare(cc.clientIP(), start, st, cc.log.body, requestReason(st))
}

// markWait tells the idle shedder, before a read that may wait, whether
// the connection is idle (nothing buffered) or inside a head.
func (cc *clientConn) markWait() {
	if cc.in.len() == 0 {
		if cc.state.CompareAndSwap(connBusy, connIdle) {
			cc.idleAt.Store(cc.now)
		}
	} else {
		cc.state.CompareAndSwap(connIdle, connBusy)
	}
}

// readFailed answers 408 when a read for a begun head ran out of time
// (outside a shutdown); other failures close the connection unanswered.
func (cc *clientConn) readFailed(err error) {
	s := cc.s
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && cc.in.len() > 0 && !s.closing.Load() {
		start := time.Now()
		cc.writeError(408, answerHeaderTimeout, true)
		s.answerBare(cc.clientIP(), start, 408, cc.log.body, answerHeaderTimeout)
	}
}

// isRetryable reports whether a request may be sent to a second node:
// only the safe methods without a body, so a retry can never repeat a side
// effect or need a body that was already streamed away.
func isRetryable(r *httpwire.Request) bool {
	if r.HasBody() {
		return false
	}
	switch string(r.Method) {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// handle routes the request in cc.req, moves it (dispatch.go) and
// finishes it.
func (cc *clientConn) handle() Result {
	s := cc.s
	req := &cc.req
	s.ctr.requests.Add(1)
	head := cc.in.bytes()[:req.HeadLen]
	cc.in.consume(req.HeadLen)
	t := &cc.t
	*t = ticket{start: time.Now()}
	cc.now = t.start.UnixNano()
	if s.cfg.AccessLog != nil {
		cc.captureLog(req, t.start)
	}

	if req.IsMethod("CONNECT") {
		return s.finish(t, Result{Status: cc.writeError(501, answerNotImplemented, true), Close: true}, cc)
	}
	cc.sent = 0
	cc.setKey(req) // cc.url: the path, or site + path with VHosts (vhost.go)
	t.site = cc.vh.site
	closeConn := req.Close || req.HasBody()
	if internalKey(cc.url, cc.s.cfg.VHosts != nil || cc.s.cfg.CacheKeys) { // the nodes' /.shoal/ space is not public
		return s.finish(t, Result{Status: cc.writeError(404, answerInternalPath, closeConn), Close: closeConn}, cc)
	}
	// The policy request lives in cc: passed to the policy interface it
	// would escape, and allocate, if it were a local.
	cc.pr = policy.Request{URL: cc.url, Size: -1, Conn: cc.id, Holder: cc.holder}
	routed := s.route(t, &cc.pr)
	if cc.rawHeld {
		cc.rawHeld = false
		s.cl.Release(cc.id)
	}
	if !routed {
		return s.finish(t, Result{Status: cc.writeError(503, answerNoNode, closeConn), Close: closeConn}, cc)
	}
	if cc.asked {
		cc.asked = false
		s.tagAsked(cc.url)
	}
	cc.holder = t.d.Node
	x := &cc.x
	*x = Exchange{Req: req, Head: head, Decision: t.d, Backend: t.b, Policy: &cc.pr, cc: cc}
	res := cc.dispatch(t, x)
	if res.Retry {
		res = Result{Status: cc.writeError(502, answerNodeError, closeConn), Close: closeConn, Err: res.Err}
	}
	// A response that went out with keep-alive just as Shutdown began is
	// not followed by a close: the client may already be sending its next
	// request, which readHead waits for and answers with "Connection:
	// close" (closing it unread would reset it).
	return s.finish(t, res, cc)
}

func (cc *clientConn) countPath(name string) {
	if name != cc.pathName || cc.pathCtr == nil {
		cc.pathName = name
		cc.pathCtr = cc.s.pathCounter(name)
	}
	cc.pathCtr.Add(1)
}

// writeError sends a small canned answer made by the front itself and
// returns its status, counted by class and reason why (answers.go) and
// kept for the access log line. close adds "Connection: close" (the
// caller closes).
func (cc *clientConn) writeError(status int, why answerReason, close bool) int {
	s := cc.s
	text := httpwire.StatusText(status)
	out := httpwire.AppendStatusLine(cc.out[:0], status)
	out = append(out, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(text)+1), 10)
	out = append(out, "\r\n"...)
	if close {
		out = append(out, "Connection: close\r\n"...)
	}
	out = append(out, "\r\n"...)
	out = append(out, text...)
	out = append(out, '\n')
	cc.out = out[:0]
	s.ctr.countAnswer(status, why)
	cc.log.body = int64(len(text) + 1)
	cc.log.reason = why
	cc.wdl.setWrite(cc.c, cc.now, s.cfg.WriteTimeout)
	cc.write(out)
	return status
}

// write sends b to the client, counting the bytes.
func (cc *clientConn) write(b []byte) error {
	var n int
	var err error
	if cc.io.Active() {
		n, err = cc.io.Write(b, nil)
	} else {
		n, err = cc.c.Write(b)
	}
	cc.s.ctr.bytesOut.Add(uint64(n))
	cc.sent += int64(n)
	return err
}

// writev sends a then b in one system call (writev) when b is not empty.
func (cc *clientConn) writev(a, b []byte) error {
	if len(b) == 0 {
		return cc.write(a)
	}
	if cc.tls && len(a)+len(b) <= cap(a) {
		// One TLS record instead of two (writev cannot gather records);
		// b is never in a's array (it is a node connection's buffer).
		return cc.write(append(a, b...))
	}
	if cc.io.Active() {
		n, err := cc.io.Write(a, b)
		cc.s.ctr.bytesOut.Add(uint64(n))
		cc.sent += int64(n)
		return err
	}
	cc.vec[0], cc.vec[1] = a, b
	cc.bufs = cc.vec[:]
	n, err := cc.bufs.WriteTo(cc.c)
	cc.vec[0], cc.vec[1] = nil, nil
	cc.s.ctr.bytesOut.Add(uint64(n))
	cc.sent += n
	return err
}

// redirect answers 302 to the chosen node's URL with the request's path.
func (cc *clientConn) redirect(x *Exchange) Result {
	req := x.Req
	closeConn := req.Close || req.HasBody() || cc.s.closing.Load()
	out := httpwire.AppendStatusLine(cc.out[:0], 302)
	out = append(out, "Location: "...)
	base := x.Backend.URL
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	out = append(out, base...)
	out = append(out, originForm(req.Target)...)
	out = append(out, "\r\nContent-Length: 0\r\n"...)
	out = appendHeadEnd(out, closeConn, req.Minor)
	cc.out = out[:0]
	cc.wdl.setWrite(cc.c, cc.now, cc.s.cfg.WriteTimeout)
	cc.s.ctr.status[3].Add(1)
	cc.log.body = 0
	if err := cc.write(out); err != nil {
		return Result{Status: 302, Close: true, Err: err}
	}
	return Result{Status: 302, Close: closeConn}
}

// appendHeadEnd ends a response head the front writes: "Connection:
// close" when the connection closes after it, "keep-alive" for an HTTP/1.0
// client it keeps, then the empty line.
func appendHeadEnd(out []byte, closeConn bool, minor int) []byte {
	if closeConn {
		out = append(out, "Connection: close\r\n"...)
	} else if minor == 0 {
		out = append(out, "Connection: keep-alive\r\n"...)
	}
	return append(out, "\r\n"...)
}

// originForm returns the path and query of a request-target: itself for
// origin-form and "*", the part after the authority for absolute-form, "/"
// for anything else.
func originForm(t []byte) []byte {
	if len(t) > 0 && t[0] == '/' || len(t) == 1 && t[0] == '*' {
		return t
	}
	for i := 0; i+2 < len(t); i++ {
		if t[i] == ':' && t[i+1] == '/' && t[i+2] == '/' {
			for j := i + 3; j < len(t); j++ {
				if t[j] == '/' || t[j] == '?' {
					if t[j] == '?' {
						return append([]byte("/"), t[j:]...)
					}
					return t[j:]
				}
			}
			break
		}
	}
	return []byte("/")
}
