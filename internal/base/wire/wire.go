// Package wire writes and reads the compact binary messages of shoal's ring
// protocols (internal/cdn/chord, internal/cdn/mbpp): IDs as 8 big-endian bytes,
// counts and lengths as uvarints, strings length-prefixed.
//
// Both protocols decode frames that a remote peer sent, so a decoder must
// never panic nor allocate for bytes that are not there; Reader does the
// bounds checks once, for both, and keeps the first error ("sticky"), so a
// decoder reads every field in a row and checks Err once at the end.
package wire

import (
	"encoding/binary"
	"fmt"
)

// AppendString appends s with its uvarint length in front.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendBool appends v as one byte, 1 or 0.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// Reader takes fields off the front of a frame. After the first failure
// every read returns the zero value and Err keeps that first error.
type Reader struct {
	b         []byte
	err       error
	malformed error
}

// NewReader reads b; every error it returns wraps malformed (the protocol's
// ErrMalformed), so callers can test with errors.Is.
func NewReader(b []byte, malformed error) *Reader {
	return &Reader{b: b, malformed: malformed}
}

// Err is the first error met, or nil.
func (r *Reader) Err() error { return r.err }

// Len is the number of bytes not yet read.
func (r *Reader) Len() int { return len(r.b) }

// Fail records what went wrong unless an error is already recorded.
func (r *Reader) Fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", r.malformed, what)
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.Fail("short")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// U64 reads 8 big-endian bytes (an ID).
func (r *Reader) U64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.Fail("short id")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a signed (zig-zag) varint.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// String reads a length-prefixed string of at most limit bytes; a longer
// length, or one past the end of the frame, is an error.
func (r *Reader) String(limit int) string {
	n := r.Uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(limit) || n > uint64(len(r.b)) {
		r.Fail("string too long")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Count reads a list length and checks that at least minSize bytes per
// element remain, so that a forged length cannot make the decoder allocate.
func (r *Reader) Count(minSize int) int {
	n := r.Uvarint()
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)/minSize) {
		r.Fail("count exceeds frame")
		return 0
	}
	return int(n)
}

// End checks that the whole frame was read and returns the first error.
func (r *Reader) End() error {
	if r.err == nil && len(r.b) != 0 {
		r.Fail("trailing bytes")
	}
	return r.err
}
