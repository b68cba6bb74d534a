package accept

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound a listener served by net/http (the admin API, a PoP's
// edge; Bound and Listener.HTTPServer), as the front and the nodes bound theirs: without them 500 idle
// keep-alive connections stayed open for as long as their clients liked,
// and 1,100 of them under a descriptor limit of 1,024 made every port of
// the process time out. A zero field is no bound.
type Limits struct {
	// MaxConns is the most connections open at once; one more is closed
	// as soon as it is accepted (it costs no descriptor beyond that
	// instant), and counted.
	MaxConns int
	// MaxPerIP is the most connections open at once from one address.
	MaxPerIP int
	// HeaderTimeout is how long a client may take to send a request head
	// (slowloris); ReadTimeout the whole request, body included.
	HeaderTimeout, ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no next
	// request.
	IdleTimeout time.Duration
	// WriteTimeout bounds each write to the client: a client that takes
	// no response bytes for this long is closed (nginx's send_timeout; a
	// large response may take longer in total).
	WriteTimeout time.Duration
}

// Listener is a net.Listener whose Accept returns only connections within
// its Limits' bounds. At MaxConns the connection idle the longest (between
// requests, or not yet sending one, for at least shedMinIdle) is closed to
// make room, as nginx drains keep-alive connections (ngx_drain_connections)
// and the front sheds them: a flood of idle connections cannot lock the
// port's real clients out. With none idle, or at MaxPerIP, the new
// connection is closed at once and counted.
type Listener struct {
	net.Listener
	l Limits

	mu    sync.Mutex
	conns map[*boundConn]struct{}
	perIP map[netip.Addr]int

	// Refused counts connections closed at a bound; Shed the idle ones
	// closed to make room.
	Refused, Shed atomic.Uint64
}

// Bound wraps ln with l's connection bounds and write timeout; serve it
// with its HTTPServer, whose state changes tell it which connections are
// idle.
func Bound(ln net.Listener, l Limits) *Listener {
	return &Listener{Listener: ln, l: l, conns: map[*boundConn]struct{}{}, perIP: map[netip.Addr]int{}}
}

// HTTPServer returns an http.Server for h with the Limits' timeouts,
// reporting its connections' states to b.
func (b *Listener) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: b.l.HeaderTimeout, ReadTimeout: b.l.ReadTimeout,
		IdleTimeout: b.l.IdleTimeout, MaxHeaderBytes: 64 << 10, ConnState: b.connState}
}

// Open returns how many accepted connections are still open.
func (b *Listener) Open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// Accept returns the next connection within the bounds.
func (b *Listener) Accept() (net.Conn, error) {
	for {
		c, err := b.Listener.Accept()
		if err != nil {
			return nil, err
		}
		bc := &boundConn{Conn: c, b: b, ip: addrOf(c)}
		bc.since.Store(time.Now().UnixNano())
		if b.admit(bc) {
			return bc, nil
		}
		b.Refused.Add(1)
		c.Close()
	}
}

// shedMinIdle is the least time a connection must have been idle to be
// closed to make room: one just accepted, or just answered, is idle only
// until the request usually already on its way arrives.
const shedMinIdle = 20 * time.Millisecond

func (b *Listener) admit(bc *boundConn) bool {
	var victim *boundConn
	b.mu.Lock()
	if b.l.MaxPerIP > 0 && bc.ip.IsValid() && b.perIP[bc.ip] >= b.l.MaxPerIP {
		b.mu.Unlock()
		return false
	}
	if b.l.MaxConns > 0 && len(b.conns) >= b.l.MaxConns {
		if victim = b.longestIdle(); victim == nil {
			b.mu.Unlock()
			return false
		}
		b.forget(victim)
	}
	b.conns[bc] = struct{}{}
	if bc.ip.IsValid() {
		b.perIP[bc.ip]++
	}
	b.mu.Unlock()
	if victim != nil {
		b.Shed.Add(1)
		victim.Conn.Close()
	}
	return true
}

// longestIdle returns the connection idle the longest, at least
// shedMinIdle; nil when none is. b.mu is held.
func (b *Listener) longestIdle() *boundConn {
	var best *boundConn
	old := time.Now().Add(-shedMinIdle).UnixNano()
	for c := range b.conns {
		if c.busy.Load() {
			continue
		}
		if at := c.since.Load(); at <= old && (best == nil || at < best.since.Load()) {
			best = c
		}
	}
	return best
}

// forget frees c's slot once. b.mu is held.
func (b *Listener) forget(c *boundConn) {
	if _, ok := b.conns[c]; !ok {
		return
	}
	delete(b.conns, c)
	if c.ip.IsValid() {
		if b.perIP[c.ip]--; b.perIP[c.ip] <= 0 {
			delete(b.perIP, c.ip)
		}
	}
}

// connState follows net/http's view of each connection: active while a
// request is served, idle (since when) otherwise.
func (b *Listener) connState(c net.Conn, s http.ConnState) {
	bc, ok := c.(*boundConn)
	if !ok {
		return
	}
	switch s {
	case http.StateActive:
		bc.busy.Store(true)
	case http.StateIdle:
		bc.since.Store(time.Now().UnixNano())
		bc.busy.Store(false)
	case http.StateHijacked:
		bc.busy.Store(true) // no longer the server's to judge
	}
}

// addrOf is c's remote IP address, invalid when it has none (a Unix
// socket): such a connection counts only against MaxConns.
func addrOf(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// boundConn frees its slot on Close, sets the write deadline before each
// write, and carries its state for shedding.
type boundConn struct {
	net.Conn
	b     *Listener
	ip    netip.Addr
	busy  atomic.Bool
	since atomic.Int64 // unix ns: accepted, or last went idle
}

func (c *boundConn) Write(p []byte) (int, error) {
	if d := c.b.l.WriteTimeout; d > 0 {
		c.Conn.SetWriteDeadline(time.Now().Add(d))
	}
	return c.Conn.Write(p)
}

func (c *boundConn) Close() error {
	c.b.mu.Lock()
	c.b.forget(c)
	c.b.mu.Unlock()
	return c.Conn.Close()
}
