//go:build linux

package handoff

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// The repair path's control messages (seed 002 §3: SYN-HANDOFF/ASK-HANDOFF
// carry the connection to the real server, FIN-HANDOFF clears it again).
// Every message is one authenticated frame:
//
//	magic "SHRP" | version 1 | kind | 0 0 | nonce[16] | unix ns (8) | len (4) | payload | HMAC-SHA256[32]
//
// The HMAC covers everything before it and uses a key shared by the front
// and its nodes. A receiver refuses a frame whose MAC does not verify
// (forged), whose timestamp is further than MaxSkew from its clock (stale),
// or whose nonce it has already accepted within that window (replayed).
const (
	frameMagic   = "SHRP"
	frameVersion = 1
	frameHeader  = 4 + 1 + 1 + 2 + 16 + 8 + 4
	frameMAC     = sha256.Size
	// MaxFramePayload bounds one message (and what a receiver allocates
	// before the MAC is checked): a TCPState carries the socket's unread
	// receive queue and unacknowledged send queue, which the front keeps
	// small (it freezes right after reading a request head).
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

// Auth signs and verifies control frames with HMAC-SHA256 over a shared
// key and keeps the nonces seen within MaxSkew to refuse replays. It is safe
// for concurrent use.
type Auth struct {
	key     []byte
	maxSkew time.Duration
	now     func() time.Time

	mu     sync.Mutex
	seen   map[[16]byte]int64 // nonce → expiry (unix ns)
	pruned int64

	// macs holds keyed HMAC states: hmac.New hashes the key into two
	// fresh SHA-256 states each time, which cost more than MACing a
	// handoff frame; Reset restores a used one to its keyed state.
	macs sync.Pool

	// Counters of refused frames, exported for metrics.
	Accepted, Forged, Replayed, Stale, Malformed atomic.Uint64
}

// NewAuth returns an Auth for key (at least 16 bytes). maxSkew 0 means
// DefaultMaxSkew.
func NewAuth(key []byte, maxSkew time.Duration) (*Auth, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("handoff: shared key has %d bytes, need at least 16", len(key))
	}
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	a := &Auth{key: append([]byte(nil), key...), maxSkew: maxSkew, now: time.Now, seen: make(map[[16]byte]int64)}
	a.macs.New = func() any { return hmac.New(sha256.New, a.key) }
	return a, nil
}

// mac appends the HMAC of b to dst.
func (a *Auth) mac(dst, b []byte) []byte {
	m := a.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(b)
	dst = m.Sum(dst)
	a.macs.Put(m)
	return dst
}

// Seal appends one signed frame of kind k with payload p to dst.
func (a *Auth) Seal(dst []byte, k MsgKind, p []byte) []byte {
	start := len(dst)
	dst = append(dst, frameMagic...)
	dst = append(dst, frameVersion, byte(k), 0, 0)
	var nonce [16]byte
	rand.Read(nonce[:])
	dst = append(dst, nonce[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.now().UnixNano()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
	dst = append(dst, p...)
	return a.mac(dst, dst[start:])
}

// FrameLen reports the total length of the frame that starts with hdr
// (at least frameHeader bytes), or an error if the header is malformed.
func FrameLen(hdr []byte) (int, error) {
	if len(hdr) < frameHeader || string(hdr[:4]) != frameMagic || hdr[4] != frameVersion {
		return 0, ErrMalformed
	}
	n := binary.BigEndian.Uint32(hdr[frameHeader-4:])
	if n > MaxFramePayload {
		return 0, fmt.Errorf("%w: payload of %d bytes", ErrMalformed, n)
	}
	return frameHeader + int(n) + frameMAC, nil
}

// FrameHeaderLen is the fixed header length a reader needs for FrameLen.
const FrameHeaderLen = frameHeader

// Open verifies one whole frame and returns its kind and payload (aliasing
// frame). Refusals are counted and returned as ErrForged, ErrStale,
// ErrReplayed or ErrMalformed.
func (a *Auth) Open(frame []byte) (MsgKind, []byte, error) {
	n, err := FrameLen(frame)
	if err != nil || n != len(frame) {
		a.Malformed.Add(1)
		return 0, nil, ErrMalformed
	}
	body, mac := frame[:n-frameMAC], frame[n-frameMAC:]
	var sum [frameMAC]byte
	if !hmac.Equal(a.mac(sum[:0], body), mac) {
		a.Forged.Add(1)
		return 0, nil, ErrForged
	}
	var nonce [16]byte
	copy(nonce[:], frame[8:24])
	ts := int64(binary.BigEndian.Uint64(frame[24:32]))
	now := a.now().UnixNano()
	if d := now - ts; d > int64(a.maxSkew) || d < -int64(a.maxSkew) {
		a.Stale.Add(1)
		return 0, nil, fmt.Errorf("%w: %v off", ErrStale, time.Duration(d))
	}
	a.mu.Lock()
	if now-a.pruned > int64(a.maxSkew) {
		for k, exp := range a.seen {
			if exp < now {
				delete(a.seen, k)
			}
		}
		a.pruned = now
	}
	if _, dup := a.seen[nonce]; dup {
		a.mu.Unlock()
		a.Replayed.Add(1)
		return 0, nil, ErrReplayed
	}
	// A nonce must be remembered as long as its timestamp is acceptable.
	a.seen[nonce] = ts + int64(a.maxSkew) + 1
	a.mu.Unlock()
	a.Accepted.Add(1)
	return MsgKind(frame[5]), body[frameHeader:], nil
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
	b = binary.BigEndian.AppendUint32(b, 0) // reserved
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
	_ = u()
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
