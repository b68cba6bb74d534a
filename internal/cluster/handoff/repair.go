//go:build linux

package handoff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Queue selectors for TCP_REPAIR_QUEUE (include/uapi/linux/tcp.h); x/sys does
// not export them.
const (
	tcpNoQueue   = 0
	tcpRecvQueue = 1
	tcpSendQueue = 2
)

// tcpEstablished is TCP_ESTABLISHED in tcp_info.tcpi_state.
const tcpEstablished = 1

// tcp_info option bits (TCPI_OPT_*).
const (
	tcpiOptTimestamps = 1
	tcpiOptSACK       = 2
	tcpiOptWscale     = 4
)

// repairChunk bounds one send() into a repair queue: the kernel charges a
// whole chunk to the socket's memory at once, so CRIU also refills in pieces.
const repairChunk = 64 << 10

// TCPState is everything needed to rebuild an established TCP connection on
// another host (the connection state that seed 002's SYN-HANDOFF and
// ASK-HANDOFF messages carry, taken with Linux's TCP_REPAIR instead of a
// patched stack). Sequence numbers are the kernel's, in host order.
type TCPState struct {
	// Local is the address the client connected to (the virtual IP and
	// port); Remote is the client.
	Local, Remote netip.AddrPort
	// SndSeq is the sequence number of the first byte of SendQueue (the
	// oldest unacknowledged byte); RcvSeq that of the first byte of
	// RecvQueue (the first byte the application has not consumed).
	SndSeq, RcvSeq uint32
	// MSS is the clamp negotiated in the handshake.
	MSS uint32
	// SndWscale and RcvWscale are the window-scale shifts; Wscale says
	// whether the option was negotiated at all.
	SndWscale, RcvWscale uint8
	Wscale, SACK         bool
	// Timestamps says whether RFC 7323 timestamps are on; TSVal is the
	// connection's current timestamp clock, so that the new socket's TSval
	// does not go backwards (the client's PAWS check would drop it).
	Timestamps bool
	TSVal      uint32
	// Window is TCP_REPAIR_WINDOW: snd_wl1, snd_wnd, max_window, rcv_wnd,
	// rcv_wup.
	Window RepairWindow
	// RecvQueue holds the client bytes not yet consumed by the
	// application, including any the front had already read into user
	// space (they are put back in front, and RcvSeq moved back to match).
	RecvQueue []byte
	// SendQueue holds bytes written to the client and not yet
	// acknowledged; the first SendQueue[:len-Unsent] were transmitted.
	SendQueue []byte
	Unsent    uint32
	// Fetch is 1 + the index of the node whose memory the first request's
	// object should come from (the policy's Decision.Fetch; FetchOf), 0
	// for none. It travels in the state's reserved word.
	Fetch uint16
}

// RepairWindow is struct tcp_repair_window.
type RepairWindow struct {
	SndWl1, SndWnd, MaxWindow, RcvWnd, RcvWup uint32
}

// ErrNotEstablished reports a socket that cannot be moved because it is not
// in the ESTABLISHED state (for example the client already sent its FIN).
var ErrNotEstablished = errors.New("handoff: connection is not established")

// Freeze puts the TCP socket behind c into repair mode and reads its state.
// prefix holds client bytes the caller already read from the socket but has
// not consumed (the request head and anything buffered after it); they are
// placed in front of the kernel's receive queue in the returned state.
//
// On success the socket stays frozen: the kernel sends nothing on it any
// more, and closing it is silent (no FIN, no RST), which is how the front
// gives the connection away. On error the socket is thawed again
// (TCP_REPAIR_OFF_NO_WP) and may still be used normally, e.g. relayed.
func Freeze(c syscall.Conn, prefix []byte) (*TCPState, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("handoff: freeze: %w", err)
	}
	var st *TCPState
	var ferr error
	if err := rc.Control(func(fd uintptr) { st, ferr = FreezeFD(int(fd), prefix) }); err != nil {
		return nil, fmt.Errorf("handoff: freeze: %w", err)
	}
	return st, ferr
}

// FreezeFD is Freeze on a raw descriptor. It makes only raw system calls
// (rawsys.go): none of them can block.
func FreezeFD(fd int, prefix []byte) (*TCPState, error) { return freezeFD(fd, prefix, nil) }

// freezeFD is FreezeFD with the socket's flow, if the caller knows it
// already (RepairMover.MoveFD read it to steer): two system calls fewer.
func freezeFD(fd int, prefix []byte, known *Flow) (*TCPState, error) {
	if err := rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR, unix.TCP_REPAIR_ON); err != nil {
		return nil, fmt.Errorf("handoff: TCP_REPAIR on: %w", err)
	}
	st, err := dump(fd, prefix, known)
	if err != nil {
		ThawFD(fd)
		return nil, err
	}
	return st, nil
}

// ThawFD takes a descriptor that FreezeFD left in repair mode back to normal
// operation without sending anything (see Thaw).
func ThawFD(fd int) error {
	rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR_QUEUE, tcpNoQueue)
	if err := rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR, unix.TCP_REPAIR_OFF_NO_WP); err != nil {
		return fmt.Errorf("handoff: thaw: TCP_REPAIR off: %w", err)
	}
	return nil
}

func dump(fd int, prefix []byte, known *Flow) (*TCPState, error) {
	st := &TCPState{}
	var err error
	if known != nil {
		st.Local, st.Remote = known.VIP, known.Client
	} else if st.Local, st.Remote, err = sockFlow(fd); err != nil {
		return nil, err
	}

	var info [8]byte // tcpi_state .. tcpi_snd_wscale/rcv_wscale
	n, err := rawGetsockoptBytes(fd, unix.IPPROTO_TCP, unix.TCP_INFO, info[:])
	if err != nil || n < 8 {
		return nil, fmt.Errorf("handoff: TCP_INFO: %v", err)
	}
	if info[0] != tcpEstablished {
		return nil, fmt.Errorf("%w (state %d)", ErrNotEstablished, info[0])
	}
	opts := info[5]
	st.Timestamps = opts&tcpiOptTimestamps != 0
	st.SACK = opts&tcpiOptSACK != 0
	st.Wscale = opts&tcpiOptWscale != 0
	st.SndWscale = info[6] & 0x0f // tcpi_snd_wscale:4, tcpi_rcv_wscale:4
	st.RcvWscale = info[6] >> 4

	mss, err := rawGetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_MAXSEG) // mss_clamp in repair mode
	if err != nil {
		return nil, fmt.Errorf("handoff: TCP_MAXSEG: %w", err)
	}
	st.MSS = uint32(mss)
	if st.Timestamps {
		ts, err := rawGetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_TIMESTAMP)
		if err != nil {
			return nil, fmt.Errorf("handoff: TCP_TIMESTAMP: %w", err)
		}
		st.TSVal = uint32(ts)
	}
	var w [20]byte
	if n, err := rawGetsockoptBytes(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR_WINDOW, w[:]); err != nil || n != 20 {
		return nil, fmt.Errorf("handoff: TCP_REPAIR_WINDOW: %v (len %d)", err, n)
	}
	st.Window = RepairWindow{
		SndWl1: binary.NativeEndian.Uint32(w[0:]), SndWnd: binary.NativeEndian.Uint32(w[4:]),
		MaxWindow: binary.NativeEndian.Uint32(w[8:]), RcvWnd: binary.NativeEndian.Uint32(w[12:]),
		RcvWup: binary.NativeEndian.Uint32(w[16:]),
	}

	// Receive queue: rcv_nxt and the bytes not yet read.
	if st.RecvQueue, st.RcvSeq, err = recvSnapshot(fd, prefix); err != nil {
		return nil, err
	}

	// Send queue: write_seq, bytes not acknowledged, bytes not sent.
	writeSeq, outq, err := queueState(fd, tcpSendQueue, unix.SIOCOUTQ)
	if err != nil {
		return nil, err
	}
	if outq > 0 {
		unsent, err := rawIoctlInt(fd, unix.SIOCOUTQNSD)
		if err != nil {
			return nil, fmt.Errorf("handoff: SIOCOUTQNSD: %w", err)
		}
		st.Unsent = uint32(unsent)
		if st.SendQueue, err = peekQueue(fd, nil, outq); err != nil {
			return nil, fmt.Errorf("handoff: read send queue: %w", err)
		}
	}
	st.SndSeq = writeSeq - uint32(len(st.SendQueue))
	if err := rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR_QUEUE, tcpNoQueue); err != nil {
		return nil, fmt.Errorf("handoff: TCP_REPAIR_QUEUE: %w", err)
	}
	return st, nil
}

// sockFlow is fd's local and remote IPv4 addresses.
func sockFlow(fd int) (local, remote netip.AddrPort, err error) {
	var ok1, ok2 bool
	if local, ok1, err = rawSockname(fd, false); err != nil {
		return local, remote, fmt.Errorf("handoff: getsockname: %w", err)
	}
	if remote, ok2, err = rawSockname(fd, true); err != nil {
		return local, remote, fmt.Errorf("handoff: getpeername: %w", err)
	}
	if !ok1 || !ok2 {
		return local, remote, errors.New("handoff: not an IPv4 TCP socket")
	}
	return local, remote, nil
}

// queueState selects a repair queue and returns its sequence number
// (TCP_QUEUE_SEQ) and length (from ioctl req).
// recvSnapshot reads the receive queue (after prefix, the bytes the caller
// already consumed) and the sequence number of its first byte. A socket in
// repair mode still takes segments from the network, so a segment landing
// between reading rcv_nxt, the queue's length and its bytes would give a
// state whose numbers do not match its bytes; rcv_nxt is read again after
// the bytes and the snapshot retried until it did not move. (Segments
// that arrive after the snapshot and before the flow is steered are
// acknowledged by this socket and not moved: the window is the few
// microseconds to the steering update, and an HTTP client waiting for its
// answer sends nothing in it.)
func recvSnapshot(fd int, prefix []byte) ([]byte, uint32, error) {
	for try := 0; ; try++ {
		rcvNxt, inq, err := queueState(fd, tcpRecvQueue, unix.SIOCINQ)
		if err != nil {
			return nil, 0, err
		}
		q := make([]byte, 0, len(prefix)+inq)
		q = append(q, prefix...)
		if q, err = peekQueue(fd, q, inq); err != nil {
			return nil, 0, fmt.Errorf("handoff: read receive queue: %w", err)
		}
		again, err := rawGetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_QUEUE_SEQ)
		if err != nil {
			return nil, 0, fmt.Errorf("handoff: TCP_QUEUE_SEQ: %w", err)
		}
		if uint32(again) == rcvNxt {
			return q, rcvNxt - uint32(len(q)), nil
		}
		if try == 3 {
			return nil, 0, fmt.Errorf("handoff: receive queue still growing after %d snapshots", try+1)
		}
	}
}

func queueState(fd, queue int, req uint) (uint32, int, error) {
	if err := rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR_QUEUE, queue); err != nil {
		return 0, 0, fmt.Errorf("handoff: TCP_REPAIR_QUEUE %d: %w", queue, err)
	}
	seq, err := rawGetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_QUEUE_SEQ)
	if err != nil {
		return 0, 0, fmt.Errorf("handoff: TCP_QUEUE_SEQ %d: %w", queue, err)
	}
	n, err := rawIoctlInt(fd, req)
	if err != nil {
		return 0, 0, fmt.Errorf("handoff: queue length %d: %w", queue, err)
	}
	return uint32(seq), n, nil
}

// peekQueue appends n bytes of the selected repair queue to dst without
// consuming them (in repair mode MSG_PEEK reads the send queue as well).
func peekQueue(fd int, dst []byte, n int) ([]byte, error) {
	if n == 0 {
		return dst, nil
	}
	off := len(dst)
	dst = append(dst, make([]byte, n)...)
	got, err := rawPeek(fd, dst[off:])
	if err != nil {
		return nil, err
	}
	if got != n {
		return nil, fmt.Errorf("peeked %d of %d bytes", got, n)
	}
	return dst, nil
}

// Restore rebuilds the connection described by st in this network namespace
// and returns it as a net.Conn that the caller serves normally. The local
// address (the virtual IP) must be assigned in this namespace; no packet is sent while the socket is rebuilt, and leaving repair
// mode sends one window probe so that the client learns the new window.
func Restore(st *TCPState) (*net.TCPConn, error) {
	fd, err := RestoreFD(st)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "handoff")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("handoff: restore: %w", err)
	}
	return c.(*net.TCPConn), nil
}

// RestoreFD is Restore returning the raw non-blocking descriptor.
func RestoreFD(st *TCPState) (int, error) {
	if !st.Local.Addr().Is4() || !st.Remote.Addr().Is4() {
		return -1, errors.New("handoff: restore: only IPv4 is supported")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("handoff: socket: %w", err)
	}
	if err := restore(fd, st); err != nil {
		unix.Close(fd) // still in repair mode: silent
		return -1, err
	}
	return fd, nil
}

func restore(fd int, st *TCPState) error {
	set := func(name string, opt, v int) error {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, opt, v); err != nil {
			return fmt.Errorf("handoff: restore %s: %w", name, err)
		}
		return nil
	}
	if err := set("TCP_REPAIR", unix.TCP_REPAIR, unix.TCP_REPAIR_ON); err != nil {
		return err
	}
	// TCP_REPAIR sets sk_reuse = SK_FORCE_REUSE, so the bind below succeeds
	// next to a listener on the same address; SO_REUSEADDR must not be set
	// after it (it would lower sk_reuse back to SK_CAN_REUSE).
	// No IP_FREEBIND or IP_TRANSPARENT: the node must hold the local
	// address (the VIP on lo) to receive the flow's packets anyway, and
	// refusing to bind anything else means a handoff message can never
	// make a node send from an address that is not its own.
	if err := unix.Bind(fd, sockaddr(st.Local)); err != nil {
		return fmt.Errorf("handoff: restore bind %s: %w", st.Local, err)
	}
	if err := set("TCP_REPAIR_QUEUE send", unix.TCP_REPAIR_QUEUE, tcpSendQueue); err != nil {
		return err
	}
	if err := set("TCP_QUEUE_SEQ send", unix.TCP_QUEUE_SEQ, int(st.SndSeq)); err != nil {
		return err
	}
	if err := set("TCP_REPAIR_QUEUE recv", unix.TCP_REPAIR_QUEUE, tcpRecvQueue); err != nil {
		return err
	}
	if err := set("TCP_QUEUE_SEQ recv", unix.TCP_QUEUE_SEQ, int(st.RcvSeq)); err != nil {
		return err
	}
	if err := unix.Connect(fd, sockaddr(st.Remote)); err != nil { // no SYN in repair mode
		return fmt.Errorf("handoff: restore connect %s: %w", st.Remote, err)
	}
	opts := []unix.TCPRepairOpt{{Code: unix.TCPOPT_MAXSEG, Val: st.MSS}}
	if st.Wscale {
		opts = append(opts, unix.TCPRepairOpt{Code: unix.TCPOPT_WINDOW, Val: uint32(st.SndWscale) | uint32(st.RcvWscale)<<16})
	}
	if st.SACK {
		opts = append(opts, unix.TCPRepairOpt{Code: unix.TCPOPT_SACK_PERMITTED})
	}
	if st.Timestamps {
		opts = append(opts, unix.TCPRepairOpt{Code: unix.TCPOPT_TIMESTAMP})
	}
	if err := unix.SetsockoptTCPRepairOpt(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR_OPTIONS, opts); err != nil {
		return fmt.Errorf("handoff: restore TCP_REPAIR_OPTIONS: %w", err)
	}
	if st.Timestamps {
		if err := set("TCP_TIMESTAMP", unix.TCP_TIMESTAMP, int(st.TSVal)); err != nil {
			return err
		}
	}
	// Queues before the window: TCP_REPAIR_WINDOW checks rcv_wup against
	// rcv_nxt, which refilling the receive queue moves forward.
	if err := fillQueue(fd, tcpRecvQueue, st.RecvQueue); err != nil {
		return err
	}
	if sent := len(st.SendQueue) - int(st.Unsent); sent > 0 {
		if err := fillQueue(fd, tcpSendQueue, st.SendQueue[:sent]); err != nil {
			return err
		}
	}
	var w [20]byte
	binary.NativeEndian.PutUint32(w[0:], st.Window.SndWl1)
	binary.NativeEndian.PutUint32(w[4:], st.Window.SndWnd)
	binary.NativeEndian.PutUint32(w[8:], st.Window.MaxWindow)
	binary.NativeEndian.PutUint32(w[12:], st.Window.RcvWnd)
	binary.NativeEndian.PutUint32(w[16:], st.Window.RcvWup)
	if err := setsockoptBytes(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR_WINDOW, w[:]); err != nil {
		return fmt.Errorf("handoff: restore TCP_REPAIR_WINDOW: %w", err)
	}
	if err := set("TCP_REPAIR_QUEUE none", unix.TCP_REPAIR_QUEUE, tcpNoQueue); err != nil {
		return err
	}
	if err := set("TCP_REPAIR off", unix.TCP_REPAIR, unix.TCP_REPAIR_OFF); err != nil {
		return err
	}
	// Bytes the old owner had queued but never transmitted go out the
	// normal way now.
	if st.Unsent > 0 && int(st.Unsent) <= len(st.SendQueue) {
		rest := st.SendQueue[len(st.SendQueue)-int(st.Unsent):]
		for len(rest) > 0 {
			n, err := unix.Write(fd, rest)
			if err != nil {
				return fmt.Errorf("handoff: restore unsent bytes: %w", err)
			}
			rest = rest[n:]
		}
	}
	return nil
}

// fillQueue writes b into a repair queue in chunks.
func fillQueue(fd, queue int, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_REPAIR_QUEUE, queue); err != nil {
		return fmt.Errorf("handoff: restore TCP_REPAIR_QUEUE %d: %w", queue, err)
	}
	for len(b) > 0 {
		n, err := unix.Write(fd, b[:min(len(b), repairChunk)])
		if err != nil {
			return fmt.Errorf("handoff: restore queue %d (%d bytes left): %w", queue, len(b), err)
		}
		b = b[n:]
	}
	return nil
}

func sockaddr(ap netip.AddrPort) *unix.SockaddrInet4 {
	return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
}

func getsockoptBytes(fd, level, opt int, b []byte) (int, error) {
	l := uint32(len(b))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return int(l), nil
}

func setsockoptBytes(fd, level, opt int, b []byte) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// Thaw takes a socket that Freeze left in repair mode back to normal
// operation without sending anything (TCP_REPAIR_OFF_NO_WP), for a front
// that could not hand the connection off and relays it instead.
func Thaw(c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("handoff: thaw: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = ThawFD(int(fd)) }); err != nil {
		return fmt.Errorf("handoff: thaw: %w", err)
	}
	return serr
}

// InterfaceOf returns the name of the interface that holds addr, for
// SteerConfig.Dev when the front's VIP is on the interface towards the
// nodes.
func InterfaceOf(addr netip.Addr) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("handoff: interfaces: %w", err)
	}
	for _, ifc := range ifs {
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
					return ifc.Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("handoff: no interface holds %s", addr)
}
