//go:build linux

package handoff

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// tickle makes the clients of flows whose node vanished learn it now. A
// client waiting for an answer sends nothing, so neither the front's
// resets (Steer.PassFlows) nor its own retransmissions end the connection
// until its timeout. tickle sends each one a bare ACK from the VIP with a
// sequence number outside its window (0); the client answers with an ACK
// carrying its exact sequence numbers (RFC 9293 §3.10.7.4), which the
// steering passes to the front's stack, which has no socket for it and
// answers with a reset whose sequence number is the client's next
// expected one, so the client takes it (RFC 5961 §3.2). This is what a
// router does to end a connection whose state it lost (Linux conntrack's
// and LVS's "tickle ACK"). It needs a raw socket (CAP_NET_RAW); without
// one the clients wait for their timeouts as before.
func tickle(fs []Flow) error {
	if len(fs) == 0 {
		return nil
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return fmt.Errorf("handoff: tickle: raw socket: %w", err)
	}
	defer unix.Close(fd)
	// The kernel writes the IP header; the source must be the VIP, which
	// the front holds.
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: fs[0].VIP.Addr().As4()}); err != nil {
		return fmt.Errorf("handoff: tickle: bind %v: %w", fs[0].VIP.Addr(), err)
	}
	var seg [20]byte
	for _, f := range fs {
		tickleSegment(seg[:], f)
		to := &unix.SockaddrInet4{Addr: f.Client.Addr().As4()}
		if err := unix.Sendto(fd, seg[:], unix.MSG_DONTWAIT, to); err != nil {
			return fmt.Errorf("handoff: tickle %v: %w", f.Client, err)
		}
	}
	return nil
}

// tickleSegment writes into b (20 bytes) a TCP header from f's VIP to its
// client: ACK, sequence and acknowledgement numbers 0, and its checksum.
func tickleSegment(b []byte, f Flow) {
	clear(b)
	binary.BigEndian.PutUint16(b[0:], f.VIP.Port())
	binary.BigEndian.PutUint16(b[2:], f.Client.Port())
	b[12], b[13] = 5<<4, 0x10 // header length 20, ACK
	binary.BigEndian.PutUint16(b[14:], 1024)
	binary.BigEndian.PutUint16(b[16:], tcpChecksum(f.VIP.Addr(), f.Client.Addr(), b))
}

// tcpChecksum is the TCP checksum of seg (checksum field zero) between
// IPv4 addresses src and dst (RFC 9293 §3.1).
func tcpChecksum(src, dst netip.Addr, seg []byte) uint16 {
	s, d := src.As4(), dst.As4()
	sum := uint32(binary.BigEndian.Uint16(s[0:])) + uint32(binary.BigEndian.Uint16(s[2:])) +
		uint32(binary.BigEndian.Uint16(d[0:])) + uint32(binary.BigEndian.Uint16(d[2:])) +
		unix.IPPROTO_TCP + uint32(len(seg))
	for i := 0; i+1 < len(seg); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(seg[i:]))
	}
	if len(seg)%2 == 1 {
		sum += uint32(seg[len(seg)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
