package handoff

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FDClient is the sending end of one node's handoff socket (the front). It
// keeps one SOCK_SEQPACKET connection to the socket, dialled on first use
// and again after it breaks, and reads what the node sends back on it:
// returned connections (FDReturn) go to OnReturn, end notices (FDEnded)
// to OnEnded. Send is safe for concurrent use; sendmsg on a SEQPACKET
// socket is atomic per record, so concurrent sends never interleave.
type FDClient struct {
	path    string
	timeout time.Duration
	// OnReturn receives connections handed back by the node; it owns r.Conn.
	// Nil closes them.
	onReturn func(r FDMessage)
	// OnEnded receives FDEnded notices. Nil ignores them.
	onEnded func(h FDHeader)
	raw     bool
	// onDisconnect: see FDClientConfig.OnDisconnect.
	onDisconnect func()
	onAck        func(h FDHeader)
	onNotes      func(h FDHeader, data []byte)
	trust        *SocketTrust
	// gen counts successful dials, so a caller that must greet each new
	// connection (the front's tag table) sees when one was made.
	gen atomic.Uint64

	// polled: no reader goroutine; Poll reads with pollRd into pollBuf,
	// one caller at a time (pollMu).
	polled  bool
	pollMu  sync.Mutex
	pollBuf []byte

	mu     sync.Mutex
	uc     clientSock
	pollRd *fdReader // uc's reader when polled
	closed bool
	// refused is the last trust refusal, returned without dialling again
	// until refusedUntil: a refused socket costs one check per
	// refuseRetry, not one per request.
	refused      error
	refusedUntil time.Time

	// senders are fdSenders (record buffers and sendmsg state), one per
	// send in progress.
	senders sync.Pool
}

// FDClientConfig configures NewFDClient.
type FDClientConfig struct {
	// Path is the node's handoff socket.
	Path string
	// SendTimeout bounds one send blocked on a full socket (a node that has
	// stopped accepting). Default 1 s; the caller then falls back to relay.
	SendTimeout time.Duration
	// OnReturn receives connections the node hands back; the callee owns
	// r.Conn (and r.Data, a private copy). Nil closes them.
	OnReturn func(r FDMessage)
	// OnEnded receives FDEnded notices. Nil ignores them.
	OnEnded func(h FDHeader)
	// OnAck receives FDAck messages (a node's client of another node's
	// socket, tag mode). Nil ignores them.
	OnAck func(h FDHeader)
	// OnNotes receives FDNote payloads (the front, tag mode); data aliases
	// the read buffer and is valid only during the call. Nil ignores them.
	OnNotes func(h FDHeader, data []byte)
	// OnDisconnect is called when a connection to the socket ends (the
	// node died or restarted, or Close): connections it held will neither
	// come back nor be reported ended. Nil ignores it.
	OnDisconnect func()
	// RawReturns delivers returned connections to OnReturn as bare
	// descriptors (FDMessage.FD, Conn nil), for a front that passes most of
	// them straight on with SendRaw.
	RawReturns bool
	// PolledReads starts no reader goroutine: what the node sends back is
	// read only when the owner calls Poll. A node's client of another
	// node's socket gets only acknowledgements of its moves, which nothing
	// waits for; reading them on a timer instead of as they come saves the
	// sending node a wake-up per move (docs/benchmarks.md, "Receiving a
	// handed connection").
	PolledReads bool
	// Trust, when set, is checked on every dial (SocketTrust): an
	// untrusted socket is never connected to, or is closed before
	// anything is sent, and Send returns an error wrapping ErrUntrusted.
	// Nil trusts Path as given (a socket the operator named).
	Trust *SocketTrust
}

// refuseRetry is how long an FDClient remembers that its socket was
// refused before checking it again (the node may be restarted under the
// right user).
const refuseRetry = 5 * time.Second

// NewFDClient returns a client for cfg.Path; it dials lazily.
func NewFDClient(cfg FDClientConfig) *FDClient {
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = time.Second
	}
	c := &FDClient{path: cfg.Path, timeout: cfg.SendTimeout, onReturn: cfg.OnReturn, onEnded: cfg.OnEnded, raw: cfg.RawReturns,
		onDisconnect: cfg.OnDisconnect, onAck: cfg.OnAck, onNotes: cfg.OnNotes, polled: cfg.PolledReads}
	if cfg.Trust != nil {
		t := *cfg.Trust
		c.trust = &t
	}
	c.senders.New = func() any { return newFDSender() }
	return c
}

// Path returns the socket path.
func (c *FDClient) Path() string { return c.path }

// ErrFDClientClosed is returned by Send after Close.
var ErrFDClientClosed = errors.New("handoff: client closed")

// clientSock is an FDClient's connected socket: a RawConn over its
// descriptor that can also arm a deadline for sends that wait and be
// closed. On Linux it stays out of Go's poller (fdsock_linux.go).
type clientSock interface {
	syscall.RawConn
	SetWriteDeadline(t time.Time) error
	Close() error
}

// conn returns the live socket, dialling it if needed.
func (c *FDClient) conn() (clientSock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrFDClientClosed
	}
	if c.uc != nil {
		return c.uc, nil
	}
	var uc *net.UnixConn
	var err error
	if c.trust != nil {
		if c.refused != nil && time.Now().Before(c.refusedUntil) {
			return nil, c.refused
		}
		uc, err = dialTrusted(c.path, *c.trust)
		if errors.Is(err, ErrUntrusted) {
			c.refused, c.refusedUntil = err, time.Now().Add(refuseRetry)
		}
	} else {
		uc, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: c.path, Net: "unixpacket"})
		if err != nil {
			err = fmt.Errorf("handoff: dial %s: %w", c.path, err)
		}
	}
	if err != nil {
		return nil, err
	}
	sock, err := newClientSock(uc) // closes uc
	if err != nil {
		return nil, fmt.Errorf("handoff: dial %s: %w", c.path, err)
	}
	if c.polled {
		c.pollRd = newSockReader(sock)
	}
	c.refused = nil
	c.uc = sock
	c.gen.Add(1)
	if !c.polled {
		go c.read(sock)
	}
	return sock, nil
}

// drop forgets uc (if it is still the current socket) and closes it.
func (c *FDClient) drop(uc clientSock) {
	c.mu.Lock()
	if c.uc == uc {
		c.uc = nil
	}
	c.mu.Unlock()
	uc.Close()
}

// Send moves conn to the node with h and data (the bytes already read from
// it, concatenated) in one message. A nil error means the descriptor is on its way and
// the caller must close its copy and forget the connection; an error means
// nothing was sent and the caller still owns conn (and should fall back).
func (c *FDClient) Send(h FDHeader, conn syscall.Conn, data ...[]byte) error {
	return c.send(h, conn, -1, data)
}

// SendMsg sends a message without a descriptor (FDTable) with data.
func (c *FDClient) SendMsg(h FDHeader, data ...[]byte) error {
	return c.send(h, nil, -1, data)
}

// Generation counts the connections made to the socket so far; it changes
// when the client redials (the node restarted).
func (c *FDClient) Generation() uint64 { return c.gen.Load() }

// SendRaw is Send for a bare descriptor; on success the caller closes fd.
func (c *FDClient) SendRaw(h FDHeader, fd int, data ...[]byte) error {
	return c.send(h, nil, fd, data)
}

// ErrWouldBlock is returned by TrySendRaw when the node's socket buffer is
// full: nothing was sent and the caller still owns the descriptor.
var ErrWouldBlock = errors.New("handoff: node socket full")

// TrySendRaw is SendRaw that never waits: when the node's socket buffer is
// full it returns ErrWouldBlock at once instead of blocking up to the send
// timeout, and it arms no deadline. It is for callers that must not stall —
// the front's raw accept loop, which serves every new connection of a
// listener from one goroutine and hands a blocked send to a goroutine of its
// own. On success the caller closes fd; on any error it still owns it.
func (c *FDClient) TrySendRaw(h FDHeader, fd int, data ...[]byte) error {
	uc, err := c.conn()
	if err != nil {
		return err
	}
	snd := c.senders.Get().(*fdSender)
	defer c.senders.Put(snd)
	if err := snd.prepare(h, fd, data); err != nil {
		return err
	}
	// A raw system call under Control, not Write: it cannot block
	// (MSG_DONTWAIT), so the runtime's syscall bookkeeping (entersyscall,
	// which also wakes a sleeping sysmon thread) would be pure cost, and
	// Write would refuse with the write deadline a blocking Send left
	// armed (and since expired) on the socket.
	cerr := snd.trySend(uc)
	switch {
	case cerr == nil:
		return nil
	case errors.Is(cerr, unix.EAGAIN):
		return ErrWouldBlock
	default:
		c.broken(uc)
		return fmt.Errorf("handoff: send to %s: %w", c.path, cerr)
	}
}

// appendRights appends an SCM_RIGHTS control message carrying fd to b, as
// unix.UnixRights does but without allocating.
func appendRights(b []byte, fd int) []byte {
	n := unix.CmsgSpace(4)
	b = b[:n]
	clear(b)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level = unix.SOL_SOCKET
	h.Type = unix.SCM_RIGHTS
	h.SetLen(unix.CmsgLen(4))
	*(*int32)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = int32(fd)
	return b
}

func (c *FDClient) send(h FDHeader, conn syscall.Conn, fd int, data [][]byte) error {
	uc, err := c.conn()
	if err != nil {
		return err
	}
	snd := c.senders.Get().(*fdSender)
	if conn != nil {
		err = snd.sendConn(uc, h, conn, c.timeout, data)
	} else {
		err = snd.send(uc, uc, h, fd, c.timeout, data)
	}
	if cap(snd.msg) <= 64<<10 {
		c.senders.Put(snd)
	}
	if err != nil {
		var ne net.Error
		if !(errors.As(err, &ne) && ne.Timeout()) {
			// A broken socket (the node restarted): redial next time.
			c.broken(uc)
		}
		return fmt.Errorf("handoff: send to %s: %w", c.path, err)
	}
	return nil
}

// Close closes the socket. Connections the node still holds are not
// affected; ones it tries to return afterwards are closed by the kernel
// when the socket goes away. A polled client reads what came before it
// closes, and calls OnDisconnect as the reader goroutine does.
func (c *FDClient) Close() error {
	if c.polled {
		c.Poll()
	}
	c.mu.Lock()
	c.closed = true
	uc := c.uc
	c.uc, c.pollRd = nil, nil
	c.mu.Unlock()
	if uc == nil {
		return nil
	}
	err := uc.Close()
	if c.polled && c.onDisconnect != nil {
		c.onDisconnect()
	}
	return err
}

// broken drops uc after a failed send. A polled client first reads what
// the node sent before (its acknowledgements say which moves it took),
// then calls OnDisconnect, which the reader goroutine calls otherwise.
func (c *FDClient) broken(uc clientSock) {
	if !c.polled {
		c.drop(uc)
		return
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	c.pollLocked(uc)
	c.lose(uc)
}

// Poll reads, without waiting, what the node sent back on a client made
// with PolledReads and hands it to the callbacks. When the node's end is
// gone (it died or restarted) it drops the socket and calls OnDisconnect,
// after the messages the node sent before. Safe for concurrent use.
func (c *FDClient) Poll() {
	c.mu.Lock()
	uc := c.uc
	c.mu.Unlock()
	if uc == nil {
		return
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	if !c.pollLocked(uc) {
		c.lose(uc)
	}
}

// lose drops a polled client's socket after its last messages were read
// and calls OnDisconnect, once per socket: only while uc is still the
// client's current one.
func (c *FDClient) lose(uc clientSock) {
	c.mu.Lock()
	current := c.uc == uc
	if current {
		c.uc, c.pollRd = nil, nil
	}
	c.mu.Unlock()
	uc.Close()
	if current && c.onDisconnect != nil {
		c.onDisconnect()
	}
}

// pollLocked reads and dispatches every message queued on uc, with pollMu
// held; false when the stream ended or broke.
func (c *FDClient) pollLocked(uc clientSock) bool {
	c.mu.Lock()
	rd := c.pollRd
	if c.uc != uc {
		rd = nil // dropped meanwhile: another poll already told
	}
	c.mu.Unlock()
	if rd == nil {
		return true
	}
	if c.pollBuf == nil {
		c.pollBuf = make([]byte, FDHeaderLen+FDMaxData)
	}
	for {
		r, err := c.wrap(rd.tryRecv(c.pollBuf))
		switch {
		case err == errNoMessage:
			return true
		case err == nil:
			c.dispatch(r)
		case !isFDMessageError(err):
			return false
		}
	}
}

func (c *FDClient) read(uc clientSock) {
	defer func() {
		c.drop(uc)
		if c.onDisconnect != nil {
			c.onDisconnect()
		}
	}()
	rd := newSockReader(uc)
	buf := make([]byte, FDHeaderLen+FDMaxData)
	for {
		r, err := c.wrap(rd.recv(buf))
		if err != nil {
			if isFDMessageError(err) {
				continue
			}
			return
		}
		c.dispatch(r)
	}
}

// wrap makes a received descriptor a net.Conn, unless the client takes
// bare descriptors (RawReturns).
func (c *FDClient) wrap(r FDMessage, err error) (FDMessage, error) {
	if err == nil && r.FD >= 0 && !c.raw {
		r.Conn, err = WrapFD(r.FD) // closes it
		r.FD = -1
	}
	return r, err
}

// dispatch hands one message the node sent back to its callback.
func (c *FDClient) dispatch(r FDMessage) {
	switch r.Header.Kind {
	case FDReturn:
		if c.onReturn == nil {
			r.close()
			return
		}
		r.Data = append([]byte(nil), r.Data...)
		c.onReturn(r)
	case FDEnded:
		if c.onEnded != nil {
			c.onEnded(r.Header)
		}
	case FDAck:
		if c.onAck != nil {
			c.onAck(r.Header)
		}
	case FDNote:
		if c.onNotes != nil {
			c.onNotes(r.Header, r.Data)
		}
	default:
		r.close()
	}
}
