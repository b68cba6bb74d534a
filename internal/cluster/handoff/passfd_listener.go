package handoff

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"shoal/internal/base/accept"

	"golang.org/x/sys/unix"
)

// FDConn is a client connection received over a handoff socket. It is a
// net.Conn (the embedded client TCP connection), so a server's accept loop
// can take it from a FDListener like any accepted connection; a server that
// knows about handoff unwraps it with NetConn (keeping sendfile on the
// *net.TCPConn) and starts with Preread.
type FDConn struct {
	net.Conn
	// FDHeader is the message that brought the connection.
	Header FDHeader

	data   []byte
	fdPeer *fdPeer
	router *tagRouter // tag mode (FDFlagTag): the listener's router
	done   bool       // HandBack, MoveTo or Ended succeeded
	// inline holds data when it fits (a request head usually does), so
	// a received connection is one allocation, not two.
	inline [fdConnInline]byte
}

// fdConnInline is the room for client bytes inside an FDConn.
const fdConnInline = 512

// newFDConn makes the FDConn of a received message, with a copy of its
// client bytes; it comes from the listener's pool when one was released.
func newFDConn(m FDMessage, p *fdPeer, r *tagRouter) *FDConn {
	c, _ := p.l.fdConns.Get().(*FDConn)
	if c == nil {
		c = &FDConn{}
	}
	c.Conn, c.Header, c.fdPeer, c.router, c.done = m.Conn, m.Header, p, r, false
	if len(m.Data) <= len(c.inline) {
		c.data = c.inline[:copy(c.inline[:], m.Data)]
	} else {
		c.data = append([]byte(nil), m.Data...)
	}
	return c
}

// Release recycles c: the caller is done with it (closed it, handed it
// back or moved it on) and must not use it, or anything it returned,
// again. Optional: an FDConn never released is garbage as usual.
func (c *FDConn) Release() {
	l := c.fdPeer.l
	*c = FDConn{data: c.inline[:0]}
	l.fdConns.Put(c)
}

// NetConn returns the client connection itself.
func (c *FDConn) NetConn() net.Conn { return c.Conn }

// Preread returns the client bytes the sender had already read: the
// request head and anything pipelined after it. The server must process
// them before reading from the connection.
func (c *FDConn) Preread() []byte { return c.data }

// FetchHint is the node whose memory the first request's object should be
// fetched from (FDHeader.Fetch − 1), -1 for none.
func (c *FDConn) FetchHint() int { return int(c.Header.Fetch) - 1 }

// OneRequest reports whether the sender asked for the connection back after
// its first request (FDFlagReturn).
func (c *FDConn) OneRequest() bool { return c.Header.Flags&FDFlagReturn != 0 }

// HandBack sends the connection back to the front that handed it off, with
// rest (the client bytes read after the served request). On success the
// caller must close its copy and forget the connection; on error it still
// owns it (and may serve it itself).
func (c *FDConn) HandBack(rest []byte) error {
	if c.done {
		return errors.New("handoff: connection already returned or ended")
	}
	if c.router != nil {
		if err := c.router.handBack(c, rest); err != nil {
			c.fdPeer.l.stats.returnErrors.Add(1)
			return err
		}
		c.done = true
		c.fdPeer.l.stats.returned.Add(1)
		return nil
	}
	h := c.Header
	h.Kind, h.Flags, h.Moves, h.Fetch = FDReturn, 0, h.Moves+1, 0
	if err := c.fdPeer.send(h, rest, c.Conn); err != nil {
		c.fdPeer.l.stats.returnErrors.Add(1)
		return err
	}
	c.done = true
	c.fdPeer.l.stats.returned.Add(1)
	return nil
}

// Ended tells the front that a connection handed off with FDFlagReturn or
// FDFlagEnded ended at this node (FDEnded); it does nothing for other
// connections or after HandBack. Best effort: the front also forgets idle
// entries on a timer.
func (c *FDConn) Ended() {
	if c.router != nil && !c.done {
		c.done = true
		c.router.note(NoteEnded, -1, c.Header.Moves, c.Header.Conn, "")
		c.fdPeer.l.stats.ended.Add(1)
		return
	}
	if c.done || c.Header.Flags&(FDFlagReturn|FDFlagEnded) == 0 {
		return
	}
	c.done = true
	h := c.Header
	h.Kind, h.Flags = FDEnded, 0
	if c.fdPeer.send(h, nil, nil) == nil {
		c.fdPeer.l.stats.ended.Add(1)
	}
}

// FDListenerStats counts what a FDListener received.
type FDListenerStats struct {
	Peers        uint64 // front and node connections accepted on the socket
	Received     uint64 // client connections received (from the front or, moved, from nodes)
	Dropped      uint64 // malformed or truncated messages (their descriptors closed)
	Stray        uint64 // extra descriptors received and closed
	Returned     uint64 // connections handed back to the front
	ReturnErrors uint64 // hand-backs that failed (the node kept the connection)
	Ended        uint64 // FDEnded notices or end notes sent
	// Tag mode (passfd_tag.go): Moved counts connections this node moved to
	// another node, Refused moves it refused (misdirected, or closing),
	// Rerouted moves refused or lost by their receiver and handed to the
	// front instead, MoveLost those that could not be (the client's
	// connection closed), Notes the FDNote messages sent and NotesLost
	// those that failed, Strangers peers refused for running as another
	// user.
	Moved, Refused, Rerouted, MoveLost, Notes, NotesLost, Strangers uint64
}

type fdListenerStats struct {
	peers, received, dropped, stray, returned, returnErrors, ended  fdCounter
	moved, refused, rerouted, moveLost, notes, notesLost, strangers fdCounter
}

// FDListener is the receiving end of a handoff socket (a node): it accepts
// SOCK_SEQPACKET connections from fronts on a Unix socket path and yields
// the client connections they send, as *FDConn, through Accept. It
// implements net.FDListener.
type FDListener struct {
	ul    *net.UnixListener
	path  string
	conns chan *FDConn
	done  chan struct{}
	once  sync.Once
	stats fdListenerStats

	mu    sync.Mutex
	peers map[*fdPeer]struct{}
	tag   *tagRouter
	// fdConns recycles released FDConns (Release).
	fdConns sync.Pool
}

// ListenFD creates the handoff socket at path. A stale socket file left by a
// dead process is removed first; a live one (something accepts on it) is an
// error, as is any other kind of file.
func ListenFD(path string) (*FDListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("handoff: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unixpacket", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("handoff: %s is in use by another process", path)
		}
		os.Remove(path)
	}
	ul, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("handoff: listen %s: %w", path, err)
	}
	// Only this user may hand us connections.
	if err := os.Chmod(path, 0o600); err != nil {
		ul.Close()
		return nil, fmt.Errorf("handoff: chmod %s: %w", path, err)
	}
	l := &FDListener{
		ul:    ul,
		path:  path,
		conns: make(chan *FDConn, 256),
		done:  make(chan struct{}),
		peers: map[*fdPeer]struct{}{},
	}
	l.tag = newTagRouter(l)
	go l.acceptPeers()
	return l, nil
}

// Path returns the socket's file name (what a node reports as
// handoff_socket).
func (l *FDListener) Path() string { return l.path }

// Addr implements net.FDListener.
func (l *FDListener) Addr() net.Addr { return l.ul.Addr() }

// Accept implements net.FDListener: it returns the next received client
// connection, a *FDConn.
func (l *FDListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, fmt.Errorf("handoff: accept: %w", net.ErrClosed)
	}
}

// Close stops listening, removes the socket file and closes every front
// connection. FDClient connections still queued for Accept are closed (their
// clients see the connection end).
func (l *FDListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.tag.close()
		l.ul.Close() // also unlinks the path
		l.mu.Lock()
		for p := range l.peers {
			p.uc.Close()
		}
		l.mu.Unlock()
		for {
			select {
			case c := <-l.conns:
				c.Conn.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Stats returns a snapshot of the counters.
func (l *FDListener) Stats() FDListenerStats {
	s := &l.stats
	return FDListenerStats{
		Peers: s.peers.Load(), Received: s.received.Load(), Dropped: s.dropped.Load(), Stray: s.stray.Load(),
		Returned: s.returned.Load(), ReturnErrors: s.returnErrors.Load(), Ended: s.ended.Load(),
		Moved: s.moved.Load(), Refused: s.refused.Load(), Rerouted: s.rerouted.Load(), MoveLost: s.moveLost.Load(),
		Notes: s.notes.Load(), NotesLost: s.notesLost.Load(), Strangers: s.strangers.Load(),
	}
}

// acceptPeers accepts fronts on the handoff socket until it is closed,
// keeping it open through EMFILE and the like (internal/base/accept).
func (l *FDListener) acceptPeers() {
	accept.Loop(l.ul, func(c net.Conn) {
		uc, ok := c.(*net.UnixConn) // always, from a UnixListener
		if !ok || !sameUser(uc) {
			if ok {
				l.stats.strangers.Add(1)
			}
			c.Close()
			return
		}
		rc, err := uc.SyscallConn()
		if err != nil {
			c.Close()
			return
		}
		p := &fdPeer{l: l, uc: uc, rc: rc, snd: newFDSender()}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			uc.Close()
			return
		default:
		}
		l.peers[p] = struct{}{}
		l.mu.Unlock()
		l.stats.peers.Add(1)
		go p.read()
	}, nil)
}

// fdPeer is one front's connection to the handoff socket. Returns go back on
// the same connection, so a node needs no address for the front.
type fdPeer struct {
	l      *FDListener
	uc     *net.UnixConn
	rc     syscall.RawConn // uc's
	sendMu sync.Mutex
	snd    *fdSender
}

// fdPeerSendTimeout bounds a send to a front or node whose socket stays
// full.
const fdPeerSendTimeout = 5 * time.Second

func (p *fdPeer) send(h FDHeader, data []byte, c net.Conn) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	var err error
	if c == nil {
		err = p.snd.send(p.uc, p.rc, h, -1, fdPeerSendTimeout, [][]byte{data})
	} else {
		sc, ok := c.(syscall.Conn)
		if !ok {
			return fmt.Errorf("handoff: %T has no descriptor", c)
		}
		p.snd.msg, err = SendFD(p.uc, h, sc, fdPeerSendTimeout, p.snd.msg, data)
	}
	return err
}

// sendRaw sends h and data with the bare descriptor fd (the caller still
// closes its fd).
func (p *fdPeer) sendRaw(h FDHeader, data []byte, fd int) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	return p.snd.send(p.uc, p.rc, h, fd, fdPeerSendTimeout, [][]byte{data})
}

func (p *fdPeer) read() {
	defer func() {
		p.uc.Close()
		p.l.mu.Lock()
		delete(p.l.peers, p)
		p.l.mu.Unlock()
	}()
	rd, err := newFDReader(p.uc)
	if err != nil {
		return
	}
	buf := make([]byte, FDHeaderLen+FDMaxData)
	for {
		r, err := recvAdopt(rd, buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || !isFDMessageError(err) {
				return
			}
			p.l.stats.dropped.Add(1)
			continue
		}
		p.l.stats.stray.Add(uint64(r.Stray))
		switch r.Header.Kind {
		case FDHandoff:
		case FDMove:
			p.l.tag.take(p, r)
			continue
		case FDTable:
			if p.l.tag.applyTable(p, r.Header, r.Data) != nil {
				p.l.stats.dropped.Add(1)
			}
			continue
		default:
			p.l.stats.dropped.Add(1)
			if r.Conn != nil {
				r.Conn.Close()
			}
			continue
		}
		p.l.stats.received.Add(1)
		var router *tagRouter
		if r.Header.Flags&FDFlagTag != 0 {
			p.l.tag.learn(p, r.Header)
			router = p.l.tag
		}
		c := newFDConn(r, p, router)
		select {
		case p.l.conns <- c:
		case <-p.l.done:
			r.Conn.Close()
			return
		}
	}
}

// recvAdopt is RecvFD for a node: a received descriptor is adopted as the
// connection's own (SockConn) instead of being duplicated by net.FileConn.
func recvAdopt(rd *fdReader, buf []byte) (FDMessage, error) {
	r, err := rd.recv(buf)
	if err != nil || r.FD < 0 {
		return r, err
	}
	c, err := adoptFD(r.FD) // closes it on error
	if err != nil {
		return FDMessage{}, err
	}
	if r.Header.Kind != FDMove {
		// Small answers must not wait for the client's ACK (Nagle):
		// net.FileConn set TCP_NODELAY on every received socket, the
		// front's raw accept path sets none, so the node sets it once,
		// when a connection comes from the front; a node moves it on
		// with the option set (it belongs to the socket).
		unix.SetsockoptInt(c.fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	r.Conn, r.FD = c, -1
	return r, nil
}

// isFDMessageError reports whether err concerns one message (so reading may
// go on) rather than the socket.
func isFDMessageError(err error) bool {
	return errors.Is(err, ErrFDMessage) || errors.Is(err, ErrFDTruncated) || errors.Is(err, ErrNoDescriptor)
}

// TagMode reports whether the connection routes its later requests by the
// front's shared table (FDFlagTag): Route, Served, MoveTo.
func (c *FDConn) TagMode() bool { return c.router != nil }

// Self is this node's index in the front's cluster, -1 while unknown.
func (c *FDConn) Self() int { return c.router.selfIndex() }

// Route is where the shared table sends a request for url (its content
// key): Self() to serve it here, another node's index to move the
// connection there (MoveTo), or -1 when the table cannot tell (HandBack:
// the front picks).
func (c *FDConn) Route(url string) int { return c.router.route(url) }

// Served tells the front (in the next note batch) that this node served a
// request for url on the connection by the table.
func (c *FDConn) Served(url string) {
	c.router.note(NoteServed, c.router.selfIndex(), c.Header.Moves, c.Header.Conn, url)
}

// MoveTo moves the connection to node with rest (the bytes read and not
// processed: the request for url and anything after it). On success the
// caller closes its copy and forgets the connection; the front is told once
// node has acknowledged it. On error nothing was sent and the caller still
// owns the connection (and should hand it back).
func (c *FDConn) MoveTo(node int, url string, rest []byte) error {
	if c.done {
		return errors.New("handoff: connection already moved, returned or ended")
	}
	if err := c.router.moveTo(c, node, url, rest); err != nil {
		return err
	}
	c.done = true
	return nil
}
