package cdndns

import (
	"net"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// zone is the CDN's zone as an authority serves it (RFC 1034 §4.3.2): its
// SOA and NS at the apex, glue for the name servers inside it, the names
// that answer with a PoP, and negative answers (NXDOMAIN, NODATA) with the
// SOA in the authority section so resolvers cache them (RFC 2308).
type zone struct {
	cfg   Config
	names map[string]bool // relative names; "*" any
	ns    []string        // absolute name server names
	inNS  map[string]bool // relative names of the name servers inside the zone
}

func newZone(cfg Config) zone {
	z := zone{cfg: cfg, names: map[string]bool{}, inNS: map[string]bool{}}
	for _, n := range cfg.Names {
		z.names[strings.ToLower(strings.TrimSuffix(n, "."+cfg.Zone))] = true
	}
	for _, n := range cfg.NS {
		abs := z.absolute(n)
		z.ns = append(z.ns, abs)
		if rel, ok := z.relative(abs); ok && rel != "@" {
			z.inNS[rel] = true
		}
	}
	return z
}

// absolute is n relative to the zone ("@" the zone) or n itself with a
// final dot.
func (z *zone) absolute(n string) string {
	n = strings.ToLower(n)
	switch {
	case n == "@":
		return z.cfg.Zone
	case strings.HasSuffix(n, "."):
		return n
	}
	return n + "." + z.cfg.Zone
}

// relative is name relative to the zone ("@" for the zone) and whether it
// is inside it.
func (z *zone) relative(name string) (string, bool) {
	name = strings.ToLower(dns.Fqdn(name))
	if name == z.cfg.Zone {
		return "@", true
	}
	rel, ok := strings.CutSuffix(name, "."+z.cfg.Zone)
	return rel, ok
}

func (z *zone) isName(rel string) bool { return z.names[rel] || z.names["*"] }
func (z *zone) isNS(rel string) bool   { return z.inNS[rel] }

// soa is the zone's SOA record; its TTL is the negative TTL, as RFC 2308
// §3 has the authority section's SOA carry it.
func (z *zone) soa() dns.RR {
	c := z.cfg
	mbox := z.absolute(c.Mbox)
	if c.Mbox == "@" {
		mbox = "."
	}
	mname := c.Zone
	if len(z.ns) > 0 {
		mname = z.ns[0]
	}
	return &dns.SOA{Hdr: dns.RR_Header{Name: c.Zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: c.NegTTL},
		Ns: mname, Mbox: mbox, Serial: c.Serial, Refresh: c.Refresh, Retry: c.Retry, Expire: c.Expire, Minttl: c.NegTTL}
}

// nsRecords are the zone's NS records.
func (z *zone) nsRecords() []dns.RR {
	out := make([]dns.RR, 0, len(z.ns))
	for _, n := range z.ns {
		out = append(out, &dns.NS{Hdr: dns.RR_Header{Name: z.cfg.Zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: z.cfg.Expire / 7}, Ns: n})
	}
	return out
}

// glue is the address records of the name servers inside the zone.
func (z *zone) glue() []dns.RR {
	var out []dns.RR
	for _, n := range z.ns {
		if rel, ok := z.relative(n); ok && z.inNS[rel] {
			out = append(out, z.addrs(n, dns.TypeA)...)
			out = append(out, z.addrs(n, dns.TypeAAAA)...)
		}
	}
	return out
}

// answerGlue answers an address question for a name server inside the
// zone; false when it has no address of that type.
func (z *zone) answerGlue(m *dns.Msg, q dns.Question) bool {
	rrs := z.addrs(q.Name, q.Qtype)
	m.Answer = append(m.Answer, rrs...)
	return len(rrs) > 0
}

// addrs are the NSAddrs of type t (A or AAAA) under name.
func (z *zone) addrs(name string, t uint16) []dns.RR {
	var out []dns.RR
	for _, a := range z.cfg.NSAddrs {
		hdr := dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: z.cfg.Expire / 7}
		switch {
		case t == dns.TypeA && a.Is4():
			out = append(out, &dns.A{Hdr: hdr, A: net.IP(a.AsSlice())})
		case t == dns.TypeAAAA && a.Is6() && !a.Is4In6():
			out = append(out, &dns.AAAA{Hdr: hdr, AAAA: net.IP(a.AsSlice())})
		}
	}
	return slices.Clip(out)
}

// nodata is NOERROR with no answer and the SOA as authority: the name
// exists, not the type asked (RFC 2308 §2.2).
func (z *zone) nodata(m *dns.Msg) { m.Ns = append(m.Ns, z.soa()) }
