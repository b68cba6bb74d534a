package mbpp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"shoal/internal/base/wire"
)

// Kind is the type of a message.
type Kind uint8

// The messages of MBPP. Ping carries the delta of the performance list (the
// seed sends list and ping as two messages to the same PoP; one frame does
// both). Ack confirms a token hop so that a silent neighbour is found.
const (
	KindPing    Kind = 1 + iota // token with the performance list delta, to the successor
	KindPong                    // token the other way round, to the predecessor
	KindAck                     // a token was received (Nb, AckOf)
	KindJoin                    // a newcomer asks a contact to propose it (Proposals[0])
	KindWelcome                 // the join went round accepted: full list (Entries)
	KindRefuse                  // the join was refused (Reason)
	KindProbe                   // a ring asks a PoP it holds dead whether it is a ring of its own (heal.go)
)

var kindNames = [...]string{"?", "ping", "pong", "ack", "join", "welcome", "refuse", "probe"}

// String names the kind for logs.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Proposal is a newcomer's join as it travels round the ring with the ping:
// every PoP it passes checks it (Config.Accept) and counts its acceptance;
// the PoP that injected it (Origin) commits it when it comes back accepted by
// all (seed 003 §3.1).
type Proposal struct {
	ID         ID
	Name, Addr string
	Proof      []byte
	Origin     ID
	Accepts    uint32
	Rejected   bool
	Reason     string
}

// Msg is one MBPP message. To is the receiver's ID (0 when only its address
// is known, as for a join); ToAddr is filled from the view for the transport
// and is not encoded.
type Msg struct {
	Kind      Kind
	From, To  ID
	ToAddr    string
	Nb        int64
	AckOf     Kind
	Inc       uint32 // the sender's incarnation (tokens), so a rejoined PoP is not taken for its dead self
	Entries   []Entry
	Proposals []Proposal
	Reason    string
}

// Wire format version; a frame of another version is refused.
const wireVersion = 3 // 2: entries may carry their whole link set (flagLinkSet); 3: the meta carries the gateway

// Decoding limits: a frame is already size-capped by the transport, these
// stop a forged count from allocating before the bytes are there.
const (
	maxString = 1024
	maxProof  = 1024
)

// rttUnit is the resolution of a link RTT on the wire (0.1 ms).
const rttUnit = 100 * time.Microsecond

// AppendBinary appends the compact encoding of m: uvarints everywhere, IDs
// as 8 bytes, RTT in 0.1 ms, server performance in thousandths.
func (m *Msg) AppendBinary(b []byte) []byte {
	b = append(b, wireVersion, byte(m.Kind), byte(m.AckOf))
	b = binary.BigEndian.AppendUint64(b, uint64(m.From))
	b = binary.BigEndian.AppendUint64(b, uint64(m.To))
	b = binary.AppendVarint(b, m.Nb)
	b = binary.AppendUvarint(b, uint64(m.Inc))
	b = wire.AppendString(b, m.Reason)
	b = binary.AppendUvarint(b, uint64(len(m.Entries)))
	for i := range m.Entries {
		b = appendEntry(b, &m.Entries[i])
	}
	b = binary.AppendUvarint(b, uint64(len(m.Proposals)))
	for i := range m.Proposals {
		p := &m.Proposals[i]
		b = binary.BigEndian.AppendUint64(b, uint64(p.ID))
		b = wire.AppendString(b, p.Name)
		b = wire.AppendString(b, p.Addr)
		b = wire.AppendString(b, string(p.Proof))
		b = binary.BigEndian.AppendUint64(b, uint64(p.Origin))
		b = binary.AppendUvarint(b, uint64(p.Accepts))
		b = wire.AppendBool(b, p.Rejected)
		b = wire.AppendString(b, p.Reason)
	}
	return b
}

const (
	flagAlive = 1 << iota
	flagMeta
	flagServer
	flagLinkSet
)

func appendEntry(b []byte, e *Entry) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(e.ID))
	b = binary.AppendUvarint(b, uint64(e.Inc))
	b = binary.AppendUvarint(b, e.Version)
	var f byte
	if e.Alive {
		f |= flagAlive
	}
	if e.HasMeta {
		f |= flagMeta
	}
	if e.HasServer {
		f |= flagServer
	}
	if e.HasLinkSet {
		f |= flagLinkSet
	}
	b = append(b, f)
	if e.HasMeta {
		b = binary.AppendUvarint(b, e.MetaVer)
		b = wire.AppendString(b, e.Name)
		b = wire.AppendString(b, e.Addr)
		b = wire.AppendString(b, e.Gateway)
	}
	if e.HasServer {
		b = binary.AppendUvarint(b, e.ServerVer)
		b = binary.AppendUvarint(b, uint64(math.Round(clamp01(e.Server)*1000)))
	}
	if e.HasLinkSet {
		b = binary.AppendUvarint(b, e.LinkSetVer)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Links)))
	for _, l := range e.Links {
		b = binary.BigEndian.AppendUint64(b, uint64(l.Peer))
		b = binary.AppendUvarint(b, l.Ver)
		b = binary.AppendUvarint(b, uint64(l.RTT/rttUnit))
	}
	return b
}

func clamp01(v float64) float64 { return min(max(v, 0), 1) }

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("mbpp: malformed message")

// Decode parses a message encoded by AppendBinary. It never panics and
// allocates only for elements whose bytes are present.
func Decode(b []byte) (Msg, error) {
	r := wire.NewReader(b, ErrMalformed)
	var m Msg
	if v := r.Byte(); r.Err() == nil && v != wireVersion {
		return m, fmt.Errorf("%w: version %d, want %d", ErrMalformed, v, wireVersion)
	}
	m.Kind = Kind(r.Byte())
	m.AckOf = Kind(r.Byte())
	m.From = ID(r.U64())
	m.To = ID(r.U64())
	m.Nb = r.Varint()
	m.Inc = uint32(r.Uvarint())
	m.Reason = r.String(maxString)
	if r.Err() == nil && (m.Kind < KindPing || m.Kind > KindProbe) {
		r.Fail(fmt.Sprintf("unknown kind %d", m.Kind))
	}
	if n := r.Count(12); n > 0 {
		m.Entries = make([]Entry, n)
		for i := range m.Entries {
			decodeEntry(r, &m.Entries[i])
		}
	}
	if n := r.Count(20); n > 0 {
		m.Proposals = make([]Proposal, n)
		for i := range m.Proposals {
			p := &m.Proposals[i]
			p.ID = ID(r.U64())
			p.Name = r.String(maxString)
			p.Addr = r.String(maxString)
			if pr := r.String(maxProof); pr != "" {
				p.Proof = []byte(pr)
			}
			p.Origin = ID(r.U64())
			p.Accepts = uint32(r.Uvarint())
			p.Rejected = r.Byte() != 0
			p.Reason = r.String(maxString)
		}
	}
	if err := r.End(); err != nil {
		return Msg{}, err
	}
	return m, nil
}

func decodeEntry(r *wire.Reader, e *Entry) {
	e.ID = ID(r.U64())
	e.Inc = uint32(r.Uvarint())
	e.Version = r.Uvarint()
	f := r.Byte()
	e.Alive = f&flagAlive != 0
	e.HasMeta = f&flagMeta != 0
	e.HasServer = f&flagServer != 0
	e.HasLinkSet = f&flagLinkSet != 0
	if e.HasMeta {
		e.MetaVer = r.Uvarint()
		e.Name = r.String(maxString)
		e.Addr = r.String(maxString)
		e.Gateway = r.String(maxString)
	}
	if e.HasServer {
		e.ServerVer = r.Uvarint()
		e.Server = float64(r.Uvarint()) / 1000
	}
	if e.HasLinkSet {
		e.LinkSetVer = r.Uvarint()
	}
	if n := r.Count(10); n > 0 {
		e.Links = make(Links, 0, n)
		for range n {
			id := ID(r.U64())
			ver := r.Uvarint()
			e.Links = append(e.Links, Link{Peer: id, Ver: ver, RTT: time.Duration(r.Uvarint()) * rttUnit})
		}
		e.Links = e.Links.normalise()
	}
}
