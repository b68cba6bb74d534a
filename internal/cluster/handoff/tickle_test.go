//go:build linux

package handoff

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// TestTickleSegment: the tickle is a bare ACK from the VIP's port to the
// client's with sequence numbers 0, and its checksum verifies: summing the
// pseudo-header and the segment with the checksum in gives all ones.
func TestTickleSegment(t *testing.T) {
	f := Flow{Client: netip.MustParseAddrPort("10.201.0.2:40000"), VIP: netip.MustParseAddrPort("10.201.0.100:80")}
	var b [20]byte
	tickleSegment(b[:], f)
	if sp, dp := binary.BigEndian.Uint16(b[0:]), binary.BigEndian.Uint16(b[2:]); sp != 80 || dp != 40000 {
		t.Errorf("ports %d → %d, want 80 → 40000", sp, dp)
	}
	if seq, ack := binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:]); seq != 0 || ack != 0 || b[12] != 0x50 || b[13] != 0x10 {
		t.Errorf("seq %d ack %d offset %#x flags %#x, want 0 0 0x50 0x10", seq, ack, b[12], b[13])
	}
	// With the checksum in place the ones' complement sum is 0xffff, so
	// computing it again over the filled segment gives 0.
	if c := tcpChecksum(f.VIP.Addr(), f.Client.Addr(), b[:]); c != 0 {
		t.Errorf("checksum does not verify: %#04x", c)
	}
	// RFC 1071's worked example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2 (no
	// pseudo-header here: addresses 0.0.0.0 and a length and protocol
	// subtracted back out).
	seg := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	zero := netip.AddrFrom4([4]byte{})
	got := ^tcpChecksum(zero, zero, seg) // the folded sum, pseudo-header's protocol and length included
	want := uint32(0xddf2) + 6 + 8
	for want>>16 != 0 {
		want = want&0xffff + want>>16
	}
	if uint32(got) != want {
		t.Errorf("RFC 1071 example: sum %#04x, want %#04x", got, want)
	}
}
