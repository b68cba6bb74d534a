package front

import (
	"net"
	"runtime"
	"time"

	"golang.org/x/net/http2"

	"shoal/internal/base/httpwire"
)

// The write side of an HTTP/2 connection. Frames are appended to one
// buffer (h2conn.pend) under the connection's lock; the goroutine that
// finds no write in progress writes the buffer out, and goes on while
// others appended meanwhile (group commit), so the responses of streams
// that finish together leave in one write. The reader goroutine never
// writes itself — a client that stops reading must not stop the front
// from reading — it starts a short-lived writer instead (kick).
//
// Responses are HPACK-encoded without the dynamic table (every field a
// literal "without indexing", names from the static table where they are
// there), as HAProxy does: the encoder then has no state, so each stream
// encodes its own head without a lock and in any order, at the cost of a
// few dozen bytes per response that the dynamic table would have saved.

// appendFrame appends a frame (RFC 9113 §4.1) with payload p.
func appendFrame(b []byte, t http2.FrameType, flags http2.Flags, id uint32, p []byte) []byte {
	n := len(p)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(t), byte(flags),
		byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id))
	return append(b, p...)
}

// queueFrame queues a control frame from the reader and reports whether
// the connection goes on: false once it is broken, or when
// MaxPendingControl bytes already wait behind a client that does not read.
func (c *h2conn) queueFrame(t http2.FrameType, flags http2.Flags, id uint32, p []byte) bool {
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return false
	}
	if len(c.pend) > c.cfg.MaxPendingControl {
		c.broken = true
		c.mu.Unlock()
		c.s.ctr.h2Glitches.Add(1)
		return false
	}
	c.pend = appendFrame(c.pend, t, flags, id, p)
	c.kick()
	c.mu.Unlock()
	return true
}

// kick starts a writer for the queued frames unless one runs (called with
// mu held, by the reader).
func (c *h2conn) kick() {
	if !c.writing && len(c.pend) > 0 {
		c.writing = true
		go c.writeLoop()
	}
}

// flush writes the queued frames unless another goroutine is writing them
// (which then writes these too). Handlers call it.
func (c *h2conn) flush() {
	c.mu.Lock()
	if c.writing || len(c.pend) == 0 || c.broken {
		c.mu.Unlock()
		return
	}
	c.writing = true
	others := c.active > 1
	c.mu.Unlock()
	if others {
		// Let the other streams that are ready (their node answered in
		// the same poll) queue their frames first, so they go in this
		// write (the batcher's trick, batch.go).
		runtime.Gosched()
	}
	c.writeLoop()
}

// writeLoop writes the queued frames until none are left; the caller set
// c.writing.
func (c *h2conn) writeLoop() {
	c.mu.Lock()
	for len(c.pend) > 0 && !c.broken {
		buf := c.pend
		c.pend = c.spare[:0]
		c.wakeWaiters() // streams held back by maxPendData may append again
		c.mu.Unlock()
		c.wdl.setWrite(c.c, time.Now().UnixNano(), c.s.cfg.WriteTimeout)
		n, err := c.c.Write(buf)
		c.s.ctr.bytesOut.Add(uint64(n))
		c.mu.Lock()
		c.spare = nil // never the array c.pend uses now
		if cap(buf) <= 256<<10 {
			c.spare = buf[:0]
		}
		if err != nil {
			c.broken = true
			c.wakeWaiters()
			c.c.SetReadDeadline(time.Unix(1, 0)) // the reader ends the connection
		}
	}
	c.writing = false
	c.wdone.Broadcast()
	c.mu.Unlock()
}

// writeSettings sends the server's SETTINGS and opens the connection
// window to ConnWindow.
func (c *h2conn) writeSettings() {
	var p []byte
	add := func(id http2.SettingID, v uint32) {
		p = append(p, byte(id>>8), byte(id), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	add(http2.SettingMaxConcurrentStreams, c.cfg.MaxConcurrentStreams)
	add(http2.SettingInitialWindowSize, c.cfg.StreamWindow)
	add(http2.SettingMaxHeaderListSize, c.cfg.MaxHeaderListSize)
	if c.cfg.HeaderTableSize != 4096 {
		add(http2.SettingHeaderTableSize, c.cfg.HeaderTableSize)
	}
	c.mu.Lock()
	c.pend = appendFrame(c.pend, http2.FrameSettings, 0, 0, p)
	if inc := int64(c.cfg.ConnWindow) - c.recvWin; inc > 0 {
		c.pend = appendWindowUpdate(c.pend, 0, uint32(inc))
		c.recvWin += inc
	}
	c.kick()
	c.mu.Unlock()
}

func appendWindowUpdate(b []byte, id, inc uint32) []byte {
	return appendFrame(b, http2.FrameWindowUpdate, 0, id, []byte{byte(inc>>24) & 0x7f, byte(inc >> 16), byte(inc >> 8), byte(inc)})
}

// credit gives n bytes the front has read (or dropped) back to the
// client's connection window and, with st, the stream's. WINDOW_UPDATE
// goes out once a quarter of a window is owed, which cannot stall a
// client: one that has used its whole window is owed at least that much
// once the handler reads what is buffered. inline: the caller is a
// handler, which may write; the reader kicks a writer.
func (c *h2conn) credit(st *h2stream, n int64, inline bool) {
	c.mu.Lock()
	c.recvWin += n
	c.owed += n
	if c.owed >= int64(c.cfg.ConnWindow)/4 {
		c.pend = appendWindowUpdate(c.pend, 0, uint32(c.owed))
		c.owed = 0
	}
	if st != nil && !st.remoteDone {
		st.recvWin += n
		st.owed += n
		if st.owed >= int64(c.cfg.StreamWindow)/4 {
			c.pend = appendWindowUpdate(c.pend, st.id, uint32(st.owed))
			st.owed = 0
		}
	}
	if !inline {
		c.kick()
	}
	c.mu.Unlock()
	if inline {
		c.flush()
	}
}

// connError queues GOAWAY with code (RFC 9113 §5.4.1), once; the reader
// then ends the connection, which writes it out first.
func (c *h2conn) connError(code http2.ErrCode, debug string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sentGoaway || c.broken {
		return
	}
	c.sentGoaway, c.goaway = true, true
	if code != http2.ErrCodeNo {
		c.s.ctr.h2Errors.Add(1)
	}
	c.pend = appendGoaway(c.pend, c.maxID, code, debug)
}

func appendGoaway(b []byte, last uint32, code http2.ErrCode, debug string) []byte {
	p := make([]byte, 8, 8+len(debug))
	p[0], p[1], p[2], p[3] = byte(last>>24)&0x7f, byte(last>>16), byte(last>>8), byte(last)
	p[4], p[5], p[6], p[7] = byte(code>>24), byte(code>>16), byte(code>>8), byte(code)
	return appendFrame(b, http2.FrameGoAway, 0, 0, append(p, debug...))
}

// drain starts a graceful close (Server.Shutdown): GOAWAY NO_ERROR with the
// last stream taken, so the client retries later streams elsewhere; the
// streams in progress finish, then the connection closes.
func (c *h2conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sentGoaway || c.broken {
		return
	}
	c.sentGoaway, c.goaway = true, true
	c.pend = appendGoaway(c.pend, c.maxID, http2.ErrCodeNo, "")
	c.kick()
	if c.active == 0 {
		c.c.SetReadDeadline(time.Unix(1, 0))
	}
}

// teardown ends the connection once the reader stops: what is queued
// (GOAWAY) is written, waiting at most a second for a write in progress,
// every waiting handler is woken and the connection is closed.
func (c *h2conn) teardown() {
	c.mu.Lock()
	if c.writing {
		c.c.SetWriteDeadline(time.Now().Add(time.Second))
	}
	for c.writing {
		c.wdone.Wait()
	}
	buf := c.pend
	c.pend, c.writing, c.broken, c.goaway = nil, true, true, true
	c.wakeWaiters()
	for _, st := range c.streams {
		signal(st.bodyCh)
	}
	c.mu.Unlock()
	close(c.done)
	if len(buf) > 0 {
		c.c.SetWriteDeadline(time.Now().Add(time.Second))
		c.c.Write(buf)
	}
	c.linger()
	closeNow(c.c)
}

// linger half-closes the connection and reads what the client still
// sends, for at most a second or 64 KiB, before the close: closing with
// unread bytes makes the kernel send a reset, which can destroy the GOAWAY
// just written before the client reads it (nginx's lingering close).
func (c *h2conn) linger() {
	tc, ok := rawConn(c.c).(*net.TCPConn)
	if !ok || tc.CloseWrite() != nil {
		return
	}
	tc.SetReadDeadline(time.Now().Add(time.Second))
	var buf [4096]byte
	for n := 0; n < 64<<10; {
		m, err := tc.Read(buf[:])
		n += m
		if err != nil {
			return
		}
	}
}

// wakeWaiters wakes the handlers waiting for send window (mu held).
func (c *h2conn) wakeWaiters() {
	for i, st := range c.waiters {
		st.waiting = false
		signal(st.winCh)
		c.waiters[i] = nil
	}
	c.waiters = c.waiters[:0]
}

// respond queues a response head and as much of body as the
// flow-control windows allow now, writes them, and returns the rest of
// body for data (muxSink).
func (st *h2stream) respond(status int, fields []httpwire.Header, body []byte, end bool) ([]byte, error) {
	st.block = appendResponseBlock(st.block[:0], status, fields)
	c := st.c
	c.mu.Lock()
	if st.reset || c.broken {
		c.mu.Unlock()
		return nil, errStreamGone
	}
	c.pend = appendHeaders(c.pend, st.id, st.block, end && len(body) == 0, c.peerMax)
	st.localDone = end && len(body) == 0
	rest := body
	if len(body) > 0 {
		rest = st.appendData(body, end)
	}
	c.mu.Unlock()
	c.flush()
	return rest, nil
}

// cancel resets a stream whose response was cut short (muxSink).
func (st *h2stream) cancel() { st.abort(http2.ErrCodeInternal) }

// interim sends a 1xx head (100 Continue before a request body).
func (st *h2stream) interim(status int) error {
	st.block = appendResponseBlock(st.block[:0], status, nil)
	c := st.c
	c.mu.Lock()
	if st.reset || c.broken {
		c.mu.Unlock()
		return errStreamGone
	}
	c.pend = appendHeaders(c.pend, st.id, st.block, false, c.peerMax)
	c.mu.Unlock()
	c.flush()
	return nil
}

// data sends body bytes, waiting for send window as needed (at most
// WriteTimeout each time); end ends the stream after them.
func (st *h2stream) data(p []byte, end bool) error {
	if len(p) == 0 && !end {
		return nil
	}
	c := st.c
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		c.mu.Lock()
		if st.reset || c.broken {
			c.mu.Unlock()
			return errStreamGone
		}
		before := len(p)
		if len(p) > 0 || end {
			p = st.appendData(p, end)
		}
		if len(p) == 0 && (before > 0 || end) {
			c.mu.Unlock()
			c.flush()
			return nil
		}
		if !st.waiting {
			st.waiting = true
			c.waiters = append(c.waiters, st)
		}
		c.mu.Unlock()
		c.flush()
		if t == nil {
			t = time.NewTimer(c.s.cfg.WriteTimeout)
		}
		select {
		case <-st.winCh:
		case <-t.C:
			st.abort(http2.ErrCodeCancel)
			return errStreamGone
		case <-c.done:
			return errStreamGone
		}
	}
}

// maxPendData is how many bytes of frames may wait for the writer before
// streams stop adding DATA (they wait until it takes them): a client that
// opens large windows and then does not read cannot make the front buffer
// whole files.
const maxPendData = 256 << 10

// appendData queues as much of p as the windows allow, in frames of at
// most the client's SETTINGS_MAX_FRAME_SIZE, END_STREAM on the last when
// end and all of p went, while fewer than maxPendData bytes wait to be
// written; it returns what is left (mu held).
func (st *h2stream) appendData(p []byte, end bool) []byte {
	c := st.c
	if len(p) == 0 { // an empty END_STREAM frame takes no window
		if end {
			c.pend = appendFrame(c.pend, http2.FrameData, http2.FlagDataEndStream, st.id, nil)
			st.localDone = true
		}
		return p
	}
	for {
		n := min(int64(len(p)), st.sendWin, c.sendWin, int64(c.peerMax))
		if n <= 0 || len(c.pend) >= maxPendData {
			return p
		}
		var flags http2.Flags
		if end && n == int64(len(p)) {
			flags = http2.FlagDataEndStream
			st.localDone = true
		}
		c.pend = appendFrame(c.pend, http2.FrameData, flags, st.id, p[:n])
		st.sendWin -= n
		c.sendWin -= n
		p = p[n:]
		if len(p) == 0 {
			return p
		}
	}
}

// abort resets the stream from the handler (a response cut short, or a
// client that stopped reading).
func (st *h2stream) abort(code http2.ErrCode) {
	c := st.c
	c.mu.Lock()
	if st.reset || c.broken {
		c.mu.Unlock()
		return
	}
	st.reset, st.ours = true, true
	c.endRemote(st)
	c.pend = appendFrame(c.pend, http2.FrameRSTStream, 0, st.id, []byte{byte(code >> 24), byte(code >> 16), byte(code >> 8), byte(code)})
	c.mu.Unlock()
	c.flush()
}

// appendHeaders appends a header block as HEADERS and, past max bytes,
// CONTINUATION frames (RFC 9113 §6.2, §6.10).
func appendHeaders(b []byte, id uint32, block []byte, end bool, max uint32) []byte {
	flags := http2.Flags(0)
	if end {
		flags |= http2.FlagHeadersEndStream
	}
	t := http2.FrameHeaders
	for {
		n := min(len(block), int(max))
		f := flags
		if n == len(block) {
			f |= http2.FlagHeadersEndHeaders
		}
		b = appendFrame(b, t, f, id, block[:n])
		block = block[n:]
		if len(block) == 0 {
			return b
		}
		t, flags = http2.FrameContinuation, 0
	}
}
