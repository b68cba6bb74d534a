package front

import (
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"
)

// The dispatch core. Whatever path moves a request — relay or redirect on
// the connection's goroutine, passfd or repair from the raw accept loop, a
// connection a node handed back — it is routed once (route: the policy picks
// a node and the ticket records it) and finished once (finish: the policy's
// Done, the counters, the observation and the access log). The paths are
// movers behind two seams: DataPath.Serve for a client connection, and
// rawMover.moveRaw for a bare descriptor; a handoff that cannot happen falls
// back to relay in one place (clientConn.dispatch) or, from a descriptor, to
// the normal path (Server.serveFD). Like Caddy's reverse proxy, selection and
// the one retry live in one loop, and the paths know nothing of the policy.

// ticket is one request routed to a node: route opens it, finish closes it.
type ticket struct {
	b *control.Backend // the node; nil when refused before one was chosen
	// d is the policy's decision: the node, and what it asks of the path
	// (Handoff, Fetch) for paths that pass it on.
	d     policy.Decision
	pr    *policy.Request // the request as the policy saw it (for Done)
	start time.Time       // when routing began (zero on the raw paths without an Observer)
	path  DataPath        // the path that moved it; nil before
	site  string          // the request's site with Config.VHosts
	// retried: moved to a second node after the first failed; released:
	// the policy was told the node's work is over (cluster Done).
	retried, released bool
}

// route asks the policy for a node for pr and opens t on it; false when no
// node can take the request (the caller answers 503, or lets the normal
// path do so).
func (s *Server) route(t *ticket, pr *policy.Request) bool {
	d, b := s.cl.Pick(pr)
	t.d, t.pr, t.released = d, pr, false
	if d.Node < 0 || b == nil {
		t.b = nil
		return false
	}
	t.b = b
	return true
}

// reroute moves a released ticket to another node (the one retry).
func (s *Server) reroute(t *ticket) bool {
	d, b := s.cl.PickExcept(t.pr, t.b.Index)
	if d.Node < 0 || b == nil {
		return false
	}
	t.d, t.b, t.released, t.retried = d, b, false, true
	s.ctr.retries.Add(1)
	return true
}

// release tells the policy the node's work on t is over, once.
func (s *Server) release(t *ticket) {
	if t.b != nil && !t.released {
		t.released = true
		s.cl.Done(t.b, t.pr)
	}
}

// finish closes t with the answer res: the policy's Done if not yet, the
// counters, the Observer and, for a client connection cc, the access log. A
// connection's requests were counted as they arrived (so a client that
// reads its answer sees them counted); cc nil is a request a path moved
// from a bare descriptor, counted here.
func (s *Server) finish(t *ticket, res Result, cc *clientConn) Result {
	s.release(t)
	name := ""
	if t.path != nil {
		name = t.path.Name()
	}
	if cc == nil {
		s.ctr.requests.Add(1)
		s.pathCounter(name).Add(1)
	}
	o, l := s.cfg.Observer, s.cfg.AccessLog
	if o == nil && (l == nil || cc == nil) {
		return res
	}
	end := time.Now()
	if l != nil && cc != nil {
		cc.writeLog(res, t.b, name, t.retried, end)
	}
	if o != nil {
		var n int64
		if cc != nil {
			n = cc.sent
		}
		s.observe(t, res, name, n, protoNames[protoH1], end)
	}
	return res
}

// observe tells the Observer about the request t finished at end with res
// on path name, n bytes to the client over proto.
func (s *Server) observe(t *ticket, res Result, name string, n int64, proto string, end time.Time) {
	ob := Observation{Node: -1, Path: name, Status: res.Status, Retried: t.retried, Elapsed: end.Sub(t.start),
		Site: t.site, Bytes: n, Proto: proto}
	if t.b != nil {
		ob.Node, ob.NodeURL = t.b.Index, t.b.URL
	}
	s.cfg.Observer.Observe(ob)
}

// dispatch moves the routed request x by its data path, relays it when the
// path cannot move it without loss (the one place a handoff falls back to
// relay on a client connection), and sends it once to another node when the
// node failed before answering.
func (cc *clientConn) dispatch(t *ticket, x *Exchange) Result {
	s := cc.s
	for {
		p, why := cc.pathFor(t.d, x)
		if t.path == nil {
			cc.countPath(p.Name())
			if why != fallbackNone {
				s.ctr.fallback(why) // once per request, not per attempt
			}
		}
		t.path = p
		var res Result
		if cc.relayOnce {
			// The raw accept path tried this request's handoff and
			// failed (counted there): relay it, hand off the next ones.
			cc.relayOnce = false
			res = cc.relay(x)
		} else if res = p.Serve(x); res.fallback != fallbackNone {
			s.ctr.fallback(res.fallback)
			res = cc.relay(x)
		}
		t.pr.Status = res.Status // the node's status on relay (0 after a handoff): tables drop 404s
		s.release(t)
		if res.NodeFailed {
			s.cl.Failed(t.b, res.Err)
		}
		if !res.Retry || t.retried || !isRetryable(x.Req) || !s.reroute(t) {
			return res
		}
		// The node failed before any response byte: once, elsewhere.
		cc.holder = t.d.Node
		x.Decision, x.Backend, x.Attempt = t.d, t.b, 1
	}
}

// pathFor is the data path for x: the configured one or Choose's pick, and
// relay on a TLS connection, whose session no handoff can move (tls.go).
func (cc *clientConn) pathFor(d policy.Decision, x *Exchange) (DataPath, fallbackReason) {
	s := cc.s
	p := s.cfg.Path
	if s.cfg.Choose != nil {
		p = s.cfg.Choose(d, x)
	}
	if cc.tls {
		return tlsPath(p)
	}
	if cc.proxied {
		// A node given the socket would see the balancer's address, not
		// the client's the PROXY header carried: relay, which tells it.
		if q, why := tlsPath(p); why != fallbackNone {
			return q, fallbackProxy
		}
	}
	return p, fallbackNone
}

// rawMover is a data path that can also move a request from a bare
// descriptor, without a net.Conn or a goroutine: the raw accept loop
// (fastaccept.go) and the redispatch of connections nodes hand back
// (passfd.go) use it. moveRaw must not block, and leaves t to the caller
// unless it reports rawPending.
type rawMover interface {
	DataPath
	moveRaw(s *Server, t *ticket, m *rawMove) rawOutcome
}

// rawMove is a request on a bare descriptor.
type rawMove struct {
	fd   int
	data []byte // the bytes read so far: the head and what followed it
	id   uint64 // the connection's id; 0 until routed
	// holder is the node that held the connection (-1: a new one); moves
	// what the node said it had (handoff.FDHeader.Moves).
	holder int
	moves  uint32
	// returned: handed back by a node, not accepted.
	returned bool
}

// rawOutcome is what a rawMover did with a request.
type rawOutcome uint8

const (
	rawMoved   rawOutcome = iota // moved: the caller finishes the ticket
	rawPending                   // sent; the path finishes the ticket when the node answers
	rawNormal                    // not moved: the normal path routes it again
	rawRelay                     // not moved: the normal path relays it (the fallback is counted)
	rawGone                      // not moved, and the descriptor is closed
)

// rawRoute is the reused state of routing from a bare descriptor: the
// parsed head, the policy's view and the ticket live here so that passing
// them on does not allocate.
type rawRoute struct {
	req httpwire.Request
	pr  policy.Request
	url string // the last content key, reused while it repeats
	vh  vhostState
	t   ticket
	m   rawMove
}

// dispatchRaw routes the request in rr.m and moves it by mv; what mv does
// not move goes to the normal path, which answers or relays it.
func (s *Server) dispatchRaw(mv rawMover, rr *rawRoute) {
	m, t := &rr.m, &rr.t
	out := rawNormal
	if s.routeRaw(rr) {
		t.path = mv
		out = mv.moveRaw(s, t, m)
		if out != rawPending {
			s.release(t)
		}
	}
	switch out {
	case rawMoved:
		if m.returned {
			s.ctr.redispatched.Add(1)
		} else {
			s.ctr.connsAccepted.Add(1)
			s.ctr.fastPassed.Add(1)
		}
		s.finish(t, Result{}, nil)
	case rawNormal, rawRelay:
		if !m.returned {
			s.ctr.fallback(fallbackFast)
		}
		s.serveFD(m, out == rawRelay)
	}
}

// routeRaw parses the head in rr.m.data and routes it; false, leaving the
// request to the normal path, when there is no complete head, it is a
// CONNECT, it asks for the nodes' own space, no node can take it, or it is
// a returned connection's request with a body.
func (s *Server) routeRaw(rr *rawRoute) bool {
	m := &rr.m
	rr.t = ticket{}
	if len(m.data) == 0 {
		return false
	}
	req := &rr.req
	if _, err := s.parser.Parse(m.data, req); err != nil || req.IsMethod("CONNECT") || m.returned && req.HasBody() {
		return false
	}
	if s.cfg.Observer != nil {
		rr.t.start = time.Now()
	}
	if m.id == 0 {
		m.id = s.nextConn.Add(1)
	}
	if s.cfg.CacheKeys {
		rr.url = cacheKey(req, rr.url, &rr.vh)
	} else {
		rr.url = contentKey(s.cfg.VHosts, req, rr.url, &rr.vh)
	}
	if internalKey(rr.url, s.cfg.VHosts != nil || s.cfg.CacheKeys) {
		if !m.returned {
			m.id = 0 // the normal path answers 404 under an id of its own
		}
		return false
	}
	rr.pr = policy.Request{URL: rr.url, Size: -1, Conn: m.id, Holder: m.holder}
	rr.t.site = rr.vh.site
	return s.route(&rr.t, &rr.pr)
}

// serveFD serves the descriptor of m on the normal path (its own goroutine)
// with the bytes already read from it, under m.id when it has one; relay
// makes its first request relayed without a handoff. An accepted connection
// meets the connection limits (limits.go); a returned one was the front's
// already and keeps its holder.
func (s *Server) serveFD(m *rawMove, relay bool) {
	c, err := handoff.WrapFD(m.fd) // closes fd
	if err != nil {
		if m.returned {
			s.ctr.returnRefused.Add(1)
		} else {
			s.ctr.connsAccepted.Add(1)
			s.logf("front: accept: %v", err)
		}
		return
	}
	var cc *clientConn
	if m.returned {
		if cc = s.newClientConn(c); cc == nil {
			s.ctr.returnRefused.Add(1) // shutting down: newClientConn closed it
			return
		}
		s.ctr.connsAccepted.Add(^uint64(0)) // a returning connection, not a new one
		cc.holder, cc.moves = m.holder, m.moves
		cc.asked = s.share.Load() != nil
	} else if cc = s.acceptConn(c); cc == nil {
		return // refused by a limit, or shutting down: closed
	}
	if m.id != 0 {
		cc.id = m.id // the policy saw this id already
	}
	if len(m.data) > len(cc.in.b) { // a node with a larger head limit
		cc.in.b = make([]byte, len(m.data)+4096)
	}
	cc.in.w = copy(cc.in.b, m.data)
	cc.relayOnce = relay
	cc.rawHeld = !m.returned && m.id != 0 // released at its next pick if held (held.go)
	go cc.serve()
}
