package front

// HTTP/2 at the front (RFC 9113). A client reaches it by ALPN "h2" on a TLS
// listener, or by sending the connection preface with prior knowledge on a
// plain listener when Config.H2C asks for it (RFC 9113 §3.3). Each stream
// is one request, routed by the same dispatch core as an HTTP/1.1 request
// (content-aware per request, not per connection) and relayed over the
// pooled keep-alive node connections (mux.go); the nodes keep speaking
// HTTP/1.1.
//
// Why not golang.org/x/net/http2's Server: it spends more CPU per small
// request on answering alone than HAProxy spends relaying it — a goroutine,
// a Request, header maps and channel hand-offs to its serve loop per
// stream (measured in docs/benchmarks.md). This package keeps x/net's
// Framer (frame parsing and its checks) and HPACK decoder, and adds a
// connection of its own (h2conn.go, h2stream.go, h2write.go): one
// reader goroutine that validates frames and hands each stream to a kept
// worker goroutine (workers.go), responses encoded without the shared
// HPACK state (hpackenc.go) so a stream builds its frames without a lock,
// and one buffer of outgoing frames that whichever stream finds it idle
// writes out, so the responses of many streams leave in one TLS record and
// one write; streams wait while that buffer is full (maxPendData).
//
// Limits (H2Config) answer the known attacks on HTTP/2 servers: concurrent
// streams are counted while their handler runs, not while the client
// keeps them open, so resetting streams at once ("rapid reset",
// CVE-2023-44487) frees nothing; a client whose streams are mostly reset,
// refused or malformed is sent GOAWAY ENHANCE_YOUR_CALM (HAProxy's
// "glitches"); a header block is bounded in bytes and in frames
// (CONTINUATION flood, CVE-2024-27316); control frames that would pile up
// unsent behind a client that does not read (PING and SETTINGS floods) end
// the connection.

// H2Config tunes HTTP/2. Zero fields take the defaults in
// DefaultH2Config, those of HAProxy and nginx where they have one.
type H2Config struct {
	// MaxConcurrentStreams bounds the streams a connection may have in
	// progress (SETTINGS_MAX_CONCURRENT_STREAMS); one more is refused with
	// REFUSED_STREAM. Default 100 (HAProxy's tune.h2.max-concurrent-streams;
	// nginx uses 128).
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a request's decoded header list
	// (SETTINGS_MAX_HEADER_LIST_SIZE, RFC 9113 §6.5.2): a larger one is
	// answered 431, and a header block twice as large ends the connection.
	// Default 16 KiB.
	MaxHeaderListSize uint32
	// MaxHeaderFrames bounds the HEADERS and CONTINUATION frames of one
	// header block. Default 32.
	MaxHeaderFrames int
	// HeaderTableSize is the HPACK decoder's dynamic table
	// (SETTINGS_HEADER_TABLE_SIZE). Default 4096, the protocol's.
	HeaderTableSize uint32
	// StreamWindow is each stream's receive window for request bodies
	// (SETTINGS_INITIAL_WINDOW_SIZE); ConnWindow the connection's. A body
	// waits at the client once the windows are used up, so they bound the
	// memory a connection's uploads take. Defaults 256 KiB and 1 MiB.
	StreamWindow, ConnWindow uint32
	// MaxGlitches is how many reset, refused or malformed streams a
	// connection may cause before it is sent GOAWAY ENHANCE_YOUR_CALM, once
	// they are also more than half of its streams. Default 1000.
	MaxGlitches int
	// MaxPendingControl bounds the bytes of frames queued behind a client
	// that does not read; past it the connection is closed. Default 1 MiB.
	MaxPendingControl int
}

// DefaultH2Config returns the HTTP/2 defaults.
func DefaultH2Config() H2Config {
	return H2Config{
		MaxConcurrentStreams: 100,
		MaxHeaderListSize:    16 << 10,
		MaxHeaderFrames:      32,
		HeaderTableSize:      4096,
		StreamWindow:         256 << 10,
		ConnWindow:           1 << 20,
		MaxGlitches:          1000,
		MaxPendingControl:    1 << 20,
	}
}

func (c *H2Config) fill() {
	d := DefaultH2Config()
	orDefault(&c.MaxHeaderFrames, d.MaxHeaderFrames)
	orDefault(&c.MaxGlitches, d.MaxGlitches)
	orDefault(&c.MaxPendingControl, d.MaxPendingControl)
	for _, p := range []struct {
		v *uint32
		d uint32
	}{{&c.MaxConcurrentStreams, d.MaxConcurrentStreams},
		{&c.MaxHeaderListSize, d.MaxHeaderListSize}, {&c.HeaderTableSize, d.HeaderTableSize},
		{&c.StreamWindow, d.StreamWindow}, {&c.ConnWindow, d.ConnWindow}} {
		if *p.v == 0 {
			*p.v = p.d
		}
	}
	// Below the protocol's 65535 a client could pass the window before it
	// saw the SETTINGS that lowered it.
	c.StreamWindow = min(max(c.StreamWindow, 65535), 1<<31-1)
	c.ConnWindow = min(max(c.ConnWindow, 65535), 1<<31-1)
}

// ALPN is the protocol list a TLS listener offers for a front with cfg:
// h2 first unless HTTP/2 is off, then http/1.1 (RFC 7301).
func ALPN(cfg Config) []string {
	if cfg.NoHTTP2 {
		return []string{"http/1.1"}
	}
	return []string{"h2", "http/1.1"}
}

// h2Preface is the client connection preface (RFC 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// h2PrefaceState reports whether b (the first bytes of a plain
// connection) is the HTTP/2 preface (1), could still become it (0), or is
// not it (-1).
func h2PrefaceState(b []byte) int {
	n := min(len(b), len(h2Preface))
	if string(b[:n]) != h2Preface[:n] {
		return -1
	}
	if n == len(h2Preface) {
		return 1
	}
	return 0
}
