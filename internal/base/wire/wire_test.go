package wire

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errBad = errors.New("test: malformed")

func TestRoundTrip(t *testing.T) {
	b := []byte{7}
	b = binary.BigEndian.AppendUint64(b, 0x0102030405060708)
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -5)
	b = AppendString(b, "hello")
	b = AppendBool(b, true)
	b = AppendBool(b, false)
	b = binary.AppendUvarint(b, 2) // a count of two 1-byte elements
	b = append(b, 'x', 'y')

	r := NewReader(b, errBad)
	if v := r.Byte(); v != 7 {
		t.Errorf("Byte = %d, want 7", v)
	}
	if v := r.U64(); v != 0x0102030405060708 {
		t.Errorf("U64 = %#x", v)
	}
	if v := r.Uvarint(); v != 300 {
		t.Errorf("Uvarint = %d, want 300", v)
	}
	if v := r.Varint(); v != -5 {
		t.Errorf("Varint = %d, want -5", v)
	}
	if v := r.String(5); v != "hello" {
		t.Errorf("String = %q, want hello", v)
	}
	if r.Byte() != 1 || r.Byte() != 0 {
		t.Error("AppendBool(true), AppendBool(false) did not read back as 1, 0")
	}
	if n := r.Count(1); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	r.Byte()
	r.Byte()
	if err := r.End(); err != nil {
		t.Fatalf("End = %v", err)
	}
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		read func(r *Reader)
		want string
	}{
		{"empty byte", nil, func(r *Reader) { r.Byte() }, "test: malformed: short"},
		{"short id", []byte{1, 2, 3}, func(r *Reader) { r.U64() }, "test: malformed: short id"},
		{"bad uvarint", []byte{0x80}, func(r *Reader) { r.Uvarint() }, "test: malformed: bad uvarint"},
		{"bad varint", []byte{0x80}, func(r *Reader) { r.Varint() }, "test: malformed: bad varint"},
		{"string over limit", AppendString(nil, "abcd"), func(r *Reader) { r.String(3) }, "test: malformed: string too long"},
		{"string past end", []byte{5, 'a'}, func(r *Reader) { r.String(10) }, "test: malformed: string too long"},
		{"count past end", []byte{3, 0, 0, 0, 0, 0}, func(r *Reader) { r.Count(2) }, "test: malformed: count exceeds frame"},
		{"trailing", []byte{1, 2}, func(r *Reader) { r.Byte() }, "test: malformed: trailing bytes"},
		// The first error sticks: the later short read does not replace it.
		{"sticky", []byte{0x80}, func(r *Reader) { r.Uvarint(); r.U64() }, "test: malformed: bad uvarint"},
	} {
		r := NewReader(tc.b, errBad)
		tc.read(r)
		err := r.End()
		if !errors.Is(err, errBad) || err.Error() != tc.want {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
