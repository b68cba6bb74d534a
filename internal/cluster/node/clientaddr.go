package node

import (
	"net"
	"net/netip"

	"shoal/internal/base/httpwire"
)

// trustedPeer reports whether the connection's peer is one of the fronts
// whose X-Forwarded-For the access log believes (Config.TrustedFronts).
func (s *Server) trustedPeer(nc net.Conn) bool {
	if len(s.cfg.TrustedFronts) == 0 {
		return false
	}
	a, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, p := range s.cfg.TrustedFronts {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forwardedFor returns the address a trusted front appended to
// X-Forwarded-For: the last element of the last such header (RFC 7239
// §5.2's rule for the de-facto header: entries to the left come from the
// client and prove nothing). "" when there is none or it is not an IP.
func forwardedFor(hs []httpwire.Header) []byte {
	var v []byte
	for _, h := range hs {
		if len(h.Name) == 15 && httpwire.EqualFold(h.Name, "x-forwarded-for") {
			v = h.Value
		}
	}
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] == ',' {
			v = v[i+1:]
			break
		}
	}
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	if len(v) == 0 || len(v) > 45 {
		return nil
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '.' || c == ':') {
			return nil // not an address: a forged or broken header
		}
	}
	return v
}
