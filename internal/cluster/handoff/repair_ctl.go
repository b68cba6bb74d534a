//go:build linux

package handoff

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/base/accept"
)

// The repair path's control channel: one TCP connection from the front to
// each node's handoff port, carrying authenticated frames (repair_msg.go)
// both ways. The front sends MsgHandoff and waits for the node's
// MsgHandoffAck; the node later sends MsgFinHandoff for each moved
// connection that ended. If the channel breaks, the front assumes the node
// is gone and drops all of its flows (their clients then get resets from
// the front instead of hanging).

// readFrame reads one whole frame travelling in direction dir into buf
// (grown as needed). It checks the header's tag (NodeAuth.OpenHeader)
// before it allocates or reads anything more, so a peer without the key
// costs no more than the reader's buffer. When the rest of the frame is not
// buffered yet and c is not nil, it must arrive within frameTimeout; the
// read deadline is cleared afterwards.
func readFrame(r *bufio.Reader, buf []byte, na *NodeAuth, dir Direction, c net.Conn, frameTimeout time.Duration) ([]byte, error) {
	hdr, err := r.Peek(FrameHeaderLen)
	if err != nil {
		return buf, err
	}
	n, err := na.OpenHeader(hdr, dir)
	if err != nil {
		return buf, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	timed := c != nil && r.Buffered() < n
	if timed {
		c.SetReadDeadline(time.Now().Add(frameTimeout))
	}
	_, err = io.ReadFull(r, buf)
	if timed && err == nil {
		err = c.SetReadDeadline(time.Time{})
	}
	return buf, err
}

// addrPortOf returns a TCP address's IP and port.
func addrPortOf(a net.Addr) (netip.AddrPort, error) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("handoff: %v is not a TCP address", a)
	}
	return ta.AddrPort(), nil
}

// channelDeadAfter is how long a control channel's peer may leave it
// silent (keep-alive probes unanswered) or leave sent bytes unacknowledged
// before the channel is given up.
const channelDeadAfter = 4 * time.Second

// setKeepAlive makes a control channel notice a peer whose host vanished
// (no FIN, no RST) within channelDeadAfter, instead of the default two
// hours: keep-alive probes while it is idle, and TCP_USER_TIMEOUT while it
// carries data (a front pushes its table every 20–40 ms, and unacknowledged
// data would otherwise be retransmitted for about fifteen minutes, the
// probes never starting).
func setKeepAlive(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 3})
		if rc, err := tc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) {
				unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(channelDeadAfter/time.Millisecond))
			})
		}
	}
}

// ---------------------------------------------------------------- front side

// RepairClient is the front's end of one node's control channel. Create it
// with NewRepairClient; it is safe for concurrent use.
//
// A handoff is asynchronous underneath: HandoffAsync writes the state and
// returns, and the channel's reader goroutine calls the caller back with the
// node's answer; Handoff waits for it. Timeouts are checked by one sweep
// timer per client (every Timeout/4 while answers are outstanding), not by a
// timer per handoff.
type RepairClient struct {
	addr    string
	auth    *Auth
	timeout time.Duration
	onFin   func(Flow, uint32)
	onFins  func([]FinNotice)
	onDown  func(error)
	onTag   func(k MsgKind, p []byte)

	wmu    sync.Mutex // serialises writes and redials
	c      net.Conn
	na     *NodeAuth       // c's node key (bound to the address dialled)
	rc     syscall.RawConn // c's, for writes without the runtime's syscall bookkeeping
	gen    uint64          // bumped per connection
	out    []byte
	nextID atomic.Uint64

	// guarded says the node's last acknowledgement on this connection
	// had AckGuarded (reset when the channel is dialled again); up is
	// c != nil, readable without wmu; greeted, that the node answered the
	// current channel's hello (or none was sent).
	guarded, up, greeted atomic.Bool
	// accepts says the node answered the current channel's hello with
	// AckAccepts.
	accepts    atomic.Bool
	vip        netip.Addr    // sent in MsgHello (invalid: no hello)
	acceptPort uint16        // sent in MsgHello after vip (0: the front accepts)
	hello      chan struct{} // closed when the current channel's MsgHelloAck came (under wmu)

	pmu     sync.Mutex
	pending map[uint64]pendingAck
	epoch   uint64      // sweep ticks so far
	sweep   *time.Timer // armed while pending is not empty
	armed   bool
	closed  atomic.Bool
}

// pendingAck is one handoff waiting for its answer.
type pendingAck struct {
	done  func(error)
	epoch uint64 // RepairClient.epoch when it was sent
}

// sweepTicks is how many sweep periods (Timeout/4 each) an answer may take.
const sweepTicks = 4

// RepairClientConfig configures a RepairClient.
type RepairClientConfig struct {
	// Addr is the node's handoff listener (host:port).
	Addr string
	// Auth holds the cluster key (required; shared with the node); each
	// channel seals under the key of the node at the address it dialled.
	Auth *Auth
	// Timeout bounds dialing and waiting for one acknowledgement
	// (default 2s; an answer is given up between 1 and 1.25 Timeout).
	Timeout time.Duration
	// OnFin is called for each FIN-HANDOFF (from the reader goroutine)
	// with the flow and the incarnation tag of the handoff it ends (the
	// TCPState.RcvSeq that was sent), so that a late notice for an earlier
	// connection on the same 4-tuple cannot end a newer one.
	OnFin func(f Flow, tag uint32)
	// OnFins, if set, replaces OnFin: it receives every notice of one
	// MsgFinHandoff frame at once (a node in tag mode batches them), so
	// that their steering entries can go in one update.
	OnFins func([]FinNotice)
	// OnDown is called when an established channel breaks: every flow
	// moved to this node is now unowned.
	OnDown func(error)
	// VIP, if valid, is sent in a MsgHello when the channel is dialled;
	// the node's answer says whether it guards the address (Guarded).
	VIP netip.Addr
	// AcceptPort, if not 0, asks the node in the hello to accept new
	// connections on VIP:AcceptPort itself (repair_accept.go); the
	// answer says whether it does (Accepts).
	AcceptPort uint16
	// OnTag, if set, receives the tag-mode messages a node sends the
	// front (MsgFlowMoved, MsgFlowLeft, MsgNotes, MsgAsk; repair_tag.go), from the
	// reader goroutine; p is valid only during the call.
	OnTag func(k MsgKind, p []byte)
}

// NewRepairClient returns a client; it dials lazily on the first Handoff.
func NewRepairClient(cfg RepairClientConfig) *RepairClient {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	c := &RepairClient{addr: cfg.Addr, auth: cfg.Auth, timeout: cfg.Timeout, onFin: cfg.OnFin, onFins: cfg.OnFins, onDown: cfg.OnDown,
		onTag: cfg.OnTag, pending: make(map[uint64]pendingAck), vip: cfg.VIP, acceptPort: cfg.AcceptPort}
	c.sweep = time.AfterFunc(time.Hour, c.sweepPending)
	c.sweep.Stop()
	return c
}

// ErrRebuildFailed means the node answered that it could not rebuild the
// socket (nothing was sent to the client; the front may thaw and relay).
var ErrRebuildFailed = errors.New("handoff: node could not rebuild the connection")

// ErrNotSent means the state certainly did not reach the node (nothing was
// written to the channel): the front may thaw the socket and relay.
var ErrNotSent = errors.New("handoff: state not sent")

// ErrChannelBroken is the outcome of the handoffs still waiting for an
// answer when the control channel broke (the node died, or its link): the
// node may or may not have rebuilt the socket (NodeMayOwn).
var ErrChannelBroken = errors.New("handoff: control channel broke")

// ErrNoChannel is returned by HandoffAsync when the node's channel is not
// connected yet: dialing may block, so only Handoff dials.
var ErrNoChannel = fmt.Errorf("%w: control channel not connected", ErrNotSent)

// Handoff sends st and waits for the node's answer. A nil error means the
// node owns the connection now. ErrRebuildFailed or ErrNotSent (and a dial
// error) mean the node does not have it; any other error leaves the outcome
// unknown.
func (c *RepairClient) Handoff(st *TCPState) error {
	ch := make(chan error, 1)
	if err := c.send(st, func(err error) { ch <- err }, true); err != nil {
		return err
	}
	return <-ch
}

// HandoffTag is Handoff of a tag-mode move (MsgTagHandoff): pre is the
// move's tag header (AppendTagHandoff), sent between the handoff's id and
// the state.
func (c *RepairClient) HandoffTag(pre []byte, st *TCPState) error {
	ch := make(chan error, 1)
	if err := c.sendKind(MsgTagHandoff, pre, st, func(err error) { ch <- err }, true); err != nil {
		return err
	}
	return <-ch
}

// SendMsg sends one frame of kind k with payload p on the channel, which
// must be up (ErrNoChannel otherwise): the tag-mode messages that carry no
// connection (MsgTable, MsgAnswer).
func (c *RepairClient) SendMsg(k MsgKind, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.c == nil {
		return ErrNoChannel
	}
	c.out = c.na.Seal(c.out[:0], ToNode, k, p)
	if _, err := c.writeLocked(c.c, c.rc); err != nil {
		return fmt.Errorf("handoff: send to %s: %w", c.addr, err)
	}
	return nil
}

// writeLocked writes c.out (with c.wmu held) on conn: with a raw system
// call first, which never blocks and does not wake the runtime's sysmon (a
// bookkept write did, for every table push), and the blocking way, bounded
// by the timeout, for what the socket buffer did not take. It returns how
// many bytes left.
func (c *RepairClient) writeLocked(conn net.Conn, rc syscall.RawConn) (int, error) {
	var n int
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		for {
			n, err = rawWrite(fd, c.out)
			if err != unix.EINTR {
				return
			}
		}
	}); cerr != nil {
		n, err = 0, cerr
	}
	if err == unix.EAGAIN {
		n, err = 0, nil
	}
	if err == nil && n < len(c.out) {
		// The socket buffer is full: finish the frame the blocking way.
		conn.SetWriteDeadline(time.Now().Add(c.timeout))
		var m int
		m, err = conn.Write(c.out[n:])
		n += m
	}
	return n, err
}

// Generation counts the channel's connections: it changes when the
// channel is dialled again (the node then needs the whole table).
func (c *RepairClient) Generation() uint64 {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.gen
}

// HandoffAsync sends st without waiting for the answer and without
// blocking (unless the channel's socket buffer is full). If it returns nil,
// done is called exactly once, from another goroutine, with what Handoff
// would have returned; it must not block. If it returns an error (wrapping
// ErrNotSent or ErrRebuildFailed), nothing reached the node and done is
// never called. It does not dial: before the first Handoff it returns
// ErrNoChannel.
func (c *RepairClient) HandoffAsync(st *TCPState, done func(error)) error {
	return c.send(st, done, false)
}

func (c *RepairClient) send(st *TCPState, done func(error), dial bool) error {
	return c.sendKind(MsgHandoff, nil, st, done, dial)
}

// sendKind sends a handoff of kind k: the id, pre and the state.
func (c *RepairClient) sendKind(k MsgKind, pre []byte, st *TCPState, done func(error), dial bool) error {
	if c.closed.Load() {
		return fmt.Errorf("%w: repair client closed", ErrNotSent)
	}
	if n := stateFixed + 8 + len(st.RecvQueue) + len(st.SendQueue); n > MaxFramePayload {
		// Nothing was sent: the caller may thaw the socket and relay.
		return fmt.Errorf("%w: state of %d bytes exceeds %d", ErrRebuildFailed, n, MaxFramePayload)
	}
	c.wmu.Lock()
	if c.c == nil {
		if !dial {
			c.wmu.Unlock()
			return ErrNoChannel
		}
		if err := c.dialLocked(); err != nil {
			c.wmu.Unlock()
			return err
		}
	}
	id := c.nextID.Add(1)
	p := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(pre)+stateFixed+len(st.RecvQueue)+len(st.SendQueue)), id)
	p = append(p, pre...)
	p = st.AppendBinary(p)
	c.out = c.na.Seal(c.out[:0], ToNode, k, p)
	// Registered before the write: the answer may come back at once.
	c.pmu.Lock()
	c.pending[id] = pendingAck{done: done, epoch: c.epoch}
	if !c.armed {
		c.armed = true
		c.sweep.Reset(c.timeout / sweepTicks)
	}
	c.pmu.Unlock()
	conn := c.c
	n, err := c.writeLocked(conn, c.rc)
	c.wmu.Unlock()
	if err != nil {
		if n == 0 {
			c.takePending(id)
			c.drop(conn, err)
			return fmt.Errorf("%w: send to %s: %v", ErrNotSent, c.addr, err)
		}
		// Part of the frame left: the node may read it whole only if it
		// also got the rest, which it did not; still, the outcome is
		// reported through done like any other unknown one.
		c.drop(conn, err)
	}
	return nil
}

// takePending removes and returns the waiter of handoff id.
func (c *RepairClient) takePending(id uint64) func(error) {
	c.pmu.Lock()
	pa, ok := c.pending[id]
	delete(c.pending, id)
	c.pmu.Unlock()
	if !ok {
		return nil
	}
	return pa.done
}

// sweepPending gives up the handoffs that have waited sweepTicks periods.
func (c *RepairClient) sweepPending() {
	var expired []func(error)
	c.pmu.Lock()
	c.epoch++
	for id, pa := range c.pending {
		if c.epoch-pa.epoch > sweepTicks {
			expired = append(expired, pa.done)
			delete(c.pending, id)
		}
	}
	if len(c.pending) > 0 {
		c.sweep.Reset(c.timeout / sweepTicks)
	} else {
		c.armed = false
	}
	c.pmu.Unlock()
	for _, done := range expired {
		done(fmt.Errorf("handoff: %s: no answer within %v", c.addr, c.timeout))
	}
}

// failPending answers every outstanding handoff with err.
func (c *RepairClient) failPending(err error) {
	c.pmu.Lock()
	ps := c.pending
	c.pending = make(map[uint64]pendingAck)
	c.pmu.Unlock()
	for _, pa := range ps {
		pa.done(err)
	}
}

func (c *RepairClient) dialLocked() error {
	conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
	if err != nil {
		return fmt.Errorf("handoff: dial %s: %w", c.addr, err)
	}
	rc, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		conn.Close()
		return fmt.Errorf("handoff: dial %s: %w", c.addr, err)
	}
	ap, err := addrPortOf(conn.RemoteAddr())
	var na *NodeAuth
	if err == nil {
		na, err = c.auth.ForNode(ap)
	}
	if err != nil {
		conn.Close()
		return fmt.Errorf("handoff: dial %s: %w", c.addr, err)
	}
	setKeepAlive(conn)
	hello := make(chan struct{})
	if c.vip.Is4() {
		a := c.vip.As4()
		p := a[:]
		if c.acceptPort != 0 {
			p = binary.BigEndian.AppendUint16(p, c.acceptPort)
		}
		conn.SetWriteDeadline(time.Now().Add(c.timeout))
		if _, err := conn.Write(na.Seal(nil, ToNode, MsgHello, p)); err != nil {
			conn.Close()
			return fmt.Errorf("handoff: hello to %s: %w", c.addr, err)
		}
	} else {
		close(hello)
	}
	c.greeted.Store(!c.vip.Is4())
	c.guarded.Store(false)
	c.accepts.Store(false)
	c.c, c.rc, c.na, c.hello = conn, rc, na, hello
	c.up.Store(true)
	c.gen++
	go c.read(conn, rc, na, hello)
	return nil
}

// Dial connects the control channel if it is not up, and waits (at most
// Timeout) for the node's answer to the hello, so that Guarded is known
// before the first handoff.
func (c *RepairClient) Dial() error {
	if c.Connected() {
		return nil
	}
	if c.closed.Load() {
		return fmt.Errorf("%w: repair client closed", ErrNotSent)
	}
	c.wmu.Lock()
	if c.c == nil {
		if err := c.dialLocked(); err != nil {
			c.wmu.Unlock()
			return err
		}
	}
	hello := c.hello
	c.wmu.Unlock()
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case <-hello:
	case <-t.C: // an older node that does not answer: not guarded
	}
	return nil
}

// drop forgets a broken channel (once) and tells the owner.
func (c *RepairClient) drop(conn net.Conn, err error) {
	c.wmu.Lock()
	mine := c.c == conn
	if mine {
		c.c, c.rc = nil, nil
		c.up.Store(false)
	}
	c.wmu.Unlock()
	conn.Close()
	if !mine {
		return
	}
	c.failPending(fmt.Errorf("%w: %s: %w", ErrChannelBroken, c.addr, err))
	if c.onDown != nil && !c.closed.Load() {
		c.onDown(err)
	}
}

// rawConnReader reads a connection through its RawConn: it waits in the
// netpoller like net.Conn.Read but reads with a raw system call (rawsys.go).
type rawConnReader struct{ rc syscall.RawConn }

func (r rawConnReader) Read(p []byte) (int, error) {
	var n int
	var err error
	if cerr := r.rc.Read(func(fd uintptr) bool {
		for {
			n, err = rawRead(fd, p)
			if err != unix.EINTR {
				return err != unix.EAGAIN
			}
		}
	}); cerr != nil {
		return 0, cerr
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (c *RepairClient) read(conn net.Conn, rc syscall.RawConn, na *NodeAuth, hello chan struct{}) {
	helloOpen := c.vip.Is4()
	defer func() {
		if helloOpen {
			close(hello) // the channel broke before the answer
		}
	}()
	r := bufio.NewReaderSize(rawConnReader{rc}, 32<<10) // a node's batched frames in one read
	var buf []byte
	for {
		var err error
		buf, err = readFrame(r, buf, na, ToFront, conn, defaultFrameTimeout)
		var k MsgKind
		var p []byte
		if err == nil {
			k, p, err = na.Open(buf, ToFront)
		}
		if err != nil {
			// A refused frame (counted by Auth) ends the channel: the
			// stream can no longer be trusted to be in step.
			c.drop(conn, err)
			return
		}
		switch k {
		case MsgHandoffAck:
			if len(p) < 9 {
				continue
			}
			done := c.takePending(binary.BigEndian.Uint64(p))
			if done == nil {
				continue // given up already
			}
			if p[8] != 0 {
				done(fmt.Errorf("%w: %s: %s", ErrRebuildFailed, c.addr, p[9:]))
			} else {
				c.guarded.Store(len(p) > 9 && p[9]&AckGuarded != 0)
				done(nil)
			}
		case MsgHelloAck:
			if helloOpen {
				c.guarded.Store(len(p) > 0 && p[0]&AckGuarded != 0)
				c.accepts.Store(len(p) > 0 && p[0]&AckAccepts != 0)
				c.greeted.Store(true)
				close(hello)
				helloOpen = false
			}
		case MsgFinHandoff:
			c.finFrame(p)
		case MsgFlowMoved, MsgFlowLeft, MsgNotes, MsgAsk:
			if c.onTag != nil {
				c.onTag(k, p)
			}
		}
	}
}

// FinNotice is one FIN-HANDOFF record: the flow that ended and the
// incarnation tag of the handoff it ends.
type FinNotice struct {
	Flow Flow
	Tag  uint32
}

// finLen is one FIN-HANDOFF record's length: the flow (12) and its tag.
const finLen = 16

// AppendFin appends a FIN-HANDOFF record to b; a MsgFinHandoff carries one
// or more.
func AppendFin(b []byte, f Flow, tag uint32) []byte {
	return binary.BigEndian.AppendUint32(f.AppendBinary(b), tag)
}

// finFrame hands a MsgFinHandoff's records to OnFins (or OnFin, one by
// one); a malformed record ends the frame.
func (c *RepairClient) finFrame(p []byte) {
	var ns []FinNotice
	for len(p) >= finLen {
		f, err := UnmarshalFlow(p[:finLen])
		if err != nil {
			break
		}
		ns = append(ns, FinNotice{Flow: f, Tag: binary.BigEndian.Uint32(p[12:])})
		p = p[finLen:]
	}
	switch {
	case len(ns) == 0:
	case c.onFins != nil:
		c.onFins(ns)
	case c.onFin != nil:
		for _, n := range ns {
			c.onFin(n.Flow, n.Tag)
		}
	}
}

// Guarded reports whether the node said, in its last acknowledgement on
// the current channel, that it drops rather than resets segments of flows
// it has not rebuilt yet (AckGuarded).
func (c *RepairClient) Guarded() bool { return c.guarded.Load() }

// Accepts reports whether the node said, on the current channel, that it
// accepts new connections on the VIP (RepairClientConfig.AcceptPort).
func (c *RepairClient) Accepts() bool { return c.accepts.Load() && c.up.Load() }

// Connected reports whether the control channel is up and the node has
// answered its hello (so Guarded is known). HandoffAsync needs the channel
// up; it returns ErrNoChannel otherwise.
func (c *RepairClient) Connected() bool { return c.up.Load() && c.greeted.Load() }

// Close ends the channel without calling OnDown; handoffs still waiting
// for an answer get an error (outcome unknown).
func (c *RepairClient) Close() error {
	c.closed.Store(true)
	c.wmu.Lock()
	conn := c.c
	c.c, c.rc = nil, nil
	c.up.Store(false)
	c.wmu.Unlock()
	c.pmu.Lock()
	c.sweep.Stop()
	c.armed = false
	c.pmu.Unlock()
	c.failPending(fmt.Errorf("handoff: channel to %s closed", c.addr))
	if conn != nil {
		return conn.Close()
	}
	return nil
}

// ----------------------------------------------------------------- node side

// RepairListener is a node's handoff port: it accepts control channels from
// fronts, rebuilds each connection handed to it with Restore, and yields the
// rebuilt connections from Accept, so it plugs into any server that serves
// a net.Listener. Closing a yielded connection sends FIN-HANDOFF for it.
type RepairListener struct {
	ln   net.Listener
	auth *Auth
	cfg  RepairListenerConfig
	ch   chan net.Conn
	done chan struct{}
	once sync.Once

	mu    sync.Mutex
	chans map[net.Conn]*chanState
	// accepting holds the listeners on VIPs fronts asked this node to
	// accept on (repair_accept.go); nextConn counts their connections.
	accepting map[netip.AddrPort]net.Listener
	nextConn  atomic.Uint64

	guard    *Guard // nil: not guarding (guardErr says why)
	guardErr error

	// DrainTimeout bounds how long a closed connection may wait for its
	// last bytes to be acknowledged and the client's FIN before the node
	// sends FIN-HANDOFF anyway (DefaultDrainTimeout; set before use).
	DrainTimeout time.Duration

	// router is the node's tag mode (repair_tag.go).
	router *repairRouter

	// Restored, Failed and Fins count rebuilt connections, rebuilds that
	// failed, and FIN-HANDOFF notices sent. In tag mode, MovedOut counts
	// connections this node moved to another node, MoveFailed moves that
	// failed with the connection kept here, MoveLost moves whose outcome
	// was unknown (the connection let go), Asked requests the table could
	// not route and the front was asked about, Notes note frames sent. Limited counts connections
	// closed by the connection limit (refused, or evicted before they
	// sent a valid frame); Refused, channels closed for a frame Auth
	// refused or for sending none in time.
	Restored, Failed, Fins, Limited, Refused     atomic.Uint64
	MovedOut, MoveFailed, MoveLost, Asked, Notes atomic.Uint64
	// Left counts flows reported to the front as left (MsgFlowLeft): moved
	// away from here to a node whose channel broke, or reset here when
	// the move's outcome was lost with the channel.
	Left atomic.Uint64
	// ForwardLate counts connections moved here whose MsgForwarding did
	// not come within a second (served anyway).
	ForwardLate atomic.Uint64
	// Accepted counts connections this node accepted on a VIP itself.
	Accepted atomic.Uint64
}

// chanState is what the listener knows of one control connection.
type chanState struct {
	since  time.Time
	authed bool // has sent a valid frame
}

// RepairListenerConfig bounds what the handoff port lets peers cost.
type RepairListenerConfig struct {
	// NoGuard leaves the node without its Guard. By default the listener
	// attaches one (to the interface holding its address, for the
	// virtual IPs on lo) and tells the front in each acknowledgement that
	// the flow's address is guarded, so that the front may steer the flow
	// before it sends the state; where the guard cannot be attached (no
	// CAP_BPF, no TCX, no virtual IP on lo) the front holds the flow
	// until the node has acknowledged instead (RepairMover.Move).
	NoGuard bool

	// MaxConns bounds the control connections open at once. One front
	// keeps one; the rest of the room is for reconnects and more fronts.
	// When it is reached, a new connection evicts the oldest one that has
	// not sent a valid frame yet, or is closed at once if all have.
	// Default DefaultRepairMaxConns.
	MaxConns int

	// handshakeTimeout bounds the wait for a new connection's first valid
	// frame (a front sends one as soon as it has dialled). Default
	// defaultHandshakeTimeout.
	handshakeTimeout time.Duration
	// frameTimeout bounds the wait for the rest of a frame once its header
	// has arrived. Default defaultFrameTimeout.
	frameTimeout time.Duration
}

const (
	defaultHandshakeTimeout = 5 * time.Second
	defaultFrameTimeout     = 5 * time.Second
)

// DefaultDrainTimeout is RepairListener.DrainTimeout's default.
const DefaultDrainTimeout = 10 * time.Second

// tcpClose is TCP_CLOSE in tcp_info.tcpi_state.
const tcpClose = 7

// ListenRepairAddr opens a handoff port on addr for the cluster's shared
// key: ListenRepair on a new TCP listener, with the key's Auth. It is the
// port of `shoal node --repair-listen` and of `shoal bench sink`.
func ListenRepairAddr(addr string, key []byte, cfg RepairListenerConfig) (*RepairListener, error) {
	auth, err := NewAuth(key, 0)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("repair listen %s: %w", addr, err)
	}
	return ListenRepair(ln, auth, cfg), nil
}

// ListenRepair serves the handoff port on ln with auth, within cfg's
// limits. Frames are opened under the key of the address each channel was
// accepted on (Auth.ForNode), which must be the address the front dials.
func ListenRepair(ln net.Listener, auth *Auth, cfg RepairListenerConfig) *RepairListener {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultRepairMaxConns
	}
	if cfg.handshakeTimeout <= 0 {
		cfg.handshakeTimeout = defaultHandshakeTimeout
	}
	if cfg.frameTimeout <= 0 {
		cfg.frameTimeout = defaultFrameTimeout
	}
	l := &RepairListener{ln: ln, auth: auth, cfg: cfg, ch: make(chan net.Conn, 64), done: make(chan struct{}),
		chans: map[net.Conn]*chanState{}, DrainTimeout: DefaultDrainTimeout}
	l.router = newRepairRouter(l)
	if cfg.NoGuard {
		l.guardErr = errors.New("handoff: guard: disabled")
	} else {
		l.guard, l.guardErr = guardFor(ln.Addr())
	}
	go l.acceptLoop()
	return l
}

// Auth returns the listener's authenticator (for its refusal counters).
func (l *RepairListener) Auth() *Auth { return l.auth }

// Guard returns the node's guard, or nil and why there is none.
func (l *RepairListener) Guard() (*Guard, error) { return l.guard, l.guardErr }

// AckGuarded is set in a successful MsgHandoffAck's flags byte (after the
// status byte) when the node's Guard covers the flow's address: segments the
// front steers to the node before the rebuild are dropped there, not reset.
const AckGuarded = 1

// admit registers c within the connection limit, evicting the oldest
// connection that has not authenticated yet if need be; false: c must be
// closed.
func (l *RepairListener) admit(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.chans) >= l.cfg.MaxConns {
		var victim net.Conn
		var oldest time.Time
		for vc, st := range l.chans {
			if !st.authed && (victim == nil || st.since.Before(oldest)) {
				victim, oldest = vc, st.since
			}
		}
		if victim == nil {
			return false
		}
		delete(l.chans, victim)
		victim.Close()
		l.Limited.Add(1)
	}
	l.chans[c] = &chanState{since: time.Now()}
	return true
}

// acceptLoop accepts control connections until the port is closed, keeping
// it open through EMFILE and the like (internal/base/accept).
func (l *RepairListener) acceptLoop() {
	accept.Loop(l.ln, func(c net.Conn) {
		if !l.admit(c) {
			c.Close()
			l.Limited.Add(1)
			return
		}
		setKeepAlive(c)
		go l.serveChannel(c)
	}, nil)
	select {
	case <-l.done:
	default:
		l.Close() // closed under us: stop the rest too
	}
}

// channel is one control connection's write side.
type channel struct {
	mu  sync.Mutex
	c   net.Conn
	na  *NodeAuth
	buf []byte
}

func (ch *channel) send(k MsgKind, p []byte) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.buf = ch.na.Seal(ch.buf[:0], ToFront, k, p)
	ch.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := ch.c.Write(ch.buf)
	return err
}

// frame is one message to seal: its kind and payload.
type frame struct {
	k MsgKind
	p []byte
}

// sendFrames sends fs in one write (the peer reads them in one wake-up).
func (ch *channel) sendFrames(fs []frame) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.buf = ch.buf[:0]
	for _, f := range fs {
		ch.buf = ch.na.Seal(ch.buf, ToFront, f.k, f.p)
	}
	ch.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := ch.c.Write(ch.buf)
	return err
}

func (l *RepairListener) serveChannel(c net.Conn) {
	defer func() {
		l.mu.Lock()
		delete(l.chans, c)
		l.mu.Unlock()
		c.Close()
	}()
	// The node's identity is the address the front dialled.
	ap, err := addrPortOf(c.LocalAddr())
	var na *NodeAuth
	if err == nil {
		na, err = l.auth.ForNode(ap)
	}
	if err != nil {
		return
	}
	ch := &channel{c: c, na: na}
	// Until its first valid frame a connection is a stranger: it must send
	// one within handshakeTimeout. Later ones may idle (a moved
	// connection's FIN-HANDOFF keeps the channel useful while no handoff
	// comes; dead peers are found by TCP keep-alive).
	c.SetReadDeadline(time.Now().Add(l.cfg.handshakeTimeout))
	r := bufio.NewReaderSize(c, 64<<10)
	var buf []byte
	authed := false
	for {
		buf, err = readFrame(r, buf, na, ToNode, c, l.cfg.frameTimeout)
		var k MsgKind
		var p []byte
		if err == nil {
			k, p, err = na.Open(buf, ToNode)
		}
		if err != nil {
			// A refused frame (counted by Auth) or a silent stranger ends
			// the channel: without a valid header the stream cannot be
			// followed further.
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				l.Refused.Add(1)
			}
			return
		}
		if !authed {
			authed = true
			c.SetReadDeadline(time.Time{})
			l.mu.Lock()
			if st := l.chans[c]; st != nil {
				st.authed = true
			}
			l.mu.Unlock()
		}
		if k == MsgHello && (len(p) == 4 || len(p) == 6) {
			var flags byte
			vip := netip.AddrFrom4([4]byte(p[:4]))
			if l.guard.Covers(vip) {
				flags |= AckGuarded
			}
			if len(p) == 6 && l.acceptOn(netip.AddrPortFrom(vip, binary.BigEndian.Uint16(p[4:]))) {
				flags |= AckAccepts
			}
			if err := ch.send(MsgHelloAck, []byte{flags}); err != nil {
				return
			}
			continue
		}
		switch k {
		case MsgTable:
			if l.router.applyTable(ch, p) != nil {
				l.Refused.Add(1)
			}
			continue
		case MsgAnswer:
			l.router.answer(p)
			continue
		case MsgForwarding:
			l.router.forwarding(p)
			continue
		case MsgHandoff, MsgTagHandoff:
		default:
			continue
		}
		if len(p) >= 8 && !l.take(ch, k, p) {
			return
		}
	}
}

// take rebuilds the connection of one handoff (p: id, then the payload),
// answers it on ch and queues the connection for Accept; false: the
// channel is done.
func (l *RepairListener) take(ch *channel, k MsgKind, p []byte) bool {
	ack := append([]byte(nil), p[:8]...)
	conn, st, err := l.rebuild(ch, k, p[8:])
	if err != nil {
		l.Failed.Add(1)
		ack = append(ack, 1)
		ack = append(ack, err.Error()...)
		ch.send(MsgHandoffAck, ack)
		return true
	}
	l.Restored.Add(1)
	var flags byte
	if l.guard.Covers(st.Local.Addr()) {
		flags |= AckGuarded
	}
	ack = append(ack, 0, flags)
	if m, ok := conn.(*movedConn); ok && m.tm != nil && m.tm.Seq == 0 && flags&AckGuarded != 0 {
		l.router.ackLater(ch, ack) // from the front: see ackLater
	} else if err := ch.send(MsgHandoffAck, ack); err != nil {
		conn.Close()
		return false
	}
	if m, ok := conn.(*movedConn); ok && m.forwarded != nil {
		go l.serveForwarded(m) // a node-to-node move: once the old node forwards
		return true
	}
	return l.queue(conn)
}

// queue hands a rebuilt connection to Accept; false: the listener closed.
func (l *RepairListener) queue(conn net.Conn) bool {
	select {
	case l.ch <- conn:
		return true
	case <-l.done:
		conn.Close()
		return false
	}
}

// Accept returns the next rebuilt connection.
func (l *RepairListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops the handoff port and its control channels.
func (l *RepairListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.ln.Close()
		l.router.close()
		if l.guard != nil {
			l.guard.Close()
		}
		l.mu.Lock()
		for c := range l.chans {
			c.Close()
		}
		for _, ln := range l.accepting {
			ln.Close()
		}
		l.mu.Unlock()
	})
	return err
}

// Addr is the handoff port's address.
func (l *RepairListener) Addr() net.Addr { return l.ln.Addr() }

// movedConn is a rebuilt connection. It embeds *net.TCPConn so that
// io.Copy from a file still uses sendfile (ReadFrom is promoted). Its Close
// is graceful and tells the front when the flow is really over: see Close.
type movedConn struct {
	*net.TCPConn
	flow Flow
	tag  uint32 // TCPState.RcvSeq of the handoff: names this incarnation
	// fetch is TCPState.Fetch (FetchHint).
	fetch uint16
	ch    *channel
	l     *RepairListener
	once  sync.Once
	// tm is the connection's tag-mode move (nil outside tag mode); asked,
	// the URL the front was asked about last (it accounted the request);
	// gone, that the connection moved on to another node.
	tm    *TagMove
	asked string
	gone  bool
	// forwarded is closed when the old holder's guard forwards the flow
	// here after a node-to-node move (MsgForwarding; nil otherwise).
	forwarded chan struct{}
}

// FetchHint is the node whose memory the first request's object should be
// fetched from (TCPState.Fetch − 1), -1 for none; the node reads it like
// FDConn's.
func (m *movedConn) FetchHint() int { return int(m.fetch) - 1 }

// Flow returns the moved connection's 4-tuple.
func (m *movedConn) Flow() Flow { return m.flow }

// Close sends FIN after the queued response bytes (shutdown SHUT_WR) and
// returns at once. A background goroutine waits until the kernel has the
// connection fully closed — every byte and our FIN acknowledged and the
// client's FIN received (TCP_CLOSE) — or DrainTimeout passes, then closes
// the descriptor and sends FIN-HANDOFF (in tag mode with the node's next
// batch, repairRouter.finLater). Telling the front at close(2) time
// would be too early: close returns while up to a socket buffer of response
// is still in flight, and the client's ACKs for it must keep reaching this
// node; once the front removes the steering entry they would meet a reset.
func (m *movedConn) Close() error {
	var err error
	m.once.Do(func() {
		if m.gone {
			return // moved on: its frozen copy was closed silently
		}
		err = m.TCPConn.CloseWrite()
		go m.finish()
	})
	return err
}

func (m *movedConn) finish() {
	deadline := time.Now().Add(m.l.DrainTimeout)
	wait := 2 * time.Millisecond
	if rc, err := m.TCPConn.SyscallConn(); err == nil {
		for time.Now().Before(deadline) {
			state := byte(0)
			rc.Control(func(fd uintptr) {
				var info [8]byte
				if n, err := getsockoptBytes(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO, info[:]); err == nil && n > 0 {
					state = info[0]
				}
			})
			if state == tcpClose || state == 0 {
				break
			}
			time.Sleep(wait)
			wait = min(2*wait, 100*time.Millisecond)
		}
	}
	m.TCPConn.Close()
	if m.tm != nil {
		m.l.router.finLater(m.flow, m.tag) // after the move reports, batched
		return
	}
	if m.ch.send(MsgFinHandoff, AppendFin(nil, m.flow, m.tag)) == nil {
		m.l.Fins.Add(1)
	}
}
