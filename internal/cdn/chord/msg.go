package chord

import (
	"encoding/binary"
	"errors"
	"fmt"

	"shoal/internal/base/wire"
)

const wireVersion = 1

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("chord: malformed message")

const (
	maxAddr  = 256
	maxSuccs = 32
)

// AppendBinary appends m's compact encoding (IDs as 8 bytes, uvarints).
func (m *Msg) AppendBinary(b []byte) []byte {
	var f byte
	if m.Done {
		f |= 1
	}
	if m.HasPred {
		f |= 2
	}
	b = append(b, wireVersion, byte(m.Kind), f)
	b = appendPeer(b, m.From)
	b = appendPeer(b, m.To)
	b = binary.AppendUvarint(b, m.Req)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Key))
	b = appendPeer(b, m.Node)
	b = appendPeer(b, m.Pred)
	b = binary.AppendUvarint(b, uint64(len(m.Succs)))
	for _, p := range m.Succs {
		b = appendPeer(b, p)
	}
	return b
}

func appendPeer(b []byte, p Peer) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(p.ID))
	return wire.AppendString(b, p.Addr)
}

func readPeer(r *wire.Reader) Peer {
	p := Peer{ID: ID(r.U64())}
	p.Addr = r.String(maxAddr)
	if r.Err() != nil {
		return Peer{}
	}
	return p
}

// Decode parses a message encoded by AppendBinary; it never panics.
func Decode(b []byte) (Msg, error) {
	if len(b) < 3 {
		return Msg{}, fmt.Errorf("%w: short", ErrMalformed)
	}
	if b[0] != wireVersion {
		return Msg{}, fmt.Errorf("%w: version %d", ErrMalformed, b[0])
	}
	m := Msg{Kind: Kind(b[1]), Done: b[2]&1 != 0, HasPred: b[2]&2 != 0}
	if m.Kind < KindQuery || m.Kind > KindLeave {
		return Msg{}, fmt.Errorf("%w: kind %d", ErrMalformed, b[1])
	}
	r := wire.NewReader(b[3:], ErrMalformed)
	m.From = readPeer(r)
	m.To = readPeer(r)
	m.Req = r.Uvarint()
	m.Key = ID(r.U64())
	m.Node = readPeer(r)
	m.Pred = readPeer(r)
	n := r.Count(9)
	if n > maxSuccs {
		r.Fail("successor count")
	}
	for i := 0; r.Err() == nil && i < n; i++ {
		m.Succs = append(m.Succs, readPeer(r))
	}
	if err := r.End(); err != nil {
		return Msg{}, err
	}
	return m, nil
}
