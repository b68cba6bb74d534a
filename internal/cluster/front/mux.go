package front

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/cluster/policy"
)

// The dispatch of multiplexed streams (HTTP/2 here, HTTP/3 in h3.go). A
// stream's request is written out as an HTTP/1.1 head and parsed by the
// same strict parser as a client's, so every protocol gets the same
// checks, the same content key and the same rewrite for the node; it is
// then routed by the dispatch core (route, release, reroute, finish) and
// relayed over the pooled node connections like an HTTP/1.1 request, with
// the same one retry. Only the client side differs: the response goes to
// a muxSink, the request body comes from a muxBody.
//
// A stream is always relayed. The handoff paths move a TCP socket, and a
// stream's socket carries other streams too: a request the configured
// path would hand off is relayed and counted in
// HandoffStats.FallbackStream. A redirect path answers 302 as over
// HTTP/1.1.

// Protocols a request arrives by.
const (
	protoH1 = iota
	protoH2
	protoH3
	numProtos
)

// protoNames are the protocols' names in logs ("HTTP/2.0" as nginx writes it).
var protoNames = [numProtos]string{"HTTP/1.1", "HTTP/2.0", "HTTP/3.0"}

// muxSink is where a stream's response goes.
type muxSink interface {
	// respond sends the response head and as much of body as can go
	// without waiting; end: the body ends with it. It returns the rest
	// of body, which the caller sends with data, and uses fields only
	// before it returns.
	respond(status int, fields []httpwire.Header, body []byte, end bool) (rest []byte, err error)
	// data sends body bytes, waiting for the client as needed; end ends
	// the response.
	data(p []byte, end bool) error
	// interim sends a 1xx head (100 Continue).
	interim(status int) error
	// cancel ends a response cut short (its stream is reset).
	cancel()
}

// muxBody is a stream's request body.
type muxBody interface {
	// next returns the next piece, valid until the next call; io.EOF
	// after the last.
	next() ([]byte, error)
}

var errBodyTimeout = errors.New("request body: no data for the header timeout")

// muxStream is one stream's request on its way through the dispatch core,
// with the buffers reused for the next stream that takes it.
type muxStream struct {
	s     *Server
	proto int
	conn  uint64 // the connection's id, for the policy
	ip    string
	tls   bool
	sink  muxSink
	body  muxBody // nil: no request body

	head    []byte // the request as an HTTP/1.1 head
	req     httpwire.Request
	out     []byte
	tokens  [][]byte
	tok     uint64 // the relayed request's token (echo.go)
	fields  []httpwire.Header
	buf     []byte // a response body that arrived whole
	url     string
	vh      vhostState
	pr      policy.Request
	t       ticket
	log     logReq
	sent    int64 // response body bytes given to the sink
	started bool  // the response head went out
	now     int64
}

// reset readies m for a new stream.
func (m *muxStream) reset(s *Server, proto int, conn uint64, ip string, tls bool) {
	m.s, m.proto, m.conn, m.ip, m.tls = s, proto, conn, ip, tls
	m.sent, m.started = 0, false
	m.log.captured = false
	m.t = ticket{start: time.Now()}
	m.now = m.t.start.UnixNano()
}

// run answers the request in m.head: parsed, keyed, routed and moved
// like an HTTP/1.1 request (clientConn.handle), then finished.
func (m *muxStream) run() {
	s := m.s
	s.ctr.requests.Add(1)
	s.ctr.protoReqs[m.proto].Add(1)
	if _, err := s.parser.Parse(m.head, &m.req); err != nil {
		st := 400
		var he *httpwire.Error
		if errors.As(err, &he) && he.Status != 0 {
			st = he.Status
		}
		m.finish(m.fail(st, requestReason(st), err))
		return
	}
	if s.cfg.AccessLog != nil {
		m.log.capture(&m.req, m.t.start, protoNames[m.proto], s.cfg.AccessLog.format)
	}
	if m.req.IsMethod("CONNECT") {
		m.finish(m.fail(501, answerNotImplemented, nil))
		return
	}
	if s.cfg.CacheKeys {
		m.url = cacheKey(&m.req, m.url, &m.vh)
	} else {
		m.url = contentKey(s.cfg.VHosts, &m.req, m.url, &m.vh)
	}
	m.t.site = m.vh.site
	if internalKey(m.url, s.cfg.VHosts != nil || s.cfg.CacheKeys) {
		m.finish(m.fail(404, answerInternalPath, nil))
		return
	}
	m.pr = policy.Request{URL: m.url, Size: -1, Conn: m.conn, Holder: -1}
	if !s.route(&m.t, &m.pr) {
		m.finish(m.fail(503, answerNoNode, nil))
		return
	}
	m.finish(m.dispatch())
}

// answer sends a canned status for a request refused before it could be
// parsed (a head over the limits).
func (m *muxStream) answer(status int) {
	m.s.ctr.requests.Add(1)
	m.s.ctr.protoReqs[m.proto].Add(1)
	m.finish(m.fail(status, requestReason(status), nil))
}

// dispatch moves the routed request: a 302 on the redirect path, else
// relay (a handoff path's fallback, counted once), with the one retry of
// clientConn.dispatch.
func (m *muxStream) dispatch() Result {
	s, t := m.s, &m.t
	p := s.cfg.Path
	if _, ok := p.(redirectPath); ok && s.cfg.Choose == nil {
		t.path = p
		s.pathCounter(p.Name()).Add(1)
		return m.redirect()
	}
	switch p.(type) {
	case relayPath, localPath: // the local path's streams are relayed, not a handoff's fallback
		if s.cfg.Choose != nil {
			s.ctr.fallback(fallbackStream)
		}
	default:
		s.ctr.fallback(fallbackStream)
	}
	t.path = relayPath{}
	s.pathCounter("relay").Add(1)
	for {
		res := m.relay()
		t.pr.Status = res.Status
		s.release(t)
		if res.NodeFailed {
			s.cl.Failed(t.b, res.Err)
		}
		if !res.Retry || t.retried || !isRetryable(&m.req) || !s.reroute(t) {
			if res.Retry {
				res = m.fail(502, answerNodeError, res.Err)
			}
			return res
		}
	}
}

// redirect answers 302 to the node's own URL with the request's path.
func (m *muxStream) redirect() Result {
	base := m.t.b.URL
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	loc := append(append(m.buf[:0], base...), originForm(m.req.Target)...)
	m.fields = append(m.fields[:0], httpwire.Header{Name: []byte("location"), Value: loc},
		httpwire.Header{Name: []byte("content-length"), Value: []byte("0")})
	m.s.ctr.status[3].Add(1)
	m.started = true
	m.log.body = 0
	if _, err := m.sink.respond(302, m.fields, nil, true); err != nil {
		return Result{Status: 302, Err: err}
	}
	return Result{Status: 302}
}

// fail answers status with the front's canned text, counted by reason
// why (answers.go), or, once a response has begun, cuts it short; it
// returns the Result to finish with.
func (m *muxStream) fail(status int, why answerReason, err error) Result {
	s := m.s
	if m.started {
		m.sink.cancel()
		return Result{Status: status, Err: err}
	}
	m.started = true
	text := httpwire.StatusText(status)
	m.buf = append(append(m.buf[:0], text...), '\n')
	var n [20]byte
	m.fields = append(m.fields[:0], httpwire.Header{Name: []byte("content-type"), Value: []byte("text/plain; charset=utf-8")},
		httpwire.Header{Name: []byte("content-length"), Value: strconv.AppendInt(n[:0], int64(len(m.buf)), 10)})
	s.ctr.countAnswer(status, why)
	m.log.body = int64(len(m.buf))
	m.log.reason = why
	rest, werr := m.sink.respond(status, m.fields, m.buf, true)
	if werr == nil && len(rest) > 0 {
		werr = m.sink.data(rest, true)
	}
	m.sent += int64(len(m.buf))
	if err == nil {
		err = werr
	}
	return Result{Status: status, Err: err}
}

// finish closes the stream's ticket (Server.finish for a stream): the
// policy's Done, the Observer, the access log.
func (m *muxStream) finish(res Result) {
	s, t := m.s, &m.t
	s.release(t)
	o, l := s.cfg.Observer, s.cfg.AccessLog
	if o == nil && l == nil {
		return
	}
	name := ""
	if t.path != nil {
		name = t.path.Name()
	}
	end := time.Now()
	if l != nil {
		m.log.write(l, m.ip, s.cl.Policy().Name(), res, t.b, name, t.retried, end)
	}
	if o != nil {
		s.observe(t, res, name, m.sent, protoNames[m.proto], end)
	}
}

// relay moves the request to the chosen node over a pooled connection and
// the response back (clientConn.relay for a stream).
func (m *muxStream) relay() Result {
	s := m.s
	u := s.upstream(m.t.b)
	if why, err := s.acquireNode(u); err != nil {
		return m.fail(503, why, err)
	}
	held := true
	defer func() {
		if held {
			u.lim.release()
		}
	}()
	s.relaying.Add(1)
	defer s.relaying.Add(-1)
	var expect bool
	m.tok = newToken()
	m.out, m.tokens, expect = appendNodeHead(m.out[:0], m.tokens[:0], &m.req, m.ip, m.t.d, m.t.b, m.tok)
	if len(m.out) > s.cfg.MaxHeadBytes+httpwire.ForwardHeadroom {
		return m.fail(431, answerBadRequest, fmt.Errorf("node %s: rewritten head of %d bytes", u.b.URL, len(m.out)))
	}
	nc, res, ok := m.exchange(u, expect)
	if !ok {
		return res
	}
	return m.respond(u, nc, &held)
}

// exchange sends the request on a pooled (or new) connection and reads the
// response head, redialling once for a pooled connection the node had
// closed; ok false: res says how it failed.
func (m *muxStream) exchange(u *upstream, expect bool) (nc *nodeConn, res Result, ok bool) {
	s := m.s
	replayable := m.body == nil
	nc = u.pool.get(m.now)
	for nc != nil && !nc.fit(replayable) {
		nc.c.Close()
		s.ctr.freshRedials.Add(1)
		nc = u.pool.get(m.now)
	}
	reused := nc != nil
	for {
		var err error
		if nc == nil {
			if nc, err = s.dialNode(u); err != nil {
				return nil, Result{Retry: true, NodeFailed: true, Err: fmt.Errorf("node %s: %w", u.b.URL, err)}, false
			}
		}
		if err = m.send(nc, expect); err != nil {
			nc.c.Close()
			nc = nil
			if replayable && reused {
				s.ctr.freshRedials.Add(1)
				u.pool.drain()
				reused = false
				continue
			}
			err = fmt.Errorf("node %s: send: %w", u.b.URL, err)
			if replayable {
				return nil, Result{Retry: true, NodeFailed: true, Err: err}, false
			}
			var bb errBodyBroken
			res = m.fail(502, answerNodeError, err)
			res.NodeFailed = !errors.As(err, &bb) // a client's broken body says nothing of the node
			return nil, res, false
		}
		got, err := readNodeHead(nc, m.now, s.cfg.ResponseTimeout, nil)
		if err == nil && nc.answered(m.tok) {
			return nc, Result{}, true
		}
		nc.c.Close()
		nc = nil
		if err == nil {
			err, got = errNotOurs, !reused // as in clientConn.relay
		}
		err = fmt.Errorf("node %s: response: %w", u.b.URL, err)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return nil, m.fail(504, answerNodeTimeout, err), false
		case got:
			return nil, m.fail(502, answerNodeError, err), false
		case replayable && reused:
			s.ctr.freshRedials.Add(1)
			u.pool.drain()
			reused = false
			continue
		case replayable:
			return nil, Result{Retry: true, NodeFailed: true, Err: err}, false
		}
		res = m.fail(502, answerNodeError, err)
		res.NodeFailed = true
		return nil, res, false
	}
}

// send writes the request head and streams the body from the client, in
// chunked coding when the client gave no length (appendH2Head said so).
func (m *muxStream) send(nc *nodeConn, expect bool) error {
	s := m.s
	if m.body == nil {
		return nc.sendHead(s, m.out, m.now)
	}
	nc.wdl.setWrite(nc.c, m.now, s.cfg.ResponseTimeout)
	if _, err := nc.c.Write(m.out); err != nil {
		return err
	}
	if expect {
		if err := m.sink.interim(100); err != nil {
			return errBodyBroken{err}
		}
	}
	for {
		p, err := m.body.next()
		if len(p) > 0 {
			s.ctr.bytesIn.Add(uint64(len(p)))
			nc.wdl.setWrite(nc.c, time.Now().UnixNano(), s.cfg.ResponseTimeout)
			if werr := m.writeBody(nc, p); werr != nil {
				return errBodyBroken{werr}
			}
		}
		if err == io.EOF {
			if m.req.Chunked {
				if _, werr := nc.c.Write([]byte("0\r\n\r\n")); werr != nil {
					return errBodyBroken{werr}
				}
			}
			return nil
		}
		if err != nil {
			return errBodyBroken{err}
		}
	}
}

// writeBody writes one piece of the request body to the node, framed as a
// chunk when the body is chunked.
func (m *muxStream) writeBody(nc *nodeConn, p []byte) error {
	if !m.req.Chunked {
		_, err := nc.c.Write(p)
		return err
	}
	var hdr [20]byte
	b := strconv.AppendInt(hdr[:0], int64(len(p)), 16)
	b = append(b, '\r', '\n')
	bufs := net.Buffers{b, p, []byte("\r\n")}
	_, err := bufs.WriteTo(nc.c)
	return err
}
