package front

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2stream is one HTTP/2 stream: a request and its response. The fields
// under "mu" belong to the connection's lock; the rest to the stream's
// handler goroutine.
type h2stream struct {
	c  *h2conn
	id uint32

	// Under c.mu.
	sendWin    int64 // what the client lets the front send on it
	recvWin    int64 // what the client may still send on it
	body       []byte
	spare      []byte
	declared   int64 // content-length, -1 if none
	received   int64
	remoteDone bool  // END_STREAM or RST_STREAM from the client
	reset      bool  // RST_STREAM sent or received: the handler stops
	ours       bool  // … sent, by the front
	localDone  bool  // END_STREAM queued: the response is complete
	hasBody    bool  // the head did not end the stream
	owed       int64 // bytes read but not yet given back in WINDOW_UPDATE
	waiting    bool  // in c.waiters
	winCh      chan struct{}
	bodyCh     chan struct{}

	// The handler's.
	fields []hpack.HeaderField
	status int // nonzero: answer this at once (a head too large: 431)
	block  []byte
	m      muxStream
}

// h2streams recycles streams with their buffers.
var h2streams = sync.Pool{New: func() any {
	return &h2stream{winCh: make(chan struct{}, 1), bodyCh: make(chan struct{}, 1)}
}}

// errStreamGone: the stream was reset or the connection closed while its
// handler was still answering.
var errStreamGone = errors.New("http2: stream reset or connection closed")

// open starts stream id from the header block just read: refused past
// MaxConcurrentStreams or after GOAWAY, reset if malformed, else given to a
// handler goroutine.
func (c *h2conn) open(id uint32) bool {
	c.mu.Lock()
	if c.goaway {
		c.mu.Unlock()
		return true // RFC 9113 §6.8: streams after GOAWAY are ignored
	}
	if c.active >= int(c.cfg.MaxConcurrentStreams) {
		c.mu.Unlock()
		c.s.ctr.h2Refused.Add(1)
		c.resetStream(id, http2.ErrCodeRefusedStream)
		return c.glitch()
	}
	c.mu.Unlock()
	declared, ok := c.checkRequest()
	if !ok {
		c.resetStream(id, http2.ErrCodeProtocol)
		return c.glitch()
	}
	st := h2streams.Get().(*h2stream)
	drainSignal(st.winCh)
	drainSignal(st.bodyCh)
	st.c, st.id, st.declared, st.received = c, id, declared, 0
	st.remoteDone, st.reset, st.ours, st.waiting, st.status, st.owed = c.blockEnd, false, false, false, 0, 0
	st.localDone = false
	if c.tooLarge {
		st.status = 431
	}
	st.fields = append(st.fields[:0], c.fields...)
	st.hasBody = !c.blockEnd
	c.opened++
	c.mu.Lock()
	st.sendWin, st.recvWin = int64(c.peerWin), int64(c.cfg.StreamWindow)
	c.streams[id] = st
	if c.active++; c.active == 1 {
		c.setIdle(false)
	}
	c.handlers.Add(1)
	c.mu.Unlock()
	c.s.workers.do(st)
	return true
}

// checkRequest checks the pseudo-headers of the request just decoded (RFC
// 9113 §8.3.1): :method, :scheme and a non-empty :path (CONNECT: only
// :authority), a Host that agrees with :authority, a content-length that is
// a number and, with END_STREAM on the head, zero. It returns the
// content-length (-1 if none). A too large head passes: it is answered 431.
func (c *h2conn) checkRequest() (declared int64, ok bool) {
	if c.badCode != 0 && !c.tooLarge {
		return -1, false
	}
	declared = -1
	var method, scheme, path, authority, host string
	for _, f := range c.fields {
		switch f.Name {
		case ":method":
			method = f.Value
		case ":scheme":
			scheme = f.Value
		case ":path":
			path = f.Value
		case ":authority":
			authority = f.Value
		case "host":
			host = f.Value
		case "content-length":
			n, err := strconv.ParseInt(f.Value, 10, 64)
			if err != nil || n < 0 || declared >= 0 && n != declared {
				return -1, false
			}
			declared = n
		}
	}
	if c.tooLarge {
		return declared, true
	}
	if method == "CONNECT" {
		return declared, authority != "" && scheme == "" && path == ""
	}
	if method == "" || scheme == "" || path == "" {
		return -1, false
	}
	if host != "" && authority != "" && !strings.EqualFold(host, authority) {
		return -1, false
	}
	if c.blockEnd && declared > 0 {
		return -1, false
	}
	return declared, true
}

// onData takes request body bytes: flow-controlled on the connection and
// the stream (padding included, and given back at once), checked against
// the stream's state and content-length, and queued for its handler.
func (c *h2conn) onData(f *http2.DataFrame) bool {
	id, n := f.StreamID, int64(f.Length)
	if id > c.maxID {
		c.connError(http2.ErrCodeProtocol, "DATA on an idle stream")
		return false
	}
	c.mu.Lock()
	if n > c.recvWin {
		c.mu.Unlock()
		c.connError(http2.ErrCodeFlowControl, "connection window exceeded")
		return false
	}
	c.recvWin -= n
	st := c.streams[id]
	var code http2.ErrCode
	switch {
	case st == nil || st.remoteDone:
		code = http2.ErrCodeStreamClosed
		if st == nil && c.closedLately(id)&h2Reset != 0 {
			code = 0 // sent before the client saw our RST_STREAM: ignored
		}
	case n > st.recvWin:
		code = http2.ErrCodeFlowControl
	}
	if st == nil || st.remoteDone || code != 0 {
		c.mu.Unlock()
		c.credit(nil, n, false)
		if code == 0 {
			return true
		}
		c.resetStream(id, code)
		return c.glitch()
	}
	return c.takeData(st, f, n)
}

// takeData queues a DATA frame's bytes for st's handler (called with mu
// held; it unlocks).
func (c *h2conn) takeData(st *h2stream, f *http2.DataFrame, n int64) bool {
	data := f.Data()
	st.recvWin -= n
	st.received += int64(len(data))
	bad := st.declared >= 0 && (st.received > st.declared || f.StreamEnded() && st.received != st.declared)
	if !bad {
		st.body = append(st.body, data...)
		if f.StreamEnded() {
			c.endRemote(st)
		}
		signal(st.bodyCh)
	}
	c.mu.Unlock()
	if pad := n - int64(len(data)); pad > 0 {
		c.credit(st, pad, false)
	}
	if bad {
		c.resetStream(st.id, http2.ErrCodeProtocol)
		return c.glitch()
	}
	return true
}

// endRemote records the client's END_STREAM on st (called with mu held).
func (c *h2conn) endRemote(st *h2stream) {
	st.remoteDone = true
	signal(st.bodyCh)
}

// onWindowUpdate opens the connection's or a stream's send window; past
// 2^31-1 it is a FLOW_CONTROL_ERROR (RFC 9113 §6.9.1).
func (c *h2conn) onWindowUpdate(f *http2.WindowUpdateFrame) bool {
	id, inc := f.StreamID, int64(f.Increment)
	if id > c.maxID {
		c.connError(http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream")
		return false
	}
	c.mu.Lock()
	if id == 0 {
		c.sendWin += inc
		over := c.sendWin > 1<<31-1
		c.wakeWaiters()
		c.mu.Unlock()
		if over {
			c.connError(http2.ErrCodeFlowControl, "connection window too large")
		}
		return !over
	}
	st := c.streams[id]
	over := false
	if st != nil {
		st.sendWin += inc
		over = st.sendWin > 1<<31-1
		c.wakeWaiters()
	}
	c.mu.Unlock()
	if over {
		c.resetStream(id, http2.ErrCodeFlowControl)
		return c.glitch()
	}
	return true
}

// onReset takes the client's RST_STREAM: the stream's handler stops at
// its next step. A stream reset while its handler runs is a glitch.
func (c *h2conn) onReset(f *http2.RSTStreamFrame) bool {
	if f.StreamID > c.maxID {
		c.connError(http2.ErrCodeProtocol, "RST_STREAM on an idle stream")
		return false
	}
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st != nil && !st.reset {
		st.reset = true
		c.endRemote(st)
		signal(st.winCh)
	}
	c.mu.Unlock()
	if st != nil {
		return c.glitch()
	}
	return true
}

// resetStream sends RST_STREAM with code on stream id and stops its
// handler, if it has one.
func (c *h2conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		if st.ours {
			c.mu.Unlock()
			return // one RST_STREAM is enough
		}
		st.reset, st.ours = true, true
		c.endRemote(st)
		signal(st.winCh)
	} else {
		c.remember(id, true)
	}
	c.mu.Unlock()
	var p [4]byte
	p[0], p[1], p[2], p[3] = byte(code>>24), byte(code>>16), byte(code>>8), byte(code)
	c.queueFrame(http2.FrameRSTStream, 0, id, p[:])
}

// run is the stream's handler (on a worker goroutine): it answers the
// request through the dispatch core, then closes the stream.
func (st *h2stream) run() {
	c := st.c
	defer st.close()
	m := &st.m
	m.reset(c.s, protoH2, c.id, c.ip, c.tls)
	m.sink, m.body = st, nil
	if st.hasBody {
		m.body = st
	}
	if st.status != 0 {
		m.answer(st.status)
		return
	}
	m.head = appendH2Head(m.head[:0], st.fields, st.declared, m.body != nil)
	m.run()
}

// close ends the stream on the connection's side: a client still sending
// is told to stop (RST_STREAM NO_ERROR, RFC 9113 §8.1), the body bytes it
// sent that nobody read are given back to the connection window, and the
// stream is forgotten.
func (st *h2stream) close() {
	c := st.c
	c.mu.Lock()
	delete(c.streams, st.id)
	if st.waiting { // left data() on a timeout or close: out of the list before reuse
		st.waiting = false
		for i, w := range c.waiters {
			if w == st {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				break
			}
		}
	}
	stop := !st.remoteDone && !st.reset
	left := int64(len(st.body))
	st.body = st.body[:0]
	c.remember(st.id, st.ours || stop)
	if c.active--; c.active == 0 {
		if c.goaway && !c.broken {
			c.c.SetReadDeadline(time.Unix(1, 0)) // drained: the reader ends it
		} else {
			c.setIdle(true)
		}
	}
	c.mu.Unlock()
	if stop {
		c.queueFrame(http2.FrameRSTStream, 0, st.id, []byte{0, 0, 0, 0})
	}
	if left > 0 {
		c.credit(nil, left, true)
	}
	c.handlers.Done()
	if cap(st.body) <= 64<<10 && cap(st.spare) <= 64<<10 {
		st.c, st.fields = nil, st.fields[:0]
		h2streams.Put(st)
	}
}

// next returns the next piece of the request body, io.EOF after the last;
// the piece is valid until the next call. Reading gives the bytes back to
// the client's windows.
func (st *h2stream) next() ([]byte, error) {
	c := st.c
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	c.mu.Lock()
	for len(st.body) == 0 && !st.remoteDone && !c.broken {
		c.mu.Unlock()
		if t == nil {
			t = time.NewTimer(c.s.cfg.HeaderTimeout)
		}
		select {
		case <-st.bodyCh:
		case <-t.C:
			return nil, errBodyTimeout
		case <-c.done:
		}
		c.mu.Lock()
	}
	if st.reset || c.broken {
		c.mu.Unlock()
		return nil, errStreamGone
	}
	if len(st.body) == 0 {
		c.mu.Unlock()
		return nil, io.EOF
	}
	p := st.body
	st.body, st.spare = st.spare[:0], p
	c.mu.Unlock()
	c.credit(st, int64(len(p)), true)
	return p, nil
}

// drainSignal takes a stale signal off ch (a recycled stream's).
func drainSignal(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// signal wakes the one goroutine waiting on ch, if any.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// appendH2Head appends an HTTP/2 request as an HTTP/1.1 head (RFC 9113
// §8.3.1): the request line from :method and :path (:authority for
// CONNECT), Host from :authority (a Host field is then left out), the
// other fields as they came, cookie fields joined with "; " (§8.2.3), and
// Transfer-Encoding: chunked for a body without content-length, which the
// relay then sends in chunks.
func appendH2Head(b []byte, fields []hpack.HeaderField, declared int64, body bool) []byte {
	var method, path, authority string
	for _, f := range fields {
		switch f.Name {
		case ":method":
			method = f.Value
		case ":path":
			path = f.Value
		case ":authority":
			authority = f.Value
		}
	}
	if method == "CONNECT" {
		path = authority
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\n"...)
	if authority != "" {
		b = append(b, "host: "...)
		b = append(b, authority...)
		b = append(b, "\r\n"...)
	}
	cookies := 0
	for _, f := range fields {
		switch {
		case f.IsPseudo() || f.Name == "host" && authority != "":
			continue
		case f.Name == "cookie":
			cookies++
			continue
		}
		b = append(b, f.Name...)
		b = append(b, ": "...)
		b = append(b, f.Value...)
		b = append(b, "\r\n"...)
	}
	if cookies > 0 {
		b = append(b, "cookie: "...)
		n := 0
		for _, f := range fields {
			if f.Name == "cookie" {
				if n > 0 {
					b = append(b, "; "...)
				}
				b = append(b, f.Value...)
				n++
			}
		}
		b = append(b, "\r\n"...)
	}
	if body && declared < 0 {
		b = append(b, "transfer-encoding: chunked\r\n"...)
	}
	return append(b, "\r\n"...)
}
