package front

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"shoal/internal/base/httpwire"
)

// h2conn is one HTTP/2 connection. The reader goroutine (the client
// connection's own) owns the framer, the decoder and the header block
// being read; mu guards the streams, the flow-control windows and the
// outgoing frames, which any stream's goroutine may append to and write
// out (h2write.go).
type h2conn struct {
	s   *Server
	cfg *H2Config
	c   net.Conn
	id  uint64 // the client connection's id (policy.Request.Conn)
	ip  string // the client's address, for X-Forwarded-For and logs
	tls bool
	fr  *http2.Framer
	dec *hpack.Decoder

	// The reader's: the header block being assembled and its fields.
	block     []byte
	blockID   uint32
	blockEnd  bool // its HEADERS frame carried END_STREAM
	blockN    int  // frames in it
	fields    []hpack.HeaderField
	fieldSize uint32
	pseudo    uint8         // the pseudo-headers seen in the block (one bit each)
	badCode   http2.ErrCode // nonzero: a field was invalid
	tooLarge  bool          // the list passed MaxHeaderListSize
	maxID     uint32        // the highest stream the client opened
	settings  bool          // the client's first SETTINGS arrived
	opened    int           // streams accepted
	glitches  int

	mu         sync.Mutex
	streams    map[uint32]*h2stream
	active     int   // stream handlers running
	recvWin    int64 // connection window the client may still fill
	sendWin    int64
	peerWin    int32  // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerMax    uint32 // the client's SETTINGS_MAX_FRAME_SIZE
	pend       []byte // frames to write
	spare      []byte
	writing    bool
	wdone      *sync.Cond // signalled when writing ends
	broken     bool       // a write failed or the connection is closing
	goaway     bool       // GOAWAY sent or received: no new streams
	sentGoaway bool
	owed       int64 // connection window read but not yet given back
	waiters    []*h2stream
	recent     [32]uint32 // streams closed lately (h2Reset marks those we reset)
	recentN    int
	wdl        deadline
	done       chan struct{}
	handlers   sync.WaitGroup
}

// h2Reset marks, in h2conn.recent, a stream the front reset (or refused):
// frames the client sent before it learnt so are ignored (RFC 9113 §5.1
// "closed").
const h2Reset = 1 << 31

// prefixReader reads pre, then the connection: the bytes of an h2c
// preface the HTTP/1.1 reader already took, then the rest.
type prefixReader struct {
	pre []byte
	c   net.Conn
}

func (r *prefixReader) Read(p []byte) (int, error) {
	if len(r.pre) > 0 {
		n := copy(p, r.pre)
		r.pre = r.pre[n:]
		return n, nil
	}
	return r.c.Read(p)
}

// h2BufSize is the reader's buffer: several frames per read, so the
// requests a client sends together are parsed from one system call.
const h2BufSize = 32 << 10

// serveH2 serves cc as an HTTP/2 connection until it ends; pre holds the
// bytes already read from it (an h2c preface and whatever followed). It
// waits for the stream handlers, so nothing touches cc after it returns.
func (cc *clientConn) serveH2(pre []byte) {
	s := cc.s
	cc.state.Store(connH2)
	s.ctr.h2Conns.Add(1)
	c := &h2conn{s: s, cfg: &s.cfg.HTTP2, c: cc.c, id: cc.id, ip: cc.clientIP(), tls: cc.tls,
		streams: map[uint32]*h2stream{}, sendWin: 65535, peerWin: 65535, peerMax: 16384,
		recvWin: 65535, done: make(chan struct{})}
	c.wdone = sync.NewCond(&c.mu)
	br := bufio.NewReaderSize(&prefixReader{pre: append([]byte(nil), pre...), c: cc.c}, h2BufSize)
	c.fr = http2.NewFramer(nil, br)
	c.fr.SetMaxReadFrameSize(16384)
	c.dec = hpack.NewDecoder(c.cfg.HeaderTableSize, c.emit)
	c.dec.SetMaxStringLength(int(c.cfg.MaxHeaderListSize))
	cc.h2.Store(c)
	c.run(br)
	cc.h2.Store(nil)
	if c.opened > 0 && cc.holder < 0 {
		cc.holder = 0 // streams were placed: serve's CloseConn drops the policy's state
	}
}

// run reads the preface and then frames until the connection ends, then
// closes it and waits for its streams.
func (c *h2conn) run(br *bufio.Reader) {
	defer func() {
		c.teardown()
		c.handlers.Wait()
	}()
	c.setIdle(true)
	var pre [len(h2Preface)]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil || string(pre[:]) != h2Preface {
		c.connError(http2.ErrCodeProtocol, "bad connection preface")
		return
	}
	c.writeSettings()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if !c.readError(err) {
				return
			}
			continue
		}
		if !c.settings {
			if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
				c.connError(http2.ErrCodeProtocol, "first frame is not SETTINGS")
				return
			}
		}
		if !c.handle(f) {
			return
		}
	}
}

// readError answers a framing error and reports whether to read on: a
// stream error resets that stream (a glitch); a protocol error ends the
// connection with GOAWAY; a read error (timeout, close) just ends it, with
// GOAWAY NO_ERROR when it was the idle timeout.
func (c *h2conn) readError(err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		c.resetStream(se.StreamID, se.Code)
		return c.glitch()
	case errors.As(err, &ce):
		c.connError(http2.ErrCode(ce), "")
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.connError(http2.ErrCodeFrameSize, "frame too large")
	case errors.As(err, &ne) && ne.Timeout():
		c.connError(http2.ErrCodeNo, "idle")
	}
	return false
}

// handle acts on one frame; false ends the connection.
func (c *h2conn) handle(f http2.Frame) bool {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.HeadersFrame:
		return c.onHeaders(f)
	case *http2.ContinuationFrame:
		return c.onContinuation(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			return c.queueFrame(http2.FramePing, http2.FlagPingAck, 0, f.Data[:])
		}
	case *http2.PriorityFrame:
		// Priorities are advice RFC 9113 §5.3 lets a server ignore; a
		// stream depending on itself is still an error.
		if f.StreamDep == f.StreamID {
			c.resetStream(f.StreamID, http2.ErrCodeProtocol)
			return c.glitch()
		}
	case *http2.GoAwayFrame:
		// The client opens no more streams; those in progress finish, and
		// the client closes (or the idle timeout does).
		c.mu.Lock()
		c.goaway = true
		c.mu.Unlock()
	case *http2.PushPromiseFrame:
		c.connError(http2.ErrCodeProtocol, "PUSH_PROMISE from a client")
		return false
	}
	return true // unknown frame types are ignored (RFC 9113 §5.5)
}

// onSettings applies the client's settings in order and acknowledges them.
func (c *h2conn) onSettings(f *http2.SettingsFrame) bool {
	if f.IsAck() {
		return true
	}
	c.settings = true
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		switch st.ID {
		case http2.SettingInitialWindowSize:
			return c.setPeerWindow(int32(st.Val))
		case http2.SettingMaxFrameSize:
			c.mu.Lock()
			c.peerMax = st.Val
			c.mu.Unlock()
		}
		return nil
	})
	if err != nil {
		code := http2.ErrCodeProtocol
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			code = http2.ErrCode(ce)
		}
		c.connError(code, "bad setting")
		return false
	}
	return c.queueFrame(http2.FrameSettings, http2.FlagSettingsAck, 0, nil)
}

// setPeerWindow moves every stream's send window by the change of the
// client's initial window (RFC 9113 §6.9.2); a window pushed past 2^31-1
// is a FLOW_CONTROL_ERROR.
func (c *h2conn) setPeerWindow(v int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delta := int64(v) - int64(c.peerWin)
	c.peerWin = v
	for _, st := range c.streams {
		st.sendWin += delta
		if st.sendWin > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
	}
	c.wakeWaiters()
	return nil
}

// onHeaders starts a header block: a new stream's request or a stream's
// trailers.
func (c *h2conn) onHeaders(f *http2.HeadersFrame) bool {
	id := f.StreamID
	if id%2 == 0 {
		c.connError(http2.ErrCodeProtocol, "even stream id from a client")
		return false
	}
	c.blockID, c.blockEnd, c.blockN = id, f.StreamEnded(), 1
	c.block = append(c.block[:0], f.HeaderBlockFragment()...)
	c.fields, c.fieldSize, c.badCode, c.tooLarge, c.pseudo = c.fields[:0], 0, 0, false, 0
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.badCode = http2.ErrCodeProtocol
	}
	if f.HeadersEnded() {
		return c.endBlock()
	}
	return true
}

// onContinuation adds to the header block (the framer has checked that it
// follows HEADERS of the same stream), bounded in frames and bytes.
func (c *h2conn) onContinuation(f *http2.ContinuationFrame) bool {
	frag := f.HeaderBlockFragment()
	c.blockN++
	if c.blockN > c.cfg.MaxHeaderFrames || len(c.block)+len(frag) > 2*int(c.cfg.MaxHeaderListSize) {
		c.connError(http2.ErrCodeEnhanceYourCalm, "header block too long")
		return false
	}
	c.block = append(c.block, frag...)
	if f.HeadersEnded() {
		return c.endBlock()
	}
	return true
}

// endBlock decodes a complete header block (always, so the HPACK state
// stays in step with the client's) and acts on it by the stream's state
// (RFC 9113 §5.1).
func (c *h2conn) endBlock() bool {
	id := c.blockID
	c.blockID = 0
	_, err := c.dec.Write(c.block)
	if cerr := c.dec.Close(); err == nil {
		err = cerr
	}
	if cap(c.block) > 64<<10 {
		c.block = nil // a rare huge block: do not keep its buffer
	}
	if err != nil {
		c.connError(http2.ErrCodeCompression, "header block")
		return false
	}
	c.mu.Lock()
	st := c.streams[id]
	closed := st == nil && id <= c.maxID && c.closedLately(id) != 0
	if st != nil && st.localDone && st.remoteDone && !st.reset {
		st, closed = nil, true // both ends done: closed, though its handler is still finishing
	}
	c.mu.Unlock()
	switch {
	case st != nil:
		return c.trailers(st)
	case closed:
		c.connError(http2.ErrCodeStreamClosed, "HEADERS on a closed stream")
		return false
	case id <= c.maxID:
		c.connError(http2.ErrCodeProtocol, "stream id went backwards")
		return false
	}
	c.mu.Lock()
	c.maxID = id // under mu: drain reads it
	c.mu.Unlock()
	return c.open(id)
}

// trailers takes a second header block on an open stream: it must end the
// stream and carry no pseudo-header (RFC 9113 §8.1). Its fields are
// dropped: the nodes get the body without them.
func (c *h2conn) trailers(st *h2stream) bool {
	code := c.badCode
	if !c.blockEnd {
		code = http2.ErrCodeProtocol
	}
	for _, f := range c.fields {
		if f.IsPseudo() {
			code = http2.ErrCodeProtocol
		}
	}
	c.mu.Lock()
	if st.remoteDone {
		code = http2.ErrCodeStreamClosed
	}
	c.mu.Unlock()
	if code != 0 {
		c.resetStream(st.id, code)
		return c.glitch()
	}
	c.mu.Lock()
	c.endRemote(st)
	c.mu.Unlock()
	return true
}

// emit is the HPACK decoder's callback: it checks each field (validField)
// and keeps it while the list stays under MaxHeaderListSize.
func (c *h2conn) emit(f hpack.HeaderField) {
	if c.badCode != 0 {
		return
	}
	c.fieldSize += f.Size()
	if c.fieldSize > c.cfg.MaxHeaderListSize {
		c.badCode, c.tooLarge = http2.ErrCodeProtocol, true
		return
	}
	bit := validField(f, len(c.fields) > 0 && !c.fields[len(c.fields)-1].IsPseudo())
	if bit == 0 || bit != pseudoRegular && c.pseudo&bit != 0 { // invalid, or a pseudo-header twice
		c.badCode = http2.ErrCodeProtocol
		return
	}
	c.pseudo |= bit
	c.fields = append(c.fields, f)
}

// closedLately returns the record of stream id among those closed lately
// (with h2Reset if the front reset it), 0 if it is not there. Called with
// mu held.
func (c *h2conn) closedLately(id uint32) uint32 {
	for _, r := range c.recent {
		if r&^h2Reset == id {
			return r
		}
	}
	return 0
}

// remember records a stream that just closed (called with mu held).
func (c *h2conn) remember(id uint32, byUs bool) {
	if byUs {
		id |= h2Reset
	}
	c.recent[c.recentN%len(c.recent)] = id
	c.recentN++
}

// glitch counts a stream the client made fail and reports whether the
// connection may go on: past MaxGlitches, once they are more than half its
// streams, it is sent GOAWAY ENHANCE_YOUR_CALM.
func (c *h2conn) glitch() bool {
	c.glitches++
	c.s.ctr.h2Glitches.Add(1)
	if c.glitches > c.cfg.MaxGlitches && c.glitches > c.opened/2 {
		c.connError(http2.ErrCodeEnhanceYourCalm, "too many failed streams")
		return false
	}
	return true
}

// setIdle arms the idle timeout on a connection with no stream in
// progress (the reader then ends it with GOAWAY NO_ERROR), or clears it
// while streams run, whose own timeouts apply. Called with mu held or by
// the reader before any stream, so the calls keep their order.
func (c *h2conn) setIdle(idle bool) {
	if idle {
		c.c.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	} else {
		c.c.SetReadDeadline(time.Time{})
	}
}

// The kinds of field validField tells apart: each request pseudo-header
// (one bit each, so a repeated one is seen) and any regular field.
const (
	pseudoMethod uint8 = 1 << iota
	pseudoScheme
	pseudoAuthority
	pseudoPath
	pseudoRegular
)

// validField checks a request field (RFC 9113 §8.2.1, §8.2.2, §8.3) and
// returns its kind, 0 if it is invalid: a lower-case token for a name, a
// value without NUL, CR, LF or surrounding blanks, no connection-specific
// field, TE only "trailers", and only the request pseudo-headers, before
// the regular fields.
func validField(f hpack.HeaderField, afterRegular bool) uint8 {
	kind := pseudoRegular
	if f.IsPseudo() {
		switch {
		case afterRegular:
			return 0
		case f.Name == ":method":
			kind = pseudoMethod
		case f.Name == ":scheme":
			kind = pseudoScheme
		case f.Name == ":authority":
			kind = pseudoAuthority
		case f.Name == ":path":
			kind = pseudoPath
		default:
			return 0
		}
	} else {
		if len(f.Name) == 0 || connectionSpecific(f.Name) || f.Name == "te" && f.Value != "trailers" {
			return 0
		}
		for i := 0; i < len(f.Name); i++ {
			if b := f.Name[i]; b >= 'A' && b <= 'Z' || !httpwire.TokenChar(b) {
				return 0
			}
		}
	}
	v := f.Value
	if len(v) > 0 && (v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		return 0
	}
	for i := 0; i < len(v); i++ {
		if b := v[i]; b == 0 || b == '\r' || b == '\n' {
			return 0
		}
	}
	return kind
}

// connectionSpecific reports the fields HTTP/2 forbids (RFC 9113 §8.2.2).
func connectionSpecific(name string) bool {
	switch name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	}
	return false
}
