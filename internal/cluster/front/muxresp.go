package front

import (
	"fmt"
	"io"
	"time"

	"shoal/internal/base/httpwire"
)

// altSvcName is the Alt-Svc field's name as the sinks send it.
var altSvcName = []byte("alt-svc")

// respond passes the node's response head and body to the stream's sink
// (relayResponse for a stream): hop-by-hop fields and the framing of
// HTTP/1.1 dropped, Alt-Svc added when HTTP/3 is advertised. A body that
// arrived whole with the head is copied, the node connection goes back to
// the pool and the slot is freed before the client is waited for; a
// longer one gives the slot back first and streams.
func (m *muxStream) respond(u *upstream, nc *nodeConn, held *bool) Result {
	s := m.s
	resp := &nc.resp
	noBody := resp.NoBody() || m.req.IsMethod("HEAD")
	m.tokens = connTokens(m.tokens[:0], resp.Headers)
	m.fields = m.fields[:0]
	for _, h := range resp.Headers {
		if dropHeader(h.Name, m.tokens) || len(h.Name) == 17 && httpwire.EqualFold(h.Name, "transfer-encoding") {
			continue
		}
		m.fields = append(m.fields, h)
	}
	if s.altSvc != nil {
		m.fields = append(m.fields, httpwire.Header{Name: altSvcName, Value: s.altSvc})
	}
	nc.in.consume(resp.HeadLen)
	s.ctr.status[resp.Status/100].Add(1)
	if resp.Status == 200 && resp.ContentLength >= 0 {
		m.pr.Size = resp.ContentLength // the object's size, for Done
	}
	m.now = time.Now().UnixNano()
	m.log.headAt, m.log.body = m.now, 0
	m.started = true
	if noBody || resp.ContentLength >= 0 && resp.ContentLength <= int64(nc.in.len()) {
		return m.respondWhole(u, nc, held, noBody)
	}
	return m.respondStream(u, nc, held)
}

// respondWhole sends a response whose body (if any) is in the node
// buffer already.
func (m *muxStream) respondWhole(u *upstream, nc *nodeConn, held *bool, noBody bool) Result {
	resp := &nc.resp
	status := resp.Status
	n := 0
	if !noBody {
		n = int(resp.ContentLength)
	}
	m.buf = append(m.buf[:0], nc.in.bytes()[:n]...)
	nc.in.consume(n)
	rest, err := m.sink.respond(status, m.fields, m.buf, true) // m.fields alias nc's buffer: nc is still ours
	if resp.Close || nc.in.len() != 0 {
		nc.c.Close()
	} else {
		u.pool.put(nc, m.now)
	}
	*held = false
	u.lim.release()
	if err == nil && len(rest) > 0 {
		err = m.sink.data(rest, true)
	}
	m.sent += int64(n)
	m.log.body = int64(n)
	if err != nil {
		return Result{Status: status, Err: fmt.Errorf("client: %w", err)}
	}
	return Result{Status: status}
}

// respondStream streams a body still to come from the node, by its length,
// its chunks (decoded: the streams frame it themselves) or until the node
// closes.
func (m *muxStream) respondStream(u *upstream, nc *nodeConn, held *bool) Result {
	s := m.s
	resp := &nc.resp
	status := resp.Status
	*held = false
	u.lim.release()
	s.ctr.streaming.Add(1)
	defer s.ctr.streaming.Add(-1)
	reuse := !resp.Close
	_, err := m.sink.respond(status, m.fields, nil, false)
	var n int64
	if err == nil {
		switch {
		case resp.ContentLength >= 0:
			n, err = m.streamN(nc, resp.ContentLength)
		case resp.Chunked:
			n, err = m.streamChunked(nc)
		default:
			reuse = false
			n, err = m.streamUntilClose(nc)
		}
	}
	m.sent += n
	m.log.body = n
	if err == nil {
		err = m.sink.data(nil, true)
	}
	if err != nil || !reuse || nc.in.len() != 0 {
		nc.c.Close()
	} else {
		u.pool.put(nc, time.Now().UnixNano())
	}
	if err != nil {
		m.sink.cancel()
		return Result{Status: status, Err: fmt.Errorf("node %s: body: %w", u.b.URL, err)}
	}
	return Result{Status: status}
}

// nodeRead reads more of the node's answer into nc.in within
// ResponseTimeout; io.ErrUnexpectedEOF if it ends with nothing buffered.
func (m *muxStream) nodeRead(nc *nodeConn) error {
	nc.rdl.setRead(nc.c, time.Now().UnixNano(), m.s.cfg.ResponseTimeout)
	_, err := nc.in.fill(nc.c)
	if err != nil && nc.in.len() == 0 {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// streamN passes k body bytes on.
func (m *muxStream) streamN(nc *nodeConn, k int64) (int64, error) {
	var done int64
	for done < k {
		if nc.in.len() == 0 {
			if err := m.nodeRead(nc); err != nil {
				return done, err
			}
		}
		p := nc.in.bytes()
		if int64(len(p)) > k-done {
			p = p[:k-done]
		}
		if err := m.sink.data(p, false); err != nil {
			return done, err
		}
		nc.in.consume(len(p))
		done += int64(len(p))
	}
	return done, nil
}

// streamChunked passes a chunked body's data on, validating its framing
// (chunker) so the node connection stays reusable.
func (m *muxStream) streamChunked(nc *nodeConn) (int64, error) {
	var ch chunker
	var done int64
	for {
		if nc.in.len() == 0 {
			if err := m.nodeRead(nc); err != nil {
				return done, err
			}
		}
		buf := nc.in.bytes()
		n, end := 0, false
		for n < len(buf) && !end {
			k, d0, d1, fin, err := ch.scan(buf[n:])
			if err != nil {
				return done, err
			}
			if d1 > d0 {
				if err := m.sink.data(buf[n+d0:n+d1], false); err != nil {
					return done, err
				}
				done += int64(d1 - d0)
			}
			n += k
			end = fin
		}
		nc.in.consume(n)
		if end {
			return done, nil
		}
	}
}

// streamUntilClose passes everything the node sends until it closes.
func (m *muxStream) streamUntilClose(nc *nodeConn) (int64, error) {
	var done int64
	for {
		if nc.in.len() == 0 {
			err := m.nodeRead(nc)
			if err == io.ErrUnexpectedEOF {
				return done, nil
			}
			if err != nil {
				return done, err
			}
		}
		p := nc.in.bytes()
		if err := m.sink.data(p, false); err != nil {
			return done, err
		}
		nc.in.consume(len(p))
		done += int64(len(p))
	}
}
