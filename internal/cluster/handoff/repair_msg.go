//go:build linux

package handoff

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// The repair path's control messages (seed 002 §3: SYN-HANDOFF/ASK-HANDOFF
// carry the connection to the real server, FIN-HANDOFF clears it again).
// Every message is one sealed frame:
//
//	magic "SHRP" | version 2 | kind | direction | 0 | nonce[12] | unix ns (8) | len (4) | node[8]   header, 40 bytes
//	header tag[16]                                                                              GMAC of the header
//	ciphertext[len] | tag[16]                                                                   AES-256-GCM of the payload
//
// Keys are per node: HKDF-SHA256 (RFC 5869) of the cluster key with the
// node's identity in the info string, one key for header tags and one for
// payloads. A node's identity is the address of its handoff port as the
// front dials it and as the node accepts it (Auth.ForNode); the header
// carries the first 8 bytes of its SHA-256 (node), and both tags cover the
// header as additional data (RFC 5116 §2.1), so a frame sealed for one node
// is refused by every other (by its key and by its node field), and a frame
// sent to a node is refused by the front (direction). The header tag lets a receiver
// check a frame's claimed length before it allocates anything for it; the
// payload (the client's request bytes among them) crosses the network
// encrypted.
//
// A receiver refuses a frame whose tags do not verify (forged), whose
// timestamp is further than MaxSkew from its clock (stale), or whose nonce
// it has already accepted within that window (replayed).
//
// Nonces are never random alone, since a random 96-bit GCM nonce is only
// safe for about 2^32 messages per key (NIST SP 800-38D §8.3): each Auth
// draws 3 random bytes once and then counts from its start time in
// nanoseconds, so a sender restarted later never reuses a value, and the
// direction byte keeps the front's and the node's nonces apart.
const (
	frameMagic   = "SHRP"
	frameVersion = 2
	frameHeader  = 4 + 1 + 1 + 1 + 1 + 12 + 8 + 4 + 8
	offNonce     = 8  // nonce[12]
	offTime      = 20 // unix ns
	offLen       = 28 // payload length
	offNode      = 32 // node identity hash[8]
	frameTag     = 16
	// FrameHeaderLen is what a reader needs to check a frame and learn
	// its length (OpenHeader): the header and its tag.
	FrameHeaderLen = frameHeader + frameTag
	// MaxFramePayload bounds one message: a TCPState carries the socket's
	// unread receive queue and unacknowledged send queue, which the front
	// keeps small (it freezes right after reading a request head). A
	// receiver allocates for a frame only after its header tag verified.
	MaxFramePayload = 8 << 20
)

// MsgKind is a repair-path control message type.
type MsgKind uint8

const (
	// MsgHandoff (front → node) carries a frozen connection: flow id and
	// TCPState. It plays the role of seed 002's SYN-HANDOFF + ASK-HANDOFF.
	MsgHandoff MsgKind = 1
	// MsgHandoffAck (node → front) answers one MsgHandoff: flow id and a
	// status byte (0 = rebuilt and serving).
	MsgHandoffAck MsgKind = 2
	// MsgFinHandoff (node → front) says the moved connection has ended, so
	// the front removes its steering entry (seed 002's FIN-HANDOFF):
	// flow (12 bytes) and the handoff's RcvSeq as an incarnation tag.
	MsgFinHandoff MsgKind = 3
	// MsgHello (front → node) is the first frame on a new control
	// channel: the front's virtual IP (4 bytes), and its port (2 more)
	// when the front wants the node to accept the VIP's new connections
	// itself (repair_accept.go). MsgHelloAck (node → front) answers it
	// with a flags byte (AckGuarded: the node's Guard covers that address;
	// AckAccepts: it listens on VIP:port), so that the front knows before
	// its first handoff whether it may steer early (RepairMover) and
	// whether it may send the node new connections.
	MsgHello    MsgKind = 4
	MsgHelloAck MsgKind = 5
)

// Direction says which way a frame travels; it is sealed into the frame so
// that a frame cannot be reflected back to its sender.
type Direction uint8

const (
	// ToNode marks frames the front sends to a node.
	ToNode Direction = 1
	// ToFront marks frames a node sends to the front.
	ToFront Direction = 2
)

// Errors a receiver returns for refused frames (use errors.Is).
var (
	ErrForged    = errors.New("handoff: message authentication failed")
	ErrReplayed  = errors.New("handoff: replayed message")
	ErrStale     = errors.New("handoff: stale message")
	ErrMalformed = errors.New("handoff: malformed message")
)

// DefaultMaxSkew is how far a message's timestamp may be from the
// receiver's clock. The front and nodes sit on one LAN with synchronised
// clocks; a handoff is normally received within a millisecond.
const DefaultMaxSkew = 5 * time.Second

// Auth holds the cluster key shared by the front and its nodes, the replay
// window, and the refusal counters; ForNode gives the sealer for one node.
// It is safe for concurrent use.
type Auth struct {
	key     []byte
	maxSkew time.Duration
	now     func() time.Time

	// prefix and ctr make nonces: see the package's frame description.
	prefix [3]byte
	ctr    atomic.Uint64

	mu     sync.Mutex
	seen   map[[12]byte]int64 // nonce → expiry (unix ns)
	pruned int64

	// Counters of accepted and refused frames, exported for metrics.
	Accepted, Forged, Replayed, Stale, Malformed atomic.Uint64
}

// NewAuth returns an Auth for the cluster key (at least 16 bytes).
// maxSkew 0 means DefaultMaxSkew.
func NewAuth(key []byte, maxSkew time.Duration) (*Auth, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("handoff: shared key has %d bytes, need at least 16", len(key))
	}
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	a := &Auth{key: append([]byte(nil), key...), maxSkew: maxSkew, now: time.Now, seen: make(map[[12]byte]int64)}
	rand.Read(a.prefix[:])
	a.ctr.Store(uint64(time.Now().UnixNano()))
	return a, nil
}

// NodeAuth seals and opens the frames of one node's control channel, under
// that node's key. Make one per channel with Auth.ForNode; it is safe for
// concurrent use.
type NodeAuth struct {
	a         *Auth
	id        [8]byte // the node's identity hash, as carried in every frame
	hdr, body cipher.AEAD
}

// nodeID encodes a node's handoff address: IPv4 (or IPv6) bytes and the
// port, IPv4-mapped addresses unmapped so both ends agree.
func nodeID(ap netip.AddrPort) []byte {
	a := ap.Addr().Unmap().AsSlice()
	return binary.BigEndian.AppendUint16(a, ap.Port())
}

// ForNode returns the sealer for the node whose handoff port is at node:
// the front passes the address it dialled, the node the address the channel
// was accepted on.
func (a *Auth) ForNode(node netip.AddrPort) (*NodeAuth, error) {
	if !node.IsValid() {
		return nil, fmt.Errorf("handoff: node identity %v is not an address and port", node)
	}
	id := nodeID(node)
	n := &NodeAuth{a: a}
	sum := sha256.Sum256(id)
	copy(n.id[:], sum[:])
	for _, k := range []struct {
		purpose string
		aead    *cipher.AEAD
	}{{"header", &n.hdr}, {"payload", &n.body}} {
		key, err := hkdf.Key(sha256.New, a.key, nil, "shoal repair v2 "+k.purpose+" node "+string(id), 32)
		if err != nil {
			return nil, fmt.Errorf("handoff: derive %s key for %v: %w", k.purpose, node, err)
		}
		blk, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("handoff: %w", err)
		}
		if *k.aead, err = cipher.NewGCM(blk); err != nil {
			return nil, fmt.Errorf("handoff: %w", err)
		}
	}
	return n, nil
}

// Auth returns the Auth n belongs to (for its counters).
func (n *NodeAuth) Auth() *Auth { return n.a }

// Seal appends one frame of kind k travelling in direction dir with
// payload p to dst. Both tags cover the header, which holds the node's
// identity, as additional data.
func (n *NodeAuth) Seal(dst []byte, dir Direction, k MsgKind, p []byte) []byte {
	start := len(dst)
	dst = append(dst, frameMagic...)
	dst = append(dst, frameVersion, byte(k), byte(dir), 0)
	dst = append(dst, byte(dir))
	dst = append(dst, n.a.prefix[:]...)
	dst = binary.BigEndian.AppendUint64(dst, n.a.ctr.Add(1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(n.a.now().UnixNano()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
	dst = append(dst, n.id[:]...)
	// hdr and nonce keep pointing into dst's array if the Seals below
	// grow dst elsewhere; they are only read.
	hdr := dst[start : start+frameHeader]
	nonce := hdr[offNonce : offNonce+12]
	dst = n.hdr.Seal(dst, nonce, nil, hdr)
	return n.body.Seal(dst, nonce, p, hdr)
}

// OpenHeader checks the header and header tag at the start of hdr (at
// least FrameHeaderLen bytes) of a frame expected to travel in direction
// dir, and returns the whole frame's length. Nothing of the frame needs to
// be allocated before it answers: a claimed length is believed only once
// its tag verified. Refusals are counted.
func (n *NodeAuth) OpenHeader(hdr []byte, dir Direction) (int, error) {
	if len(hdr) < FrameHeaderLen || string(hdr[:4]) != frameMagic || hdr[4] != frameVersion {
		n.a.Malformed.Add(1)
		return 0, ErrMalformed
	}
	if [8]byte(hdr[offNode:offNode+8]) != n.id {
		n.a.Forged.Add(1)
		return 0, fmt.Errorf("%w: frame sealed for another node", ErrForged)
	}
	if _, err := n.hdr.Open(nil, hdr[offNonce:offNonce+12], hdr[frameHeader:FrameHeaderLen], hdr[:frameHeader]); err != nil {
		n.a.Forged.Add(1)
		return 0, ErrForged
	}
	if Direction(hdr[6]) != dir || hdr[offNonce] != byte(dir) {
		n.a.Forged.Add(1)
		return 0, fmt.Errorf("%w: frame for direction %d, want %d", ErrForged, hdr[6], dir)
	}
	l := binary.BigEndian.Uint32(hdr[offLen:])
	if l > MaxFramePayload {
		n.a.Malformed.Add(1)
		return 0, fmt.Errorf("%w: payload of %d bytes", ErrMalformed, l)
	}
	ts := int64(binary.BigEndian.Uint64(hdr[offTime:]))
	now := n.a.now().UnixNano()
	if d := now - ts; d > int64(n.a.maxSkew) || d < -int64(n.a.maxSkew) {
		n.a.Stale.Add(1)
		return 0, fmt.Errorf("%w: %v off", ErrStale, time.Duration(d))
	}
	n.a.mu.Lock()
	_, dup := n.a.seen[[12]byte(hdr[offNonce:offNonce+12])]
	n.a.mu.Unlock()
	if dup {
		n.a.Replayed.Add(1)
		return 0, ErrReplayed
	}
	return FrameHeaderLen + int(l) + frameTag, nil
}

// Open checks one whole frame expected to travel in direction dir,
// decrypts its payload in place and returns its kind and payload (aliasing
// frame). Refusals are counted and returned as ErrForged, ErrStale,
// ErrReplayed or ErrMalformed.
func (n *NodeAuth) Open(frame []byte, dir Direction) (MsgKind, []byte, error) {
	l, err := n.OpenHeader(frame, dir)
	if err != nil {
		return 0, nil, err
	}
	if l != len(frame) {
		n.a.Malformed.Add(1)
		return 0, nil, ErrMalformed
	}
	nb := [12]byte(frame[offNonce : offNonce+12])
	ct := frame[FrameHeaderLen:]
	p, err := n.body.Open(ct[:0], frame[offNonce:offNonce+12], ct, frame[:frameHeader])
	if err != nil {
		n.a.Forged.Add(1)
		return 0, nil, ErrForged
	}
	a := n.a
	ts := int64(binary.BigEndian.Uint64(frame[offTime:]))
	now := a.now().UnixNano()
	a.mu.Lock()
	if now-a.pruned > int64(a.maxSkew) {
		for k, exp := range a.seen {
			if exp < now {
				delete(a.seen, k)
			}
		}
		a.pruned = now
	}
	if _, dup := a.seen[nb]; dup {
		a.mu.Unlock()
		a.Replayed.Add(1)
		return 0, nil, ErrReplayed
	}
	// A nonce must be remembered as long as its timestamp is acceptable.
	a.seen[nb] = ts + int64(a.maxSkew) + 1
	a.mu.Unlock()
	a.Accepted.Add(1)
	return MsgKind(frame[5]), p, nil
}

// Flow is a connection's 4-tuple as the front sees it: Client is the
// client's address and port, VIP the virtual address it connected to.
type Flow struct {
	Client, VIP netip.AddrPort
}

func (f Flow) String() string { return f.Client.String() + "->" + f.VIP.String() }

func appendAddrPort(b []byte, ap netip.AddrPort) []byte {
	a := ap.Addr().As4()
	b = append(b, a[:]...)
	return binary.BigEndian.AppendUint16(b, ap.Port())
}

func readAddrPort(b []byte) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), binary.BigEndian.Uint16(b[4:6]))
}

// AppendBinary appends f's 12-byte encoding.
func (f Flow) AppendBinary(b []byte) []byte {
	return appendAddrPort(appendAddrPort(b, f.Client), f.VIP)
}

// UnmarshalFlow decodes a Flow from the first 12 bytes of b.
func UnmarshalFlow(b []byte) (Flow, error) {
	if len(b) < 12 {
		return Flow{}, ErrMalformed
	}
	return Flow{Client: readAddrPort(b), VIP: readAddrPort(b[6:])}, nil
}

const stateFixed = 6 + 6 + 4*4 + 1 + 2 + 4 + 5*4 + 4 + 4 + 4

// AppendBinary appends st's encoding (all integers big-endian).
func (st *TCPState) AppendBinary(b []byte) []byte {
	b = appendAddrPort(b, st.Local)
	b = appendAddrPort(b, st.Remote)
	b = binary.BigEndian.AppendUint32(b, st.SndSeq)
	b = binary.BigEndian.AppendUint32(b, st.RcvSeq)
	b = binary.BigEndian.AppendUint32(b, st.MSS)
	b = binary.BigEndian.AppendUint32(b, uint32(st.Fetch)) // was reserved (0): the fetch hint
	var fl byte
	if st.Wscale {
		fl |= 1
	}
	if st.SACK {
		fl |= 2
	}
	if st.Timestamps {
		fl |= 4
	}
	b = append(b, fl, st.SndWscale, st.RcvWscale)
	b = binary.BigEndian.AppendUint32(b, st.TSVal)
	w := st.Window
	for _, v := range [...]uint32{w.SndWl1, w.SndWnd, w.MaxWindow, w.RcvWnd, w.RcvWup, st.Unsent} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(st.RecvQueue)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(st.SendQueue)))
	b = append(b, st.RecvQueue...)
	return append(b, st.SendQueue...)
}

// UnmarshalState decodes a TCPState; its queues alias b.
func UnmarshalState(b []byte) (*TCPState, error) {
	if len(b) < stateFixed {
		return nil, fmt.Errorf("%w: state of %d bytes", ErrMalformed, len(b))
	}
	st := &TCPState{Local: readAddrPort(b), Remote: readAddrPort(b[6:])}
	p := b[12:]
	u := func() uint32 { v := binary.BigEndian.Uint32(p); p = p[4:]; return v }
	st.SndSeq, st.RcvSeq, st.MSS = u(), u(), u()
	st.Fetch = uint16(u())
	fl := p[0]
	st.Wscale, st.SACK, st.Timestamps = fl&1 != 0, fl&2 != 0, fl&4 != 0
	st.SndWscale, st.RcvWscale = p[1], p[2]
	p = p[3:]
	st.TSVal = u()
	st.Window = RepairWindow{SndWl1: u(), SndWnd: u(), MaxWindow: u(), RcvWnd: u(), RcvWup: u()}
	st.Unsent = u()
	nr, ns := u(), u()
	if uint64(nr)+uint64(ns) != uint64(len(p)) || st.Unsent > ns || st.SndWscale > 14 || st.RcvWscale > 14 {
		return nil, fmt.Errorf("%w: inconsistent state lengths", ErrMalformed)
	}
	if bad := func(a netip.Addr) bool {
		return !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}; bad(st.Local.Addr()) || bad(st.Remote.Addr()) || st.Local.Port() == 0 || st.Remote.Port() == 0 {
		return nil, fmt.Errorf("%w: bad addresses %v %v", ErrMalformed, st.Local, st.Remote)
	}
	st.RecvQueue = p[:nr:nr]
	st.SendQueue = p[nr:]
	return st, nil
}
