package chord

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	b = binary.AppendUvarint(b, uint64(len(p.Addr)))
	return append(b, p.Addr...)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(s string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMalformed, s)
	}
}

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail("short")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) peer() Peer {
	p := Peer{ID: ID(r.u64())}
	n := r.uvarint()
	if r.err == nil && (n > maxAddr || n > uint64(len(r.b))) {
		r.fail("address too long")
	}
	if r.err != nil {
		return Peer{}
	}
	p.Addr = string(r.b[:n])
	r.b = r.b[n:]
	return p
}

// Decode parses a message encoded by AppendBinary; it never panics.
func Decode(b []byte) (Msg, error) {
	r := reader{b: b}
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
	r.b = b[3:]
	m.From = r.peer()
	m.To = r.peer()
	m.Req = r.uvarint()
	m.Key = ID(r.u64())
	m.Node = r.peer()
	m.Pred = r.peer()
	n := r.uvarint()
	if r.err == nil && (n > maxSuccs || n > uint64(len(r.b)/9)) {
		r.fail("successor count")
	}
	for i := uint64(0); r.err == nil && i < n; i++ {
		m.Succs = append(m.Succs, r.peer())
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return Msg{}, r.err
	}
	return m, nil
}
