package handoff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Message kinds. Every message is one SOCK_SEQPACKET record: a fixed
// FDHeaderLen-byte header, then the client bytes already read; kinds that move
// a connection carry exactly one descriptor in an SCM_RIGHTS control message.
const (
	// FDHandoff (front → node) moves a client connection to the node,
	// with the request head and any pipelined bytes the front has read.
	FDHandoff uint8 = 1
	// FDReturn (node → front) hands a connection back for re-dispatch,
	// with the bytes of the next request(s) the node has read.
	FDReturn uint8 = 2
	// FDEnded (node → front, no descriptor) reports that a connection
	// handed off with FDFlagReturn ended at the node, so the front can drop it
	// from its connection table (seed 002's FIN-HANDOFF).
	FDEnded uint8 = 3
	// FDTable (front → node, no descriptor) carries changes to the tag
	// table the front shares with its nodes (passfd_tag.go): the nodes'
	// sockets, their load flags and URL → node entries.
	FDTable uint8 = 4
	// FDMove (node → node) moves a client connection handed off with
	// FDFlagTag to the node the shared table names for its next request,
	// with the bytes read from it (seed 000 §2.2.2's handoff between
	// back-ends).
	FDMove uint8 = 5
	// FDAck (node → node, no descriptor) acknowledges an FDMove, or
	// refuses it with FDFlagRefused; until then the sender keeps a copy of
	// the connection, so a receiver dying mid-move loses nothing.
	FDAck uint8 = 6
	// FDNote (node → front, no descriptor) reports, in a batch, the
	// requests nodes routed by the shared table, the moves they made and
	// the connections that ended, so the front's tables stay true.
	FDNote uint8 = 7
	// fdMaxKind is the largest kind.
	fdMaxKind = FDNote
)

// fdCarries reports whether messages of kind carry a descriptor.
func fdCarries(kind uint8) bool {
	return kind == FDHandoff || kind == FDReturn || kind == FDMove
}

// FDFlagReturn asks the node to serve only the first request of a handed-off
// connection and then give it back (FDReturn) with whatever it has read
// of the next one; without it the node keeps the connection to its end.
const FDFlagReturn uint8 = 1

// FDFlagEnded asks the node to send FDEnded when a connection it keeps to
// its end (no FDFlagReturn) ends, so the front can count the connection
// against the node meanwhile (least-connection policies, as LVS counts a
// real server's connections).
const FDFlagEnded uint8 = 2

// FDFlagTag (FDHandoff, FDMove) asks the node to route each later request on
// the connection by the tag table the front shares: serve it, move the
// connection to the node the table names (FDMove), or, when the table
// cannot tell, hand it back to the front (FDReturn). Ends and moves are
// reported in FDNote batches.
const FDFlagTag uint8 = 4

// FDFlagRefused (FDAck) refuses a move: the sender keeps the connection.
const FDFlagRefused uint8 = 1

// FDHeaderLen is the size of the fixed message header.
const FDHeaderLen = 24

// FDMaxData bounds the client bytes carried in one message: a maximal request
// head (8 KiB by default) plus the front's read-ahead, with room to spare.
// The kernel's default unix send buffer (≈208 KiB) holds several such
// records.
const FDMaxData = 64 << 10

// fdMagic starts every header, so a stray writer or a version mismatch is
// refused instead of being misparsed.
var fdMagic = [4]byte{'s', 'h', 'f', '1'}

// FDHeader is the fixed part of a message.
type FDHeader struct {
	// Kind is one of FDHandoff … FDNote.
	Kind uint8
	// Flags holds FDFlagReturn, FDFlagEnded and FDFlagTag (FDAck:
	// FDFlagRefused).
	Flags uint8
	// Node is the cluster index of the node the connection is sent to
	// (FDHandoff) or comes back from (FDReturn, FDEnded), so the front
	// knows the holder without a lookup.
	Node int32
	// Moves counts the moves of the current dispatch: the front sends 1 and
	// a node handing the connection back sends what it received plus one
	// (statistics and loop detection for multi-hop forwarding).
	Moves uint32
	// Conn is the front's connection id (policy.Request.Conn), echoed back
	// so a returned connection keeps its identity in tbccrd's table.
	Conn uint64
	// Fetch (FDHandoff) is 1 + the index of the node whose memory the
	// node should fetch the first request's object from (the policy's
	// Decision.Fetch, peer fetch of seed 001); 0: none. It fills the two
	// bytes the header kept reserved, so the format is unchanged for
	// senders that do not set it.
	Fetch uint16
}

// FetchOf returns the Fetch field for a policy decision's fetch node and
// serving node: 0 unless fetch names another node.
func FetchOf(fetch, node int) uint16 {
	if fetch < 0 || fetch == node || fetch >= 0xffff {
		return 0
	}
	return uint16(fetch + 1)
}

// AppendFDHeader appends h's wire form to dst.
func AppendFDHeader(dst []byte, h FDHeader) []byte {
	dst = append(dst, fdMagic[:]...)
	dst = append(dst, h.Kind, h.Flags)
	dst = binary.LittleEndian.AppendUint16(dst, h.Fetch)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.Node))
	dst = binary.LittleEndian.AppendUint32(dst, h.Moves)
	dst = binary.LittleEndian.AppendUint64(dst, h.Conn)
	return dst
}

// ParseFDHeader decodes the header at the start of b.
func ParseFDHeader(b []byte) (FDHeader, error) {
	if len(b) < FDHeaderLen {
		return FDHeader{}, fmt.Errorf("%w: %d-byte message", ErrFDMessage, len(b))
	}
	if [4]byte(b[:4]) != fdMagic {
		return FDHeader{}, fmt.Errorf("%w: bad fdMagic %q", ErrFDMessage, b[:4])
	}
	h := FDHeader{
		Kind:  b[4],
		Flags: b[5],
		Node:  int32(binary.LittleEndian.Uint32(b[8:])),
		Moves: binary.LittleEndian.Uint32(b[12:]),
		Conn:  binary.LittleEndian.Uint64(b[16:]),
		Fetch: binary.LittleEndian.Uint16(b[6:]),
	}
	if h.Kind < FDHandoff || h.Kind > fdMaxKind {
		return FDHeader{}, fmt.Errorf("%w: kind %d", ErrFDMessage, h.Kind)
	}
	return h, nil
}

// Errors from Recv. Each one means the message was dropped and any
// descriptor that came with it closed (the client sees its connection
// reset or closed, never a hang).
var (
	// ErrFDMessage: the record is not a well-formed shoal message.
	ErrFDMessage = errors.New("handoff: malformed message")
	// ErrFDTruncated: the record or its control data did not fit the buffers
	// (MSG_TRUNC or MSG_CTRUNC).
	ErrFDTruncated = errors.New("handoff: message truncated")
	// ErrNoDescriptor: a kind that moves a connection came without one.
	ErrNoDescriptor = errors.New("handoff: message without a descriptor")
)

// fdOOBSize is room for the control data of one message: a few descriptors,
// so that a sender passing more than one is detected (and the extras closed)
// rather than silently truncated by the kernel.
var fdOOBSize = unix.CmsgSpace(4 * 4)

// SendFD writes one message on uc: h, then the data slices (the head and
// the bytes after it, say) concatenated, with conn's descriptor
// attached (SCM_RIGHTS) when conn is not nil. The message is atomic on a
// SOCK_SEQPACKET socket: a nil error means the descriptor is queued in the
// kernel for the peer, and the caller must close its own copy (closing it
// does not end the TCP connection while the peer's copy exists); a non-nil
// error means nothing was sent and the caller still owns the connection.
// timeout bounds a send blocked on a full socket buffer (0: no limit).
// scratch, if not nil, is reused for the record.
func SendFD(uc *net.UnixConn, h FDHeader, conn syscall.Conn, timeout time.Duration, scratch []byte, data ...[]byte) ([]byte, error) {
	msg, err := record(uc, h, timeout, scratch, data)
	if err != nil || conn == nil {
		if err == nil {
			_, _, err = uc.WriteMsgUnix(msg, nil, nil)
		}
		return msg, err
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return msg, fmt.Errorf("handoff: client socket: %w", err)
	}
	var werr error
	// Control holds a reference on the descriptor, so it cannot be closed
	// and reused under us while it is being sent.
	cerr := rc.Control(func(fd uintptr) {
		_, _, werr = uc.WriteMsgUnix(msg, unix.UnixRights(int(fd)), nil)
	})
	if cerr != nil {
		return msg, fmt.Errorf("handoff: client socket: %w", cerr)
	}
	if werr != nil {
		return msg, fmt.Errorf("handoff: sendmsg: %w", werr)
	}
	return msg, nil
}

// SendRawFD is SendFD for a bare descriptor (one received with
// RecvRawFD and not wrapped): on success the caller closes fd.
func SendRawFD(uc *net.UnixConn, h FDHeader, fd int, timeout time.Duration, scratch []byte, data ...[]byte) ([]byte, error) {
	msg, err := record(uc, h, timeout, scratch, data)
	if err != nil {
		return msg, err
	}
	if _, _, err := uc.WriteMsgUnix(msg, unix.UnixRights(fd), nil); err != nil {
		return msg, fmt.Errorf("handoff: sendmsg: %w", err)
	}
	return msg, nil
}

// record builds a message in scratch and arms uc's write deadline.
func record(uc *net.UnixConn, h FDHeader, timeout time.Duration, scratch []byte, data [][]byte) ([]byte, error) {
	total := 0
	for _, d := range data {
		total += len(d)
	}
	if total > FDMaxData {
		return scratch, fmt.Errorf("handoff: %d bytes to send, limit %d", total, FDMaxData)
	}
	msg := AppendFDHeader(scratch[:0], h)
	for _, d := range data {
		msg = append(msg, d...)
	}
	if timeout > 0 && uc != nil {
		uc.SetWriteDeadline(time.Now().Add(timeout))
	}
	return msg, nil
}

// FDMessage is one message read by Recv.
type FDMessage struct {
	Header FDHeader
	// Data is the client bytes carried in the message; it aliases the
	// buffer given to Recv.
	Data []byte
	// Conn is the moved client connection, nil for kinds without one and
	// for RecvRawFD.
	Conn net.Conn
	// FD is the moved descriptor from RecvRawFD (-1 otherwise); the
	// receiver owns it: send it on with SendRawFD, wrap it with WrapFD, or
	// close it.
	FD int
	// Stray is the number of extra descriptors that came with the message
	// and were closed.
	Stray int
}

// RecvFD reads one message from uc into buf (which should hold FDHeaderLen +
// FDMaxData bytes) and wraps a received descriptor with net.FileConn. On any
// error other than a read error of uc itself, every descriptor the message
// carried has been closed; the caller may go on reading.
func RecvFD(uc *net.UnixConn, buf []byte) (FDMessage, error) {
	r, err := RecvRawFD(uc, buf)
	if err != nil || r.FD < 0 {
		return r, err
	}
	c, err := WrapFD(r.FD)
	if err != nil {
		return FDMessage{}, err
	}
	r.Conn, r.FD = c, -1
	return r, nil
}

// WrapFD turns a received socket descriptor into a net.Conn (a
// *net.TCPConn for a TCP socket) and closes fd, also on error.
func WrapFD(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "handoff")
	c, err := net.FileConn(f) // dups the descriptor
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: wrap received socket: %v", ErrFDMessage, err)
	}
	return c, nil
}

// RecvRawFD is RecvFD without wrapping: the descriptor comes back in
// FDMessage.FD, so a receiver that only passes it on saves net.FileConn's
// half-dozen system calls.
func RecvRawFD(uc *net.UnixConn, buf []byte) (FDMessage, error) {
	var oobArr [64]byte
	oob := oobArr[:fdOOBSize]
	n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
	var fds []int
	if oobn > 0 {
		fds = parseFDRights(oob[:oobn])
	}
	return parseRecv(buf, n, oobn, flags, fds, err)
}

// parseRecv makes the message of a recvmsg that read n bytes into buf and
// oobn bytes of control data holding fds, closing every descriptor it does
// not return.
func parseRecv(buf []byte, n, oobn, flags int, fds []int, err error) (FDMessage, error) {
	if err != nil {
		closeFDs(fds)
		if errors.Is(err, io.EOF) {
			return FDMessage{}, errFDEOF
		}
		return FDMessage{}, err
	}
	if n == 0 && oobn == 0 {
		// A zero-length record without control data: on SOCK_SEQPACKET this
		// is end of stream (the peer closed).
		return FDMessage{}, errFDEOF
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeFDs(fds)
		return FDMessage{}, fmt.Errorf("%w (flags %#x, %d bytes, %d descriptors)", ErrFDTruncated, flags, n, len(fds))
	}
	h, err := ParseFDHeader(buf[:n])
	if err != nil {
		closeFDs(fds)
		return FDMessage{}, err
	}
	r := FDMessage{Header: h, Data: buf[FDHeaderLen:n], FD: -1}
	if !fdCarries(h.Kind) {
		r.Stray = len(fds)
		closeFDs(fds)
		return r, nil
	}
	if len(fds) == 0 {
		return FDMessage{}, fmt.Errorf("%w (kind %d)", ErrNoDescriptor, h.Kind)
	}
	r.Stray = len(fds) - 1
	closeFDs(fds[1:])
	r.FD = fds[0]
	return r, nil
}

// close closes the message's connection or descriptor, if any.
func (r *FDMessage) close() {
	if r.Conn != nil {
		r.Conn.Close()
	}
	if r.FD >= 0 {
		unix.Close(r.FD)
	}
}

// errFDEOF is returned by Recv when the fdPeer closed the socket.
var errFDEOF = fmt.Errorf("handoff: fdPeer closed: %w", net.ErrClosed)

// parseFDRights returns every descriptor in the control data.
func parseFDRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		if r, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// fdCounter is a small helper so the stats structs below stay plain.
type fdCounter = atomic.Uint64
