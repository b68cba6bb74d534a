package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"shoal/internal/base/httpwire"
)

// HTTP/3 (RFC 9114) at the front, over QUIC on UDP, with quic-go's http3
// server (HTTP3): QUIC (loss recovery, congestion control, its own TLS 1.3) is far
// too large to write here, and quic-go is the maintained Go
// implementation. Each request reaches the same dispatch core as HTTP/1.1
// and HTTP/2 streams (mux.go) through an http.Handler: its head is
// written out as HTTP/1.1 and parsed by the front's parser, routed by the
// policy and relayed over the pooled node connections. It is off unless
// asked for (NewHTTP3, `--http3`): QUIC needs a UDP port open beside the
// TCP one and larger socket buffers than Linux's defaults (docs/deploy.md).
// Clients learn of it from the Alt-Svc field (AltSvcH3) on the responses
// they get over TLS.
//
// Its limits are the front's: MaxConcurrentStreams bounds the streams a
// QUIC connection may open, MaxHeaderListSize its field section,
// IdleTimeout and HeaderTimeout its idle and handshake time, and
// MaxConnsPerIP the connections from one address.

// AltSvcH3 is the Alt-Svc value that advertises HTTP/3 on port (RFC 7838,
// RFC 9114 §3.1.1) for a day.
func AltSvcH3(port int) string { return `h3=":` + strconv.Itoa(port) + `"; ma=86400` }

// HTTP3 serves HTTP/3 for a front: for the Server current returns at each
// connection and request, so that a reload that replaces the Server
// (gateway.Swap) keeps the UDP socket and the QUIC connections.
type HTTP3 struct {
	hs  *http3.Server
	cur func() *Server
}

// NewHTTP3 prepares HTTP/3 with certs for the Server current returns; its
// limits come from that Server's Config now (a reload does not change
// them).
func NewHTTP3(certs *Certs, current func() *Server) *HTTP3 {
	s := current()
	h := &HTTP3{cur: current}
	h.hs = &http3.Server{
		TLSConfig: http3.ConfigureTLSConfig(certs.TLSConfig("h3")),
		QUICConfig: &quic.Config{
			MaxIncomingStreams:   int64(s.cfg.HTTP2.MaxConcurrentStreams),
			MaxIdleTimeout:       s.cfg.IdleTimeout,
			HandshakeIdleTimeout: s.cfg.HeaderTimeout,
		},
		Handler:        h3Handler{current},
		MaxHeaderBytes: int(s.cfg.HTTP2.MaxHeaderListSize),
		IdleTimeout:    s.cfg.IdleTimeout,
		ConnContext:    func(ctx context.Context, c *quic.Conn) context.Context { return current().h3Conn(ctx, c) },
		Logger:         s.cfg.Logger,
	}
	return h
}

// Serve serves HTTP/3 on pc (a UDP socket, normally on the TLS listener's
// port) until Shutdown or Close, then closes pc. It returns
// ErrServerClosed after those, another error if pc fails.
func (h *HTTP3) Serve(pc net.PacketConn) error {
	defer pc.Close()
	err := h.hs.Serve(pc)
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, quic.ErrServerClosed) {
		return ErrServerClosed
	}
	return fmt.Errorf("front: http3: %w", err)
}

// Shutdown sends GOAWAY on every HTTP/3 connection and waits, until ctx
// ends, for their requests to finish; Close ends them at once.
func (h *HTTP3) Shutdown(ctx context.Context) error { return h.hs.Shutdown(ctx) }

// Close closes every HTTP/3 connection at once.
func (h *HTTP3) Close() error { return h.hs.Close() }

// h3ConnKey finds a QUIC connection's h3Info in its requests' context.
type h3ConnKey struct{}

// h3Info is what the front knows of a QUIC connection.
type h3Info struct {
	id uint64
	ip string
}

// h3Conn registers a new QUIC connection (http3.Server.ConnContext): an
// id for the policy, its address, the per-address limit (one more is
// closed with H3_EXCESSIVE_LOAD) and the count, undone when it closes.
func (s *Server) h3Conn(ctx context.Context, c *quic.Conn) context.Context {
	info := &h3Info{id: s.nextConn.Add(1)}
	var addr netip.Addr
	if ua, ok := c.RemoteAddr().(*net.UDPAddr); ok {
		addr = ua.AddrPort().Addr().Unmap()
		info.ip = addr.String()
	}
	s.ctr.h3Conns.Add(1)
	s.ctr.connsAccepted.Add(1)
	if lim := s.cfg.MaxConnsPerIP; lim > 0 && addr.IsValid() {
		s.mu.Lock()
		if s.perIP[addr] >= lim {
			s.mu.Unlock()
			s.ctr.refusedPerIP.Add(1)
			c.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeExcessiveLoad), "too many connections from this address")
			return context.WithValue(ctx, h3ConnKey{}, info)
		}
		s.perIP[addr]++
		s.mu.Unlock()
		go func() {
			<-c.Context().Done()
			s.mu.Lock()
			if s.perIP[addr] <= 1 {
				delete(s.perIP, addr)
			} else {
				s.perIP[addr]--
			}
			s.mu.Unlock()
		}()
	}
	return context.WithValue(ctx, h3ConnKey{}, info)
}

// h3Handler takes each HTTP/3 request into the current Server's dispatch
// core.
type h3Handler struct{ cur func() *Server }

// h3Stream is one HTTP/3 request's state, recycled with its buffers.
type h3Stream struct {
	m         muxStream
	w         http.ResponseWriter
	rc        *http.ResponseController
	body      io.Reader
	buf       []byte
	first     []byte // a first piece read to learn whether a body comes
	eof       bool
	cancelled bool
	s         *Server
}

var h3Streams = sync.Pool{New: func() any { return &h3Stream{buf: make([]byte, 32<<10)} }}

func (h h3Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.cur()
	info, _ := r.Context().Value(h3ConnKey{}).(*h3Info)
	if info == nil {
		info = &h3Info{}
	}
	st := h3Streams.Get().(*h3Stream)
	st.w, st.rc, st.s, st.body, st.first, st.eof, st.cancelled = w, http.NewResponseController(w), s, r.Body, nil, false, false
	m := &st.m
	m.reset(s, protoH3, info.id, info.ip, true)
	m.sink, m.body = st, nil
	if st.hasBody(r) {
		m.body = st
	}
	m.head = appendH3Head(m.head[:0], r, m.body != nil)
	m.run()
	cancelled := st.cancelled
	st.w, st.rc, st.body, st.first = nil, nil, nil, nil
	h3Streams.Put(st)
	if cancelled {
		panic(http.ErrAbortHandler) // resets the stream: the response was cut short
	}
}

// hasBody reports whether a request body follows: a content-length above
// 0, or without one, a first piece that is not the end (a GET's stream
// ends with its head, and reading says so at once).
func (st *h3Stream) hasBody(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return false
	}
	if r.ContentLength > 0 {
		return true
	}
	st.rc.SetReadDeadline(time.Now().Add(st.s.cfg.HeaderTimeout))
	n, err := io.ReadAtLeast(r.Body, st.buf[:cap(st.buf)], 1)
	st.first, st.eof = st.buf[:n], err != nil
	return n > 0
}

// appendH3Head appends r as an HTTP/1.1 head (as appendH2Head does for
// HTTP/2): request line, Host from :authority, the fields, cookies joined,
// and chunked coding for a body of unknown length.
func appendH3Head(b []byte, r *http.Request, body bool) []byte {
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, r.RequestURI...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, r.Host...)
	b = append(b, "\r\n"...)
	for k, vs := range r.Header {
		if k == "Host" || k == "Cookie" || k == "Content-Length" || k == "Transfer-Encoding" {
			continue
		}
		for _, v := range vs {
			b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
		}
	}
	if cs := r.Header["Cookie"]; len(cs) > 0 {
		b = append(b, "Cookie: "...)
		for i, c := range cs {
			if i > 0 {
				b = append(b, "; "...)
			}
			b = append(b, c...)
		}
		b = append(b, "\r\n"...)
	}
	switch {
	case body && r.ContentLength >= 0:
		b = append(strconv.AppendInt(append(b, "Content-Length: "...), r.ContentLength, 10), "\r\n"...)
	case body:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	return append(b, "\r\n"...)
}

// next is the request body (muxBody), each read within HeaderTimeout.
func (st *h3Stream) next() ([]byte, error) {
	if len(st.first) > 0 {
		p := st.first
		st.first = nil
		return p, nil
	}
	if st.eof {
		return nil, io.EOF
	}
	st.rc.SetReadDeadline(time.Now().Add(st.s.cfg.HeaderTimeout))
	n, err := st.body.Read(st.buf[:cap(st.buf)])
	if err != nil {
		st.eof = true
		if n > 0 && err == io.EOF {
			err = nil
		}
	}
	return st.buf[:n], err
}

// respond sends the head and body (muxSink); the rest is never left over.
func (st *h3Stream) respond(status int, fields []httpwire.Header, body []byte, end bool) ([]byte, error) {
	h := st.w.Header()
	for _, f := range fields {
		k := http.CanonicalHeaderKey(string(f.Name))
		h[k] = append(h[k], string(f.Value))
	}
	st.w.WriteHeader(status)
	if len(body) > 0 {
		if _, err := st.write(body); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (st *h3Stream) data(p []byte, end bool) error {
	if len(p) > 0 {
		if _, err := st.write(p); err != nil {
			return err
		}
	}
	if end {
		return st.rc.Flush()
	}
	return nil
}

// write sends p within WriteTimeout.
func (st *h3Stream) write(p []byte) (int, error) {
	st.rc.SetWriteDeadline(time.Now().Add(st.s.cfg.WriteTimeout))
	return st.w.Write(p)
}

func (st *h3Stream) interim(status int) error {
	st.w.WriteHeader(status)
	return nil
}

func (st *h3Stream) cancel() { st.cancelled = true }
