package front

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/base/vhost"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/policy"
)

var (
	errNodeHeadTooLarge = errors.New("response head larger than the node buffer")
	errUpgrade          = errors.New("node switched protocols without being asked")
	errNotOurs          = errors.New("answer without the request's token (sent while the connection idled)")
)

// acquireNode takes one of u's request slots (Config.MaxConn),
// waiting in its queue up to Config.QueueTimeout, and counts the wait or
// the refusal. On failure it returns the 503 answer's reason and the error.
func (s *Server) acquireNode(u *upstream) (why answerReason, err error) {
	queued, err := u.lim.acquire(s.cfg.QueueTimeout, s.done)
	if queued {
		s.ctr.queued.Add(1)
	}
	if err == nil {
		return 0, nil
	}
	why = answerQueueTimeout
	if err == errQueueFull {
		s.ctr.queueFull.Add(1)
		why = answerQueueFull
	} else {
		s.ctr.queueTimeouts.Add(1)
	}
	return why, fmt.Errorf("node %s: %w", u.b.URL, err)
}

// relay forwards x over a pooled connection to x.Backend and streams the
// response back. The request head goes out in one write (with the start of
// the body when it is already buffered); a small response comes back in one
// writev (head and body).
func (cc *clientConn) relay(x *Exchange) Result {
	s := cc.s
	req := x.Req
	u := s.upstream(x.Backend)
	why, err := s.acquireNode(u)
	if err != nil {
		closeConn := req.Close || req.HasBody()
		return Result{Status: cc.writeError(503, why, closeConn), Close: closeConn, Err: err}
	}
	held := true // the node slot; relayResponse gives it back early for a streamed body
	defer func() {
		if held {
			u.lim.release()
		}
	}()

	s.relaying.Add(1)
	defer s.relaying.Add(-1)
	expect := cc.buildRequest(x)
	if len(cc.out) > s.cfg.MaxHeadBytes+httpwire.ForwardHeadroom {
		// Nodes accept ForwardHeadroom bytes more than the front; a rewrite
		// that outgrew that (a very long node address in Host) is refused
		// here rather than by the node.
		return Result{Status: cc.writeError(431, answerBadRequest, true), Close: true, Err: fmt.Errorf("node %s: rewritten head of %d bytes", u.b.URL, len(cc.out))}
	}
	replayable := !req.HasBody()
	nc, joined := cc.nodeConnFor(u, x, replayable)
	reused := nc != nil
	for {
		if nc == nil {
			if nc, err = cc.dial(u); err != nil {
				return Result{Retry: true, NodeFailed: true, Err: fmt.Errorf("node %s: %w", u.b.URL, err)}
			}
		}
		if joined {
			joined = false // a retry goes on a connection of its own
			err = nc.awaitTurn(cc)
		} else {
			err = cc.sendRequest(x, nc, expect)
		}
		if err != nil {
			cc.endNode(u, nc, false)
			nc = nil
			if replayable && reused {
				// A pooled connection the node had closed: redial once.
				// The idle ones older than it are most likely closed too
				// (idle timeout or restart of the node): drop them all.
				s.ctr.freshRedials.Add(1)
				u.pool.drain()
				reused = false
				continue
			}
			return cc.sendFailed(u, err, replayable)
		}
		got, err := cc.readResponseHead(x, nc)
		if err == nil && nc.answered(cc.tok) {
			break
		}
		cc.endNode(u, nc, false)
		nc = nil
		if err == nil {
			err = errNotOurs
			got = !reused // a fresh connection's wrong token is the node's fault
		}
		err = fmt.Errorf("node %s: response: %w", u.b.URL, err)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			closeConn := req.Close || got
			return Result{Status: cc.writeError(504, answerNodeTimeout, closeConn), Close: closeConn, Err: err}
		case got:
			// A broken head (or interim answers already forwarded).
			return Result{Status: cc.writeError(502, answerNodeError, true), Close: true, Err: err}
		case replayable && reused:
			s.ctr.freshRedials.Add(1)
			u.pool.drain()
			reused = false
			continue
		case replayable:
			return Result{Retry: true, NodeFailed: true, Err: err}
		}
		return Result{Status: cc.writeError(502, answerNodeError, true), Close: true, NodeFailed: true, Err: err}
	}
	return cc.relayResponse(x, u, nc, &held)
}

// nodeConnFor finds the connection x goes to u on: one open for joining
// (pipeline.go), whose answers x then waits its turn for (joined), else a
// pooled one fit to carry it, else nil (the caller dials). A pooled
// connection whose node echoes may lead a pipeline when x may join one.
func (cc *clientConn) nodeConnFor(u *upstream, x *Exchange, replayable bool) (nc *nodeConn, joined bool) {
	s := cc.s
	join, small := pipeable(x)
	join = join && cc.io.Active() // plain TCP clients (sendPiped)
	if join {
		if nc = u.join(cc, cc.out, small); nc != nil {
			s.ctr.pipelined.Add(1)
			return nc, true
		}
	}
	nc = u.pool.get(cc.now)
	for nc != nil && !nc.fit(replayable) {
		// The node sent bytes (or closed) while the connection sat idle:
		// nothing may be read there as the answer to the next request.
		nc.c.Close()
		s.ctr.freshRedials.Add(1)
		nc = u.pool.get(cc.now)
	}
	if nc != nil {
		nc.lead = join && small && nc.unpeeked
	}
	return nc, false
}

// sendFailed answers a request that could not be sent to u and will not be
// sent again on a fresh connection: a request without a body is retried on
// another node; one whose body was (partly) consumed cannot be, and gets
// 400 when the client's chunked body was malformed, 502 otherwise (the node
// counted as failed unless the failure came while streaming the body).
func (cc *clientConn) sendFailed(u *upstream, err error, replayable bool) Result {
	err = fmt.Errorf("node %s: send: %w", u.b.URL, err)
	if replayable {
		return Result{Retry: true, NodeFailed: true, Err: err}
	}
	if errors.Is(err, errBadChunk) {
		// The client's chunked body is malformed: refused before
		// the bad bytes reached the node, whose connection is closed.
		return Result{Status: cc.writeError(400, answerBadRequest, true), Close: true, Err: err}
	}
	var bb errBodyBroken
	return Result{Status: cc.writeError(502, answerNodeError, true), Close: true, NodeFailed: !errors.As(err, &bb), Err: err}
}

func (cc *clientConn) dial(u *upstream) (*nodeConn, error) { return cc.s.dialNode(u) }

// dialNode opens a new connection to u's node.
func (s *Server) dialNode(u *upstream) (*nodeConn, error) {
	c, err := s.dialer.Dial("tcp", u.b.Addr)
	if err != nil {
		return nil, err
	}
	s.ctr.nodeDials.Add(1)
	nc := newNodeConn(c)
	nc.u = u
	return nc, nil
}

// buildRequest writes the request head for the node into cc.out: the
// request line as HTTP/1.1 in origin-form, every header except the hop-by-hop ones (RFC
// 9110 §7.6.1) and Expect (the front answers 100-continue itself), the
// client's address appended to X-Forwarded-For, and Host when an HTTP/1.0
// client sent none. It reports whether the client expects 100-continue.
// The parser has refused a Connection header naming Content-Length,
// Transfer-Encoding or Host, so the fields that frame the body go out as
// they came. An X-Forwarded-For the client named in Connection is dropped
// like any hop-by-hop field and the front's own takes its place, so the
// node always learns the client's address. A Shoal-Fetch from the client is
// dropped and the policy's own added when its decision names a node to
// fetch from (peer fetch, seed 001): nodes believe it from their trusted
// fronts only.
func (cc *clientConn) buildRequest(x *Exchange) (expect bool) {
	cc.tok = newToken()
	cc.out, cc.tokens, expect = appendNodeHead(cc.out[:0], cc.tokens[:0], x.Req, cc.clientIP(), x.Decision, x.Backend, cc.tok)
	return expect
}

// appendNodeHead appends req's head as the node gets it (buildRequest
// says how), for a client at ip, with the request token tok (seqHeader),
// to out; tokens is scratch for the Connection header's names. It reports
// whether the client expects 100-continue before a body.
func appendNodeHead(out []byte, tokens [][]byte, req *httpwire.Request, ip string, d policy.Decision, b *control.Backend, tok uint64) ([]byte, [][]byte, bool) {
	expect := false
	tokens = connTokens(tokens, req.Headers)
	lastXFF := -1
	for i, h := range req.Headers {
		if len(h.Name) == 15 && httpwire.EqualFold(h.Name, "x-forwarded-for") && !dropHeader(h.Name, tokens) {
			lastXFF = i
		}
	}
	out = append(out, req.Method...)
	out = append(out, ' ')
	// Absolute-form ("http://host/p") is meant for forward proxies; a
	// node gets origin-form, and the target's authority as Host in place
	// of the client's (RFC 9112 §3.2.2: the authority wins, and a proxy
	// must not forward the received Host), so the node picks the site
	// the front keyed the request by.
	out = append(out, originForm(req.Target)...)
	out = append(out, " HTTP/1.1\r\n"...)
	authority := vhost.Authority(req.Target)
	if authority != nil {
		out = append(out, "Host: "...)
		out = append(out, authority...)
		out = append(out, "\r\n"...)
	}
	for i, h := range req.Headers {
		if dropHeader(h.Name, tokens) || isFetchHeader(h.Name) || authority != nil && isHostHeader(h.Name) {
			continue
		}
		if len(h.Name) == 6 && httpwire.EqualFold(h.Name, "expect") {
			if httpwire.EqualFold(h.Value, "100-continue") {
				expect = true
			}
			continue
		}
		out = append(out, h.Name...)
		out = append(out, ": "...)
		out = append(out, h.Value...)
		if i == lastXFF {
			out = append(out, ", "...)
			out = append(out, ip...)
		}
		out = append(out, "\r\n"...)
	}
	if lastXFF < 0 && ip != "" {
		out = append(out, "X-Forwarded-For: "...)
		out = append(out, ip...)
		out = append(out, "\r\n"...)
	}
	if f := d.Fetch; f >= 0 && f != d.Node {
		out = append(out, fetchHeader+": "...)
		out = strconv.AppendInt(out, int64(f), 10)
		out = append(out, "\r\n"...)
	}
	if !req.HasHost && authority == nil {
		out = append(out, "Host: "...)
		out = append(out, b.Addr...)
		out = append(out, "\r\n"...)
	}
	out = appendSeq(out, tok)
	return append(out, "\r\n"...), tokens, expect && req.HasBody()
}

// isHostHeader reports a Host field name.
func isHostHeader(name []byte) bool { return len(name) == 4 && httpwire.EqualFold(name, "host") }

// sendRequest writes the head in cc.out and streams the body, if any.
func (cc *clientConn) sendRequest(x *Exchange, nc *nodeConn, expect bool) error {
	s := cc.s
	req := x.Req
	now := cc.now
	if !req.HasBody() {
		return nc.sendHead(s, cc.out, now)
	}
	nc.wdl.setWrite(nc.c, now, s.cfg.ResponseTimeout)
	var pre int
	if req.ContentLength > 0 {
		pre = cc.in.len()
		if int64(pre) > req.ContentLength {
			pre = int(req.ContentLength)
		}
	}
	cc.vec[0], cc.vec[1] = cc.out, cc.in.bytes()[:pre]
	cc.bufs = cc.vec[:]
	_, err := cc.bufs.WriteTo(nc.c)
	cc.vec[0], cc.vec[1] = nil, nil
	cc.in.consume(pre)
	if err != nil {
		return err
	}
	buffered := int64(cc.in.len())
	if expect && (req.Chunked || req.ContentLength > int64(pre)) {
		cc.wdl.setWrite(cc.c, now, s.cfg.WriteTimeout)
		if err := cc.write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
			return err
		}
	}
	p := pipe{dst: nc.c, dstDL: &nc.wdl, src: cc.c, srcBuf: &cc.in, srcDL: &cc.rdl,
		rto: s.cfg.HeaderTimeout, wto: s.cfg.ResponseTimeout, lr: &cc.lr}
	var n int64
	if req.Chunked {
		n, err = p.copyChunked(false)
	} else if rem := req.ContentLength - int64(pre); rem > 0 {
		n, err = p.copyN(rem)
	}
	if n -= buffered; n > 0 {
		s.ctr.bytesIn.Add(uint64(n))
	}
	if err != nil {
		// The body is partly sent: neither side can be reused.
		return errBodyBroken{err}
	}
	return nil
}

// sendHead writes a request head without a body to the node and, when it
// can, waits for the answer in the same step (sendAwait), batched with the
// heads of other requests when enough are in relay (batch.go).
func (nc *nodeConn) sendHead(s *Server, head []byte, now int64) error {
	lead := nc.lead // set by relay for a request that may lead a pipeline
	nc.lead = false
	nc.wdl.setWrite(nc.c, now, s.cfg.ResponseTimeout)
	if nc.raw != nil && nc.in.len() == 0 && nc.in.w < len(nc.in.b) {
		nc.rdl.setRead(nc.c, now, s.cfg.ResponseTimeout)
		batch := s.batch
		if s.relaying.Load() < int64(s.cfg.batchMin) {
			batch = nil // nothing to batch with: do not wait for a round
		}
		if lead && batch != nil { // heads may join it (pipeline.go)
			nc.lead = true
			head = append(nc.pbuf[:0], head...) // a buffer of its own
		}
		return nc.sendAwait(head, batch)
	}
	_, err := nc.c.Write(head)
	return err
}

// errBodyBroken marks a failure while streaming a request body, after
// which the request cannot be replayed on a fresh connection.
type errBodyBroken struct{ error }

func (e errBodyBroken) Unwrap() error { return e.error }

// readResponseHead reads the node's response head into nc.resp, passing
// interim 1xx answers on to HTTP/1.1 clients. got reports whether any byte
// of a response arrived (after which the request cannot be retried).
func (cc *clientConn) readResponseHead(x *Exchange, nc *nodeConn) (got bool, err error) {
	var fwd interimSink
	if x.Req.Minor == 1 {
		fwd = cc
	}
	return readNodeHead(nc, cc.now, cc.s.cfg.ResponseTimeout, fwd)
}

// writeInterim passes a node's 1xx head on to the client.
func (cc *clientConn) writeInterim(head []byte) error {
	cc.wdl.setWrite(cc.c, time.Now().UnixNano(), cc.s.cfg.WriteTimeout)
	return cc.write(head)
}

// interimSink takes the 1xx heads a node sends before its answer.
type interimSink interface{ writeInterim(head []byte) error }

// readNodeHead reads the node's response head into nc.resp within rto of
// now, giving interim 1xx heads to fwd (dropped when nil). got reports
// whether any byte of a response arrived (after which the request cannot
// be retried).
func readNodeHead(nc *nodeConn, now int64, rto time.Duration, fwd interimSink) (got bool, err error) {
	nc.rdl.setRead(nc.c, now, rto)
	for {
		if nc.in.len() > 0 {
			got = true
			n, err := httpwire.ParseResponse(nc.in.bytes(), &nc.resp, 0)
			if err == nil {
				st := nc.resp.Status
				if st == 101 {
					return true, errUpgrade
				}
				if st < 200 {
					if fwd != nil {
						if err := fwd.writeInterim(nc.in.bytes()[:n]); err != nil {
							return true, err
						}
					}
					nc.in.consume(n)
					continue
				}
				return true, nil
			}
			if err != httpwire.ErrNeedMore {
				return true, err
			}
		}
		var n int
		var err error
		if nc.awaited { // sendAwait already read (or failed to)
			nc.awaited = false
			n, err = nc.rn, nc.rerr
		} else {
			n, err = nc.in.fill(nc.c)
		}
		if n > 0 {
			continue
		}
		if err == errBufFull {
			return true, errNodeHeadTooLarge
		}
		if err != nil {
			return got, err
		}
	}
}

// relayResponse sends the parsed response head (rewritten) and streams the
// body to the client, then pools or closes the node connection. A body not
// yet wholly in the node buffer gives the node slot (*held) back first: the
// node's work is done, and the rest moves at the client's pace, which must
// not decide how many requests the node may take.
func (cc *clientConn) relayResponse(x *Exchange, u *upstream, nc *nodeConn, held *bool) Result {
	s := cc.s
	req := x.Req
	resp := &nc.resp
	noBody := resp.NoBody() || req.IsMethod("HEAD")
	strip := !noBody && resp.Chunked && req.Minor == 0
	closeClient := req.Close || s.closing.Load() || (!noBody && resp.UntilClose) || strip || cc.closeAfter
	nodeReuse := !resp.Close

	out := cc.responseHead(resp, strip, closeClient, req.Minor)
	cc.out = out
	nc.in.consume(resp.HeadLen)
	s.ctr.status[resp.Status/100].Add(1)
	if resp.Status == 200 && resp.ContentLength >= 0 {
		x.Policy.Size = resp.ContentLength // the object's size, for Done (cluster/sizes.go)
	}
	if !noBody && (resp.ContentLength < 0 || resp.ContentLength > int64(nc.in.len())) {
		if *held {
			*held = false
			u.lim.release()
		}
		s.ctr.streaming.Add(1)
		defer s.ctr.streaming.Add(-1)
	}

	now := time.Now().UnixNano()
	cc.now = now
	cc.log.headAt, cc.log.body = now, 0
	cc.wdl.setWrite(cc.c, now, s.cfg.WriteTimeout)
	p := pipe{dst: cc.c, dstDL: &cc.wdl, src: nc.c, srcBuf: &nc.in, srcDL: &nc.rdl,
		rto: s.cfg.ResponseTimeout, wto: s.cfg.WriteTimeout, lr: &cc.lr}
	var err error
	var n int64
	status := resp.Status // nc (and resp in it) belongs to the pool after put
	ended := false        // endNode was called
	switch {
	case noBody:
		if nc.piped { // the next answer on nc need not wait for this write
			cc.endNode(u, nc, nodeReuse)
			ended = true
		}
		err = cc.write(out)
	case nc.piped && resp.ContentLength >= 0 && int64(nc.in.len()) >= resp.ContentLength:
		cc.log.body = resp.ContentLength
		err = cc.sendPiped(u, nc, out, int(resp.ContentLength), nodeReuse)
		ended = true
	case resp.ContentLength >= 0:
		avail := nc.in.len()
		if int64(avail) > resp.ContentLength {
			avail = int(resp.ContentLength)
		}
		err = cc.writev(out, nc.in.bytes()[:avail])
		nc.in.consume(avail)
		cc.log.body = int64(avail)
		if rem := resp.ContentLength - int64(avail); err == nil && rem > 0 {
			n, err = p.copyN(rem)
		}
	case resp.Chunked:
		if err = cc.write(out); err == nil {
			n, err = p.copyChunked(strip)
		}
	default:
		nodeReuse = false
		if err = cc.write(out); err == nil {
			n, err = p.copyUntilClose()
		}
	}
	s.ctr.bytesOut.Add(uint64(n))
	cc.log.body += n
	cc.sent += n
	if !ended {
		if n > 0 { // streamed through pipe: the clock moved on
			cc.now = time.Now().UnixNano()
		}
		cc.endNode(u, nc, err == nil && nodeReuse)
	}
	if err != nil {
		return Result{Status: status, Close: true, Err: fmt.Errorf("node %s: body: %w", u.b.URL, err)}
	}
	return Result{Status: status, Close: closeClient}
}

// responseHead writes the head of resp as the client gets it into cc.out:
// hop-by-hop fields dropped, Transfer-Encoding too when strip de-chunks
// the body for an HTTP/1.0 client, Alt-Svc added over TLS, and the
// connection's fate (closeClient) for an HTTP/1.minor client.
func (cc *clientConn) responseHead(resp *httpwire.ResponseHead, strip, closeClient bool, minor int) []byte {
	cc.tokens = connTokens(cc.tokens[:0], resp.Headers)
	out := append(cc.out[:0], resp.StatusLine...)
	out = append(out, "\r\n"...)
	for _, h := range resp.Headers {
		if dropHeader(h.Name, cc.tokens) {
			continue
		}
		if strip && len(h.Name) == 17 && httpwire.EqualFold(h.Name, "transfer-encoding") {
			continue
		}
		out = append(out, h.Name...)
		out = append(out, ": "...)
		out = append(out, h.Value...)
		out = append(out, "\r\n"...)
	}
	if cc.tls && cc.s.altSvc != nil { // HTTP/3 advertised (Config.AltSvc)
		out = append(out, "Alt-Svc: "...)
		out = append(out, cc.s.altSvc...)
		out = append(out, "\r\n"...)
	}
	return appendHeadEnd(out, closeClient, minor)
}

// connTokens appends the field names listed in Connection headers (other
// than close and keep-alive), which are hop-by-hop for this message.
func connTokens(dst [][]byte, hs []httpwire.Header) [][]byte {
	for _, h := range hs {
		if len(h.Name) != 10 || !httpwire.EqualFold(h.Name, "connection") {
			continue
		}
		v := h.Value
		for len(v) > 0 {
			i := 0
			for i < len(v) && v[i] != ',' {
				i++
			}
			t := httpwire.TrimOWS(v[:i])
			if len(t) > 0 && !httpwire.EqualFold(t, "close") && !httpwire.EqualFold(t, "keep-alive") {
				dst = append(dst, t)
			}
			if i == len(v) {
				break
			}
			v = v[i+1:]
		}
	}
	return dst
}

// dropHeader reports whether a field is hop-by-hop (RFC 9110 §7.6.1:
// Connection, Keep-Alive, Proxy-*, TE, Trailer, Upgrade, and any field the
// Connection header names), or the front's request token, and so must not
// be forwarded.
func dropHeader(name []byte, tokens [][]byte) bool {
	switch len(name) {
	case 2:
		if httpwire.EqualFold(name, "te") {
			return true
		}
	case 7:
		if httpwire.EqualFold(name, "trailer") || httpwire.EqualFold(name, "upgrade") {
			return true
		}
	case 9:
		if isSeqHeader(name) { // the front's own token (echo.go)
			return true
		}
	case 10:
		if httpwire.EqualFold(name, "connection") || httpwire.EqualFold(name, "keep-alive") {
			return true
		}
	}
	if len(name) > 6 && httpwire.EqualFold(name[:6], "proxy-") {
		return true
	}
	for _, t := range tokens {
		if bytes.EqualFold(name, t) { // ASCII tokens: its fast path
			return true
		}
	}
	return false
}

// fetchHeader tells a node to fetch the object from the memory of the node
// with this index (policy.Decision.Fetch; node.FetchHeader).
const fetchHeader = "Shoal-Fetch"

// isFetchHeader reports whether name is fetchHeader, which only the front
// may send a node.
func isFetchHeader(name []byte) bool {
	return len(name) == len(fetchHeader) && httpwire.EqualFold(name, fetchHeader)
}
