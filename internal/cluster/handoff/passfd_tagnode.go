package handoff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxTableEntries bounds a node's copy of the shared table; the front's
// table is bounded (policy.Config.MaxURLs) and sends deletions, so this
// only guards against a front that does not.
const maxTableEntries = 1 << 20

// tagRouter is a node's side of tag mode (passfd_tag.go), one per
// FDListener: its copy of the front's shared table, its connections to the
// other nodes' sockets, the moves it has sent and not yet seen
// acknowledged, and the notes it has not yet sent to the front.
type tagRouter struct {
	l     *FDListener
	trust SocketTrust
	delay time.Duration

	mu      sync.Mutex
	self    int              // this node's index, -1 until the front says
	table   map[string]int32 // URL → node
	full    []bool           // by node: at its load limit
	room    int              // connections to hand back rather than move (TableRoom)
	peers   map[int]string   // by node: handoff socket
	clients map[int]*FDClient
	pending map[*FDClient]map[moveKey]*pendingMove
	front   *fdPeer // the front's connection, where notes and hand-backs go
	notes   []byte
	spare   []byte
	armed   bool
	timer   *time.Timer
	// pollTimer reads the other nodes' acknowledgements (pollMoves) delay
	// after a move, while moves are pending: they need no prompt reader
	// (FDClientConfig.PolledReads), and one read settles many moves.
	pollArmed bool
	pollTimer *time.Timer
	closed    bool
	// moves recycles pendingMoves and their byte buffers: a node in tag
	// mode makes one per moved request; dupers the state of dupConn.
	moves, dupers sync.Pool
}

// moveKey names a move: the connection and its move count after it.
type moveKey struct {
	conn uint64
	seq  uint32
}

// pendingMove is a move sent and not yet acknowledged: a duplicate of the
// connection's descriptor and the bytes sent with it, to hand the
// connection to the front if the receiver refuses it or dies.
type pendingMove struct {
	fd   int
	data []byte
	h    FDHeader
	url  string
}

func newTagRouter(l *FDListener) *tagRouter {
	r := &tagRouter{l: l, self: -1, delay: DefaultNoteDelay, table: map[string]int32{}, peers: map[int]string{},
		clients: map[int]*FDClient{}, pending: map[*FDClient]map[moveKey]*pendingMove{}}
	// Peers are trusted as the front trusts this node: sockets in the
	// same folder, served by this user.
	r.trust = SocketTrust{Dir: filepath.Dir(l.path), UID: os.Geteuid()}
	r.timer = time.AfterFunc(time.Hour, r.flush)
	r.timer.Stop()
	r.pollTimer = time.AfterFunc(time.Hour, r.pollMoves)
	r.pollTimer.Stop()
	return r
}

// learn records what a tag-mode handoff says: this node's index and the
// front's connection.
func (r *tagRouter) learn(p *fdPeer, h FDHeader) {
	r.mu.Lock()
	r.self, r.front = int(h.Node), p
	r.mu.Unlock()
}

// applyTable applies an FDTable from the front on p.
func (r *tagRouter) applyTable(p *fdPeer, h FDHeader, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.self, r.front = int(h.Node), p
	var drop []*FDClient
	err := ParseTable(data, func(op uint8, node int, text []byte) {
		switch op {
		case TableReset:
			clear(r.table)
		case TablePeer:
			if old, ok := r.peers[node]; ok && old != string(text) {
				if c := r.clients[node]; c != nil {
					drop = append(drop, c) // a new socket: redial
					delete(r.clients, node)
				}
			}
			r.peers[node] = string(text)
		case TableFull:
			if node >= 0 && node < 1<<16 {
				for len(r.full) <= node {
					r.full = append(r.full, false)
				}
				r.full[node] = len(text) > 0
			}
		case TableRoom:
			if len(text) == 4 {
				r.room = int(binary.BigEndian.Uint32(text))
			}
		case TableTag:
			if node < 0 {
				delete(r.table, string(text))
				return
			}
			if len(r.table) >= maxTableEntries {
				clear(r.table)
			}
			r.table[string(text)] = int32(node)
		}
	})
	for _, c := range drop {
		go c.Close()
	}
	return err
}

// selfIndex is this node's index, -1 while unknown.
func (r *tagRouter) selfIndex() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.self
}

// route is the node the table names for url: this node, another node with a
// known socket, or -1 (ask the front: no entry, a full node, no socket, or
// this node's index unknown; or a move the front has room to take instead,
// TableRoom).
func (r *tagRouter) route(url string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.table[url]
	if !ok || r.self < 0 {
		return -1
	}
	i := int(n)
	if i < len(r.full) && r.full[i] {
		return -1
	}
	if i != r.self && r.peers[i] == "" {
		return -1
	}
	if i != r.self && r.room > 0 {
		r.room--
		return -1
	}
	return i
}

// note queues one note for the front, sent within delay.
func (r *tagRouter) note(op uint8, node int, seq uint32, conn uint64, url string) {
	r.mu.Lock()
	r.notes = AppendNote(r.notes, op, node, seq, conn, url)
	now := len(r.notes) >= FDMaxData/2
	if !now && !r.armed && !r.closed {
		r.armed = true
		r.timer.Reset(r.delay)
	}
	r.mu.Unlock()
	if now {
		r.flush()
	}
}

// flush sends the queued notes to the front, in as many FDNote messages as
// they need. Notes without a front to send them to are dropped (the front
// also forgets idle connections on a timer).
func (r *tagRouter) flush() {
	r.mu.Lock()
	b, p, self := r.notes, r.front, r.self
	r.notes, r.spare = r.spare[:0], nil
	r.armed = false
	r.mu.Unlock()
	for off := 0; off < len(b) && p != nil; {
		end := off
		for end < len(b) && end-off+noteHead+maxTagText <= FDMaxData {
			l := int(b[end+17]) | int(b[end+18])<<8
			end += noteHead + l
		}
		if p.send(FDHeader{Kind: FDNote, Node: int32(self)}, b[off:end], nil) != nil {
			r.l.stats.notesLost.Add(1)
			break
		}
		r.l.stats.notes.Add(1)
		off = end
	}
	r.mu.Lock()
	if r.spare == nil {
		r.spare = b[:0]
	}
	r.mu.Unlock()
}

// handBack flushes the notes, then returns c to the front with rest, so the
// front reads what the node did with the connection before it picks anew.
func (r *tagRouter) handBack(c *FDConn, rest []byte) error {
	r.flush()
	r.mu.Lock()
	p, self := r.front, r.self
	r.mu.Unlock()
	if p == nil {
		return errors.New("handoff: no front to hand the connection back to")
	}
	h := c.Header
	h.Kind, h.Flags, h.Node, h.Moves, h.Fetch = FDReturn, 0, int32(self), h.Moves+1, 0
	return p.send(h, rest, c.Conn)
}

// client returns the connection to node's socket, made on first use.
func (r *tagRouter) client(node int) (*FDClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[node]; c != nil {
		return c, nil
	}
	path := r.peers[node]
	if path == "" || r.closed {
		return nil, fmt.Errorf("handoff: no socket for node %d", node)
	}
	var c *FDClient
	c = NewFDClient(FDClientConfig{Path: path, Trust: &r.trust, PolledReads: true,
		OnAck:        func(h FDHeader) { r.acked(c, h) },
		OnDisconnect: func() { r.lost(node, c) }})
	r.clients[node] = c
	return c, nil
}

// moveTo sends c with rest to node and keeps a duplicate of its descriptor
// until node acknowledges (acked) or is lost (lost). On error nothing was
// sent and the caller still owns c.
func (r *tagRouter) moveTo(c *FDConn, node int, url string, rest []byte) error {
	cl, err := r.client(node)
	if err != nil {
		return err
	}
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("handoff: %T has no descriptor", c.Conn)
	}
	dup, err := r.dupConn(sc)
	if err != nil {
		return err
	}
	h := c.Header
	h.Kind, h.Flags, h.Node, h.Moves, h.Fetch = FDMove, FDFlagTag, int32(node), h.Moves+1, 0
	pm, _ := r.moves.Get().(*pendingMove)
	if pm == nil {
		pm = &pendingMove{}
	}
	pm.fd, pm.data, pm.h, pm.url = dup, append(pm.data[:0], rest...), h, url
	k := moveKey{h.Conn, h.Moves}
	r.mu.Lock()
	m := r.pending[cl]
	if m == nil {
		m = map[moveKey]*pendingMove{}
		r.pending[cl] = m
	}
	m[k] = pm
	r.mu.Unlock()
	// The duplicate goes: it is the same socket, and sending a bare
	// descriptor costs no RawConn call for the connection's.
	if err := cl.SendRaw(h, dup, rest); err != nil {
		r.mu.Lock()
		delete(r.pending[cl], k)
		r.mu.Unlock()
		rawCloseFD(dup)
		r.recycle(pm)
		return err
	}
	r.l.stats.moved.Add(1)
	r.armPoll()
	return nil
}

// armPoll makes sure the pending moves' acknowledgements are read within
// delay.
func (r *tagRouter) armPoll() {
	r.mu.Lock()
	if !r.pollArmed && !r.closed {
		r.pollArmed = true
		r.pollTimer.Reset(r.delay)
	}
	r.mu.Unlock()
}

// pollMoves reads the acknowledgements (and ends of stream) that came on
// the connections to the nodes with moves pending, settling those moves
// (acked, lost), and looks again later while some are still pending.
func (r *tagRouter) pollMoves() {
	r.mu.Lock()
	r.pollArmed = false
	var clients []*FDClient
	for c, m := range r.pending {
		if len(m) > 0 {
			clients = append(clients, c)
		}
	}
	r.mu.Unlock()
	for _, c := range clients {
		c.Poll()
	}
	r.mu.Lock()
	more := false
	for _, m := range r.pending {
		more = more || len(m) > 0
	}
	r.mu.Unlock()
	if more {
		r.armPoll()
	}
}

// dupConn duplicates sc's descriptor (close-on-exec). The duplication
// runs under the socket's RawConn (Control holds a reference, so a
// concurrent Close cannot hand us a reused number), through a duper from
// r.dupers, whose step is bound once: no allocation per move.
func (r *tagRouter) dupConn(sc syscall.Conn) (int, error) {
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("handoff: client socket: %w", err)
	}
	d, _ := r.dupers.Get().(*duper)
	if d == nil {
		d = &duper{}
		d.step = d.run
	}
	defer r.dupers.Put(d)
	d.fd, d.err = -1, nil
	if cerr := rc.Control(d.step); cerr != nil {
		return -1, fmt.Errorf("handoff: client socket: %w", cerr)
	}
	if d.err != nil {
		return -1, fmt.Errorf("handoff: dup: %w", d.err)
	}
	return d.fd, nil
}

// duper is dupConn's state: the result of one F_DUPFD_CLOEXEC and the
// step that makes it, bound once.
type duper struct {
	fd   int
	err  error
	step func(fd uintptr)
}

func (d *duper) run(fd uintptr) { d.fd, d.err = rawDupCloexec(fd) }

// rawDupCloexec duplicates fd close-on-exec and rawCloseFD closes a
// descriptor: raw system calls, since neither can block. A bookkept one
// (entersyscall) lets the runtime's sysmon hand the node's only P to
// another thread whenever the kernel preempts the caller inside the call,
// which on a core shared by busy nodes it often does; the thread hand-offs
// that followed (futex wakes, sysmon polling) tripled a moving node's
// context switches per request (docs/benchmarks.md, "Receiving a handed
// connection").
func rawDupCloexec(fd uintptr) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_FCNTL, fd, unix.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func rawCloseFD(fd int) { unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }

// acked settles the move h acknowledges: done (the front is told), or
// refused (the connection goes back to the front).
func (r *tagRouter) acked(cl *FDClient, h FDHeader) {
	k := moveKey{h.Conn, h.Moves}
	r.mu.Lock()
	pm := r.pending[cl][k]
	delete(r.pending[cl], k)
	r.mu.Unlock()
	if pm == nil {
		return
	}
	if h.Flags&FDFlagRefused != 0 {
		r.reroute(pm)
		return
	}
	rawCloseFD(pm.fd)
	r.note(NoteMoved, int(pm.h.Node), pm.h.Moves, pm.h.Conn, pm.url)
	r.recycle(pm)
}

// recycle returns a settled move to the pool.
func (r *tagRouter) recycle(pm *pendingMove) {
	if cap(pm.data) > 16<<10 {
		pm.data = nil
	}
	pm.fd, pm.url, pm.data = -1, "", pm.data[:0]
	r.moves.Put(pm)
}

// lost hands every unacknowledged move to node back to the front: the node
// died or its socket broke before it took them.
func (r *tagRouter) lost(node int, cl *FDClient) {
	r.mu.Lock()
	m := r.pending[cl]
	delete(r.pending, cl)
	if r.clients[node] == cl {
		delete(r.clients, node)
	}
	r.mu.Unlock()
	for _, pm := range m {
		r.reroute(pm)
	}
}

// reroute hands a move that did not happen to the front, which picks again.
func (r *tagRouter) reroute(pm *pendingMove) {
	defer r.recycle(pm)
	defer rawCloseFD(pm.fd)
	r.flush()
	r.mu.Lock()
	p, self := r.front, r.self
	r.mu.Unlock()
	h := pm.h
	h.Kind, h.Flags, h.Node, h.Moves = FDReturn, 0, int32(self), h.Moves+1
	if p == nil || p.sendRaw(h, pm.data, pm.fd) != nil {
		r.l.stats.moveLost.Add(1)
		return
	}
	r.l.stats.rerouted.Add(1)
}

// take handles an FDMove that arrived on p: it is acknowledged (or refused,
// if it names another node or the listener is closing) before anything
// reads the client socket, and queued for Accept.
func (r *tagRouter) take(p *fdPeer, m FDMessage) {
	self := r.selfIndex()
	ack := FDHeader{Kind: FDAck, Node: m.Header.Node, Moves: m.Header.Moves, Conn: m.Header.Conn}
	if self >= 0 && int(m.Header.Node) != self {
		ack.Flags = FDFlagRefused
	}
	select {
	case <-r.l.done:
		ack.Flags = FDFlagRefused
	default:
	}
	if ack.Flags != 0 {
		r.l.stats.refused.Add(1)
		p.send(ack, nil, nil)
		m.Conn.Close() // the sender still has the connection
		return
	}
	if p.send(ack, nil, nil) != nil {
		m.Conn.Close() // the sender sees this socket break and keeps it
		return
	}
	if self < 0 {
		r.mu.Lock()
		r.self = int(m.Header.Node)
		r.mu.Unlock()
	}
	r.l.stats.received.Add(1)
	c := newFDConn(m, p, r)
	select {
	case r.l.conns <- c:
	case <-r.l.done:
		m.Conn.Close()
	}
}

// close stops the router: notes are flushed, and node connections closed
// (their unacknowledged moves go back to the front).
func (r *tagRouter) close() {
	r.mu.Lock()
	r.closed = true
	r.timer.Stop()
	r.pollTimer.Stop()
	clients := make([]*FDClient, 0, len(r.clients))
	for _, c := range r.clients {
		clients = append(clients, c)
	}
	r.mu.Unlock()
	for _, c := range clients {
		c.Close() // reads the acknowledgements that came, then hands the rest back
	}
	r.flush()
}
