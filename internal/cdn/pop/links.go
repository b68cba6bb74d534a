package pop

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/accept"
	"shoal/internal/base/peerwire"
)

// Frame payloads start with the protocol they carry.
const (
	protoNop   byte = 0 // keepalive, so idle links survive the read deadline
	protoMBPP  byte = 1
	protoChord byte = 2
)

type inbound struct {
	from  uint64
	proto byte
	body  []byte
}

type link struct {
	c    *peerwire.Conn
	out  chan []byte
	addr string // dialled address, "" for accepted links
	peer uint64
	once sync.Once
}

// links is the set of authenticated peer connections, by peer ID and by
// dialled address. Frames to a peer with no link dial it in the background;
// a failed or slow link drops frames (MBPP and Chord retransmit).
type links struct {
	cfg *peerwire.Config
	log *slog.Logger
	in  chan inbound

	mu      sync.Mutex
	byID    map[uint64]*link
	byAddr  map[string]*link
	dialing map[string][][]byte
	authErr map[string]error
	closed  bool
	// inbound counts accepted links still open; maxLinks bounds them
	// (defaultMaxLinks; lowered by tests).
	inbound, maxLinks int
	// shaking counts handshakes in progress by remote address.
	shaking map[string]int

	// linksRefused counts authenticated peer connections closed because
	// maxLinks accepted links were already open.
	linksRefused atomic.Int64

	// handshakesRefused counts peer connections closed because
	// maxHandshakes (or maxHandshakesPerIP from their address) were
	// already waiting to authenticate.
	handshakesRefused atomic.Int64
	// handshaking counts peer connections accepted and not yet
	// authenticated or closed; it never exceeds maxHandshakes.
	handshaking atomic.Int64

	// cut is the peers whose frames are dropped both ways, as a network
	// partition would lose them (setCut; empty outside tests, which
	// partition PoPs in one process with it).
	cut map[uint64]bool
}

// setCut drops every frame to and from the peers ids from now on (none:
// the partition heals). The links stay open, so the PoPs find the
// partition as they would a lost route: by silence.
func (ls *links) setCut(ids ...uint64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.cut = map[uint64]bool{}
	for _, id := range ids {
		ls.cut[id] = true
	}
}

// isCut reports whether frames of peer id are dropped.
func (ls *links) isCut(id uint64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.cut[id]
}

func newLinks(cfg *peerwire.Config, log *slog.Logger) *links {
	return &links{cfg: cfg, log: log, in: make(chan inbound, 1024), byID: map[uint64]*link{},
		byAddr: map[string]*link{}, dialing: map[string][][]byte{}, authErr: map[string]error{},
		maxLinks: defaultMaxLinks, shaking: map[string]int{}}
}

// dial connects and authenticates to addr now (used by a joiner, which must
// know at once whether its seed is accepted).
func (ls *links) dial(addr string) (*link, error) {
	nc, err := net.DialTimeout("tcp", addr, ls.cfg.HandshakeTimeout)
	if err != nil {
		return nil, err
	}
	c, err := peerwire.Client(nc, ls.cfg)
	if err != nil {
		nc.Close()
		if errors.Is(err, peerwire.ErrAuth) {
			ls.mu.Lock()
			ls.authErr[addr] = err
			ls.mu.Unlock()
		}
		return nil, err
	}
	return ls.add(c, addr), nil
}

func (ls *links) add(c *peerwire.Conn, addr string) *link {
	l := &link{c: c, out: make(chan []byte, 256), addr: addr, peer: c.Peer()}
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		c.Close()
		return l
	}
	ls.byID[l.peer] = l
	if addr != "" {
		ls.byAddr[addr] = l
	} else {
		ls.inbound++
	}
	ls.mu.Unlock()
	go ls.reader(l)
	go ls.writer(l)
	return l
}

// addInbound adds an accepted link unless maxLinks accepted links are
// already open; over the cap it is closed and counted.
func (ls *links) addInbound(c *peerwire.Conn) {
	ls.mu.Lock()
	full := ls.inbound >= ls.maxLinks
	ls.mu.Unlock()
	if full {
		ls.linksRefused.Add(1)
		ls.log.Warn("peer link refused: too many accepted links", "peer", c.NetConn().RemoteAddr().String(), "max", ls.maxLinks)
		c.Close()
		return
	}
	ls.add(c, "")
}

// drop closes a link; its out channel is closed under ls.mu, where every
// send happens, so nothing sends on it afterwards.
func (ls *links) drop(l *link) {
	l.once.Do(func() {
		l.c.Close()
		ls.mu.Lock()
		if ls.byID[l.peer] == l {
			delete(ls.byID, l.peer)
		}
		if l.addr != "" && ls.byAddr[l.addr] == l {
			delete(ls.byAddr, l.addr)
		}
		if l.addr == "" {
			ls.inbound--
		}
		close(l.out)
		ls.mu.Unlock()
	})
}

func (ls *links) reader(l *link) {
	defer ls.drop(l)
	for {
		b, err := l.c.Recv()
		if err != nil {
			return
		}
		// Acknowledge at once: a delayed ACK would inflate the kernel's
		// smoothed RTT, which is MBPP's link measurement.
		quickAck(l.c.NetConn())
		if len(b) == 0 || b[0] == protoNop || ls.isCut(l.peer) {
			continue
		}
		ls.in <- inbound{from: l.peer, proto: b[0], body: append([]byte(nil), b[1:]...)}
	}
}

func (ls *links) writer(l *link) {
	for f := range l.out {
		if err := l.c.Send(f); err != nil {
			go ls.drop(l)
			for range l.out {
			}
			return
		}
	}
}

// send queues frame to the peer id (any link to it) or else to addr.
func (ls *links) send(id uint64, addr string, frame []byte) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return
	}
	l := ls.byID[id]
	if l == nil && addr != "" {
		l = ls.byAddr[addr]
	}
	if ls.cut[id] || l != nil && ls.cut[l.peer] {
		return
	}
	if l != nil {
		select {
		case l.out <- frame:
		default: // full: drop, the protocols retransmit
		}
		return
	}
	if addr == "" {
		return
	}
	if q, ok := ls.dialing[addr]; ok {
		if len(q) < 64 {
			ls.dialing[addr] = append(q, frame)
		}
		return
	}
	ls.dialing[addr] = [][]byte{frame}
	go func() {
		l, err := ls.dial(addr)
		ls.mu.Lock()
		q := ls.dialing[addr]
		delete(ls.dialing, addr)
		ls.mu.Unlock()
		if err != nil {
			ls.log.Debug("peer dial failed", "addr", addr, "err", err)
			return
		}
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.byID[l.peer] != l || ls.cut[l.peer] {
			return // already dropped, or cut off
		}
		for _, f := range q {
			select {
			case l.out <- f:
			default:
			}
		}
	}()
}

// connected reports whether a link to id exists.
func (ls *links) connected(id uint64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.byID[id] != nil
}

// each calls f for every link.
func (ls *links) each(f func(*link)) {
	ls.mu.Lock()
	all := make([]*link, 0, len(ls.byID))
	for _, l := range ls.byID {
		all = append(all, l)
	}
	ls.mu.Unlock()
	for _, l := range all {
		f(l)
	}
}

// maxHandshakes bounds the peer connections that have not yet proved the
// seed: each costs a goroutine and a proof-sized buffer for at most the
// handshake timeout (which holds for the whole handshake), so a stranger
// opening connections cannot make the PoP allocate without bound.
// maxHandshakesPerIP keeps one address from taking every slot: a real PoP
// dials a peer once at a time, so a handful per address is plenty, while
// strangers on one address can no longer lock real PoPs out.
const (
	maxHandshakes      = 64
	maxHandshakesPerIP = 8
)

// defaultMaxLinks bounds the authenticated links a PoP accepts (each holds
// two goroutines and a 256-frame queue). A PoP dials and is dialled by
// the PoPs of its view and Chord fingers, far fewer than this; the bound
// only stops a holder of the seed from opening links without limit.
const defaultMaxLinks = 512

// serve accepts peers on ln until it is closed. Connections beyond
// maxHandshakes unauthenticated ones, or maxHandshakesPerIP from one
// address, are closed at once and counted; accept errors such as EMFILE
// back off instead of ending the loop (internal/base/accept).
func (ls *links) serve(ln net.Listener) {
	pending := make(chan struct{}, maxHandshakes)
	accept.Loop(ln, func(nc net.Conn) {
		ip := remoteIP(nc)
		if !ls.reserve(ip, pending) {
			ls.handshakesRefused.Add(1)
			nc.Close()
			return
		}
		go func() {
			c, err := peerwire.Server(nc, ls.cfg)
			ls.release(ip, pending)
			if err != nil {
				nc.Close()
				return
			}
			ls.addInbound(c)
		}()
	}, func(err error, wait time.Duration) {
		ls.log.Warn("peer accept", "err", err, "retry_in", wait)
	})
}

// reserve takes a handshake slot for a connection from ip, if one is free
// overall and ip holds fewer than maxHandshakesPerIP.
func (ls *links) reserve(ip string, pending chan struct{}) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.shaking[ip] >= maxHandshakesPerIP {
		return false
	}
	select {
	case pending <- struct{}{}:
	default:
		return false
	}
	ls.shaking[ip]++
	ls.handshaking.Add(1)
	return true
}

// release gives back the slot reserve took.
func (ls *links) release(ip string, pending chan struct{}) {
	ls.mu.Lock()
	if ls.shaking[ip]--; ls.shaking[ip] <= 0 {
		delete(ls.shaking, ip)
	}
	ls.handshaking.Add(-1)
	ls.mu.Unlock()
	<-pending
}

// remoteIP is nc's remote address without the port.
func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return nc.RemoteAddr().String()
}

func (ls *links) close() {
	ls.mu.Lock()
	ls.closed = true
	ls.mu.Unlock()
	ls.each(ls.drop)
}

// keepalive sends a nop on every link.
func (ls *links) keepalive() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range ls.byID {
		select {
		case l.out <- []byte{protoNop}:
		default:
		}
	}
}
