package front

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// The PROXY protocol (HAProxy's proxy-protocol.txt, versions 1 and 2): a
// layer-4 balancer in front of the front (an AWS NLB, IPVS, shoal's own l4
// front, HAProxy in TCP mode) writes the client's address in a header
// before the connection's first byte. The front reads it only from
// Config.ProxyFrom, where it is then required, and there it is required;
// from anywhere else a connection that sends one is closed (a client must
// not choose its own address). The carried address stands for the peer's
// in the per-address limit, X-Forwarded-For, the access log and
// everything that reads them.
//
// The header is read off the socket before TLS, on the connection's own
// goroutine (a balancer that stalls holds only its own connection, for at
// most HeaderTimeout): the front peeks at the bytes (MSG_PEEK) until a
// whole header is there, then takes exactly its length, so what follows
// — a TLS ClientHello or a request — stays in the socket for whoever
// reads next. github.com/pires/go-proxyproto parses from a bufio.Reader
// that keeps whatever it read past the header, which a TLS handshake on
// the raw connection cannot have back; hence this parser.

// maxProxyHeader bounds a header: a v1 line is at most 107 bytes; v2's
// addresses take 36 and its TLVs (AWS's VPC endpoint id, GCP's PSC id) a
// few dozen more.
const maxProxyHeader = 1024

var (
	proxyV1Sig = []byte("PROXY ")
	proxyV2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

	errProxyMore    = errors.New("proxy protocol: incomplete header")
	errProxyInvalid = errors.New("proxy protocol: malformed header")
)

// parseProxy parses the PROXY header at the start of b. It returns the
// header's length and the client address it carries — invalid for a v2
// LOCAL command, a v1 UNKNOWN or a non-IP family, where the connection's
// own peer stands (a balancer's health check) — or errProxyMore when b is
// a prefix of a header, or errProxyInvalid.
func parseProxy(b []byte) (n int, src netip.AddrPort, err error) {
	switch {
	case hasPrefixOf(b, proxyV2Sig):
		if len(b) < 16 {
			return 0, src, errProxyMore
		}
		return parseProxyV2(b)
	case hasPrefixOf(b, proxyV1Sig):
		if len(b) < len(proxyV1Sig) {
			return 0, src, errProxyMore
		}
		return parseProxyV1(b)
	}
	return 0, src, errProxyInvalid
}

// hasPrefixOf reports whether b and sig agree over the shorter of them.
func hasPrefixOf(b, sig []byte) bool {
	k := min(len(b), len(sig))
	return k > 0 && bytes.Equal(b[:k], sig[:k])
}

// parseProxyV1 parses "PROXY TCP4|TCP6 src dst sport dport\r\n" or
// "PROXY UNKNOWN …\r\n".
func parseProxyV1(b []byte) (int, netip.AddrPort, error) {
	var src netip.AddrPort
	end := bytes.Index(b[:min(len(b), 107)], []byte("\r\n"))
	if end < 0 {
		if len(b) < 107 && bytes.IndexByte(b, '\n') < 0 {
			return 0, src, errProxyMore
		}
		return 0, src, errProxyInvalid
	}
	f := bytes.Split(b[len(proxyV1Sig):end], []byte(" "))
	if len(f) >= 1 && string(f[0]) == "UNKNOWN" {
		return end + 2, src, nil
	}
	if len(f) != 5 || string(f[0]) != "TCP4" && string(f[0]) != "TCP6" {
		return 0, src, errProxyInvalid
	}
	ip, err1 := netip.ParseAddr(string(f[1]))
	dst, err2 := netip.ParseAddr(string(f[2]))
	port, ok1 := proxyPort(f[3])
	_, ok2 := proxyPort(f[4])
	if err1 != nil || err2 != nil || !ok1 || !ok2 || ip.Is4() != (string(f[0]) == "TCP4") || dst.Is4() != ip.Is4() || ip.Zone() != "" {
		return 0, src, errProxyInvalid
	}
	return end + 2, netip.AddrPortFrom(ip, port), nil
}

// proxyPort parses a v1 port: 1 to 5 digits, no sign or leading zero.
func proxyPort(b []byte) (uint16, bool) {
	if len(b) == 0 || len(b) > 5 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b), 10, 16)
	return uint16(v), err == nil
}

// parseProxyV2 parses the binary header: signature, version and command,
// family and transport, length, addresses, TLVs (skipped).
func parseProxyV2(b []byte) (int, netip.AddrPort, error) {
	var src netip.AddrPort
	verCmd, fam := b[12], b[13]
	n := 16 + int(binary.BigEndian.Uint16(b[14:16]))
	if verCmd>>4 != 2 || verCmd&0xf > 1 || n > maxProxyHeader {
		return 0, src, errProxyInvalid
	}
	if len(b) < n {
		return 0, src, errProxyMore
	}
	if verCmd&0xf == 0 { // LOCAL: the balancer's own connection
		return n, src, nil
	}
	a := b[16:n]
	switch fam >> 4 {
	case 1: // AF_INET
		if len(a) < 12 {
			return 0, src, errProxyInvalid
		}
		return n, netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[:4])), binary.BigEndian.Uint16(a[8:10])), nil
	case 2: // AF_INET6
		if len(a) < 36 {
			return 0, src, errProxyInvalid
		}
		return n, netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[:16])).Unmap(), binary.BigEndian.Uint16(a[32:34])), nil
	case 0, 3: // AF_UNSPEC, AF_UNIX: no IP address to use
		return n, src, nil
	}
	return 0, src, errProxyInvalid
}

// ParsePrefixes parses Config.ProxyFrom's list: networks in CIDR
// notation or single addresses ("10.0.0.0/8", "192.0.2.7"); it names the
// entry that is neither.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range list {
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a network (CIDR)", e)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// trusted reports whether a connection from addr must carry a PROXY
// header (Config.ProxyFrom).
func (s *Server) trusted(addr netip.Addr) bool {
	for _, p := range s.cfg.ProxyFrom {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// looksLikeProxy reports whether the first bytes of a connection from an
// untrusted address begin a PROXY header: five bytes tell ("PROXY" or
// "\r\n\r\n\x00", neither an HTTP request nor a TLS record), as many as a
// TLS record header holds.
func looksLikeProxy(b []byte) bool {
	return len(b) >= 5 && (hasPrefixOf(b, proxyV1Sig) || hasPrefixOf(b, proxyV2Sig))
}

// readProxy reads the PROXY header of a connection from a trusted address
// and makes the client address it carries cc's: its per-address slot
// (refused past MaxConnsPerIP, as acceptConn would), X-Forwarded-For and
// the log. It reports false, with the connection to be closed, when the
// header is missing or malformed (ProxyRefused) or the limit refuses it.
func (cc *clientConn) readProxy() bool {
	s := cc.s
	tc, _ := rawConn(cc.c).(*net.TCPConn)
	if tc == nil {
		return true // not TCP (tests over pipes): nothing to read
	}
	tc.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout))
	defer tc.SetReadDeadline(time.Time{})
	src, ok := peekProxy(tc)
	if !ok {
		s.ctr.proxyRefused.Add(1)
		return false
	}
	s.ctr.proxyAccepted.Add(1)
	if !src.IsValid() {
		return true // LOCAL or UNKNOWN: the balancer's own peer stands
	}
	addr := src.Addr().Unmap()
	cc.ip = addr.String()
	if s.cfg.MaxConnsPerIP <= 0 {
		return true
	}
	s.mu.Lock()
	if s.perIP[addr] >= s.cfg.MaxConnsPerIP {
		s.mu.Unlock()
		s.ctr.refusedPerIP.Add(1)
		if !isTLS(cc.c) {
			cc.c.Write(refused503)
		}
		return false
	}
	s.perIP[addr]++
	cc.addr = addr
	s.mu.Unlock()
	return true
}

// peekProxy waits for a whole PROXY header on tc, peeking, then takes
// exactly its bytes off the socket and returns the address it carries.
func peekProxy(tc *net.TCPConn) (netip.AddrPort, bool) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, false
	}
	buf := make([]byte, maxProxyHeader)
	seen := 0
	for {
		got, rerr := 0, error(nil)
		err := rc.Read(func(fd uintptr) bool {
			m, _, e := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK)
			for e == syscall.EINTR {
				m, _, e = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK)
			}
			if e == syscall.EAGAIN || e == nil && m > 0 && m <= seen {
				return false // nothing new yet: wait for more to arrive
			}
			got, rerr = max(m, 0), e
			if e == nil && m == 0 {
				rerr = io.EOF
			}
			return true
		})
		if err != nil || rerr != nil || got == 0 {
			return netip.AddrPort{}, false
		}
		seen = got
		n, src, perr := parseProxy(buf[:got])
		if perr == errProxyMore && got < len(buf) {
			continue
		}
		if perr != nil {
			return netip.AddrPort{}, false
		}
		return src, takeExactly(rc, buf[:n])
	}
}

// takeExactly reads exactly len(p) bytes (already in the socket) into p.
func takeExactly(rc syscall.RawConn, p []byte) bool {
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		for len(p) > 0 {
			m, e := syscall.Read(int(fd), p)
			if e == syscall.EINTR {
				continue
			}
			if e == syscall.EAGAIN {
				return false
			}
			if e != nil || m <= 0 {
				rerr = io.ErrUnexpectedEOF
				return true
			}
			p = p[m:]
		}
		return true
	})
	return err == nil && rerr == nil
}

// rawConn is c's transport: the TCP connection under a TLS one.
func rawConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}
