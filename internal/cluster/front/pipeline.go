package front

import "errors"

// Pipelining to nodes (RFC 9112 §9.3.2). The batcher (batch.go) writes the
// heads that became ready in one scheduling round back to back, one write
// per node connection, and a round often holds several heads for one node.
// Requests for the same node in one round share a connection:
// the first (the leader) opens it for joining while its head waits in the
// batcher, later ones append their heads to the leader's, and the batcher's
// one write sends them all. The node reads them in one read and answers
// them in one write (node conn.process), and the front reads the answers
// in one read: a system call and a node wake-up for several requests
// instead of each.
//
// Answers come back in order, so the requests on a connection take turns
// reading it: the leader first, then each joiner in the order its head was
// appended (nodeConn.pq). A request whose whole answer is in the buffer
// writes what its client's socket takes at once, copies the rest out and
// passes the turn before waiting for the client, so a slow client holds
// up nobody behind it (sendPiped). Only what cannot hold up the
// queue for long joins:
//   - GET and HEAD without a body, which may be sent again;
//   - for a node that echoes the request token (echo.go), so every answer
//     is checked to be its request's, and a node that answered out of turn
//     is found at once (the connection then breaks and every request still
//     waiting on it goes again on a fresh connection, as a stale pooled
//     connection's does);
//   - whose object the cluster's size table knows to be at most pipeSmall
//     (or HEAD), so the answers fit the node buffer and none streams; a
//     request for a larger object, or one of unknown size, may join as
//     the last: nobody waits behind it, and it closes the connection to
//     joining.
//
// The lock is the upstream's pmu: it guards upstream.open and, on the
// connection open for joining, wbuf and pq.

// pipeMax bounds the requests in flight on one node connection; pipeSmall
// is the largest object a request may ask for and still have others
// queued behind it.
const (
	pipeMax   = 8
	pipeSmall = 16 << 10
)

var errPipeBroken = errors.New("pipelined connection broke before this request's answer")

// pipeable reports whether the request in x may join a pipeline (join),
// and whether it may have requests queued behind it (small: it may lead
// one, or join and leave it open).
func pipeable(x *Exchange) (join, small bool) {
	req := x.Req
	if req.HasBody() || x.Policy == nil {
		return false, false
	}
	if req.IsMethod("HEAD") {
		return true, true
	}
	if !req.IsMethod("GET") {
		return false, false
	}
	n := x.Policy.Size
	return true, n >= 0 && n <= pipeSmall
}

// join appends head to the connection open for joining on u, if there is
// one with room, and queues cc to read its answer after the requests
// before it; unless small, the connection then takes no more. It returns
// that connection, or nil.
func (u *upstream) join(cc *clientConn, head []byte, small bool) *nodeConn {
	u.pmu.Lock()
	defer u.pmu.Unlock()
	nc := u.open
	if nc == nil || nc.broken || len(nc.pq)+1 >= pipeMax {
		return nil
	}
	nc.wbuf = append(nc.wbuf, head...)
	nc.pq = append(nc.pq, cc)
	if !small {
		u.open = nil
	}
	return nc
}

// openPipe opens nc for joining: its leader's head is about to be queued
// in the batcher, and the batcher's write will send the joiners' too.
func (nc *nodeConn) openPipe() {
	u := nc.u
	u.pmu.Lock()
	nc.piped, nc.broken = true, false
	u.open = nc
	u.pmu.Unlock()
}

// closePipe ends joining, before the batcher writes nc.wbuf.
func (nc *nodeConn) closePipe() {
	u := nc.u
	u.pmu.Lock()
	if u.open == nc {
		u.open = nil
	}
	u.pmu.Unlock()
}

// awaitTurn waits until the requests before cc's on nc have read their
// answers; it fails when one of them broke the connection.
func (nc *nodeConn) awaitTurn(cc *clientConn) error {
	<-cc.turn
	if nc.broken { // set before the turn was passed
		return errPipeBroken
	}
	return nil
}

// pass ends the current request's turn on a pipelined connection; ok says
// the connection may still carry the answers behind it (else it is closed
// and every waiting request fails over). It reports whether a later
// request took the connection over; if not, the caller pools or closes it
// as an unpipelined one.
func (nc *nodeConn) pass(ok bool) bool {
	u := nc.u
	u.pmu.Lock()
	if !ok {
		nc.broken = true
		if u.open == nc {
			u.open = nil
		}
	}
	if len(nc.pq) == 0 {
		nc.piped, nc.broken = false, false
		u.pmu.Unlock()
		return false
	}
	next := nc.pq[0]
	n := copy(nc.pq, nc.pq[1:])
	nc.pq[n] = nil
	nc.pq = nc.pq[:n]
	broken := nc.broken
	u.pmu.Unlock()
	if broken {
		nc.c.Close()
	}
	next.turn <- struct{}{}
	return true
}

// sendPiped sends an answer whose head is out and whose body, n bytes, is
// whole in nc's buffer, and ends nc's use for it (endNode with ok). What
// the client's socket takes now goes at once and the rest is copied out
// first, so the next request on nc never waits for a slow client.
func (cc *clientConn) sendPiped(u *upstream, nc *nodeConn, out []byte, n int, ok bool) error {
	body := nc.in.bytes()[:n]
	w, err := cc.io.TryWrite(out, body)
	cc.s.ctr.bytesOut.Add(uint64(w))
	cc.sent += int64(w)
	var rest []byte
	if err == nil && w < len(out)+n {
		if w < len(out) {
			rest = append(out[w:], body...)
		} else {
			rest = append(out[:0], body[w-len(out):]...)
		}
	}
	nc.in.consume(n)
	cc.endNode(u, nc, ok)
	if len(rest) > 0 {
		err = cc.write(rest)
	}
	return err
}

// endNode is done with nc for the current request: ok, the connection
// carried its answer whole and may carry another. A pipelined connection
// goes to the next request in line; the last one pools it.
func (cc *clientConn) endNode(u *upstream, nc *nodeConn, ok bool) {
	if nc.piped && nc.pass(ok) {
		return
	}
	if !ok || nc.in.len() != 0 {
		nc.c.Close()
		return
	}
	u.pool.put(nc, cc.now)
}
