package cdndns

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// zone is the compiled zone: the names it holds and what each one has.
type zone struct {
	apex  string           // lower-case FQDN
	names map[string]*node // every name that exists, empty non-terminals included
	wild  bool             // "*": names the zone does not hold are hosts too
	soa   *dns.SOA
	ns    []dns.RR // the apex's NS set
	ttl   uint32   // of the PoP answers
}

// node is one name of the zone.
type node struct {
	host  bool         // answered with the client's PoP
	addrs []netip.Addr // a name server's own addresses (glue)
}

// absName turns a configured name into a lower-case FQDN: "@" is the apex,
// a name ending in the zone (with or without the final dot) is taken as
// is, another name ending in "." is outside the zone, and anything else is
// relative to the zone.
func absName(s, apex string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case s == "@" || s == "" || s == apex || s+"." == apex:
		return apex
	case strings.HasSuffix(s+".", "."+apex):
		return dns.Fqdn(s)
	case strings.HasSuffix(s, "."):
		return s
	}
	return s + "." + apex
}

// inZone reports whether the FQDN name is the apex or below it.
func inZone(name, apex string) bool { return name == apex || strings.HasSuffix(name, "."+apex) }

// compile checks cfg's zone data and builds the zone.
func compile(cfg Config) (*zone, error) {
	apex := dns.Fqdn(strings.ToLower(cfg.Zone))
	if _, ok := dns.IsDomainName(apex); !ok || apex == "." {
		return nil, fmt.Errorf("dns: zone %q is not a domain name", cfg.Zone)
	}
	z := &zone{apex: apex, names: map[string]*node{apex: {}}, ttl: cfg.TTL}
	add := func(name string) *node {
		n := z.names[name]
		if n == nil {
			n = &node{}
			z.names[name] = n
		}
		for p := name; p != apex; { // the empty non-terminals above it
			i := strings.IndexByte(p, '.')
			p = p[i+1:]
			if z.names[p] == nil {
				z.names[p] = &node{}
			}
		}
		return n
	}
	for _, h := range cfg.Names {
		if strings.TrimSpace(h) == "*" {
			z.wild = true
			continue
		}
		name := absName(h, apex)
		if _, ok := dns.IsDomainName(name); !ok || !inZone(name, apex) || strings.Contains(name, "*") {
			return nil, fmt.Errorf("dns: name %q is not a name inside %s", h, apex)
		}
		add(name).host = true
	}
	if err := z.addNS(cfg, add); err != nil {
		return nil, err
	}
	mbox := cfg.Hostmaster
	if mbox == "" {
		mbox = "hostmaster." + apex
	} else if u, d, ok := strings.Cut(mbox, "@"); ok {
		mbox = strings.ReplaceAll(u, ".", `\.`) + "." + dns.Fqdn(d)
	}
	z.soa = &dns.SOA{Hdr: dns.RR_Header{Name: apex, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: cfg.ZoneTTL},
		Ns: z.ns[0].(*dns.NS).Ns, Mbox: dns.Fqdn(mbox), Serial: cfg.Serial, Refresh: cfg.Refresh, Retry: cfg.Retry,
		Expire: cfg.Expire, Minttl: cfg.NegTTL}
	return z, nil
}

// addNS parses cfg.NS ("name" or "name=address", a name once per address)
// into the apex's NS set and the glue of the name servers inside the zone.
func (z *zone) addNS(cfg Config, add func(string) *node) error {
	glue := map[string][]netip.Addr{}
	var order []string
	for _, s := range cfg.NS {
		n, a, hasAddr := strings.Cut(s, "=")
		name := absName(n, z.apex)
		if _, ok := dns.IsDomainName(name); !ok || strings.TrimSpace(n) == "" {
			return fmt.Errorf("dns: name server %q is not a domain name", n)
		}
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
		if hasAddr {
			ip, err := netip.ParseAddr(strings.TrimSpace(a))
			if err != nil {
				return fmt.Errorf("dns: name server %s: %w", name, err)
			}
			glue[name] = append(glue[name], ip.Unmap())
		}
	}
	if len(order) == 0 {
		return fmt.Errorf("dns: the zone %s needs at least one name server (--ns ns1=192.0.2.1)", z.apex)
	}
	for _, name := range order {
		in := inZone(name, z.apex)
		switch {
		case in && len(glue[name]) == 0:
			return fmt.Errorf("dns: name server %s is inside the zone, so it needs an address (%s=192.0.2.1)", name, name)
		case !in && len(glue[name]) > 0:
			return fmt.Errorf("dns: name server %s is outside the zone: its addresses belong in its own zone", name)
		case in:
			add(name).addrs = glue[name]
		}
		z.ns = append(z.ns, &dns.NS{Hdr: dns.RR_Header{Name: z.apex, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: cfg.ZoneTTL}, Ns: name})
	}
	return nil
}

// find returns the node for the FQDN name: the node itself, or for a name
// the zone does not hold, the wildcard's (a host) when the name's closest
// encloser is the apex (RFC 4592), else nil (NXDOMAIN).
func (z *zone) find(name string) *node {
	if n := z.names[name]; n != nil {
		return n
	}
	if !z.wild {
		return nil
	}
	for p := name; p != z.apex; {
		i := strings.IndexByte(p, '.')
		p = p[i+1:]
		if p != z.apex && z.names[p] != nil {
			return nil // a closer encloser than the apex: no wildcard there
		}
	}
	return &node{host: true}
}

// picker answers a host's A (v6 false) or AAAA with the client's PoP.
type picker func(v6 bool) (Candidate, Reason)

// records returns the RRs of type qtype (every type for ANY) that the
// node named owner holds, and the routing outcome when a PoP was picked.
// servfail is set when the name should have an address of the family but
// no PoP is live to give one.
func (z *zone) records(n *node, owner string, qtype uint16, pick picker, hasFamily func(v6 bool) bool) (rrs []dns.RR, why *Reason, pop string, servfail bool) {
	want := func(t uint16) bool { return qtype == t || qtype == dns.TypeANY }
	if owner == z.apex && want(dns.TypeSOA) {
		rrs = append(rrs, dns.Copy(z.soa))
	}
	if owner == z.apex && want(dns.TypeNS) {
		for _, rr := range z.ns {
			rrs = append(rrs, dns.Copy(rr))
		}
	}
	for _, a := range n.addrs {
		if a.Is4() && want(dns.TypeA) || a.Is6() && want(dns.TypeAAAA) {
			rrs = append(rrs, addrRR(owner, a, z.soa.Hdr.Ttl))
		}
	}
	if !n.host {
		return rrs, nil, "", false
	}
	for _, v6 := range []bool{false, true} {
		if !want(map[bool]uint16{false: dns.TypeA, true: dns.TypeAAAA}[v6]) {
			continue
		}
		c, r := pick(v6)
		if r == NoPoP {
			// No live PoP of the family: if some PoP has one, this is a
			// passing failure (SERVFAIL, not cached long); if none has,
			// the name truly has no such address (NODATA).
			servfail = servfail || hasFamily(v6) && qtype != dns.TypeANY
			why = &r
			continue
		}
		why, pop = &r, c.Name
		a := c.V4
		if v6 {
			a = c.V6
		}
		rrs = append(rrs, addrRR(owner, a, z.ttl))
	}
	return rrs, why, pop, servfail
}

func addrRR(owner string, a netip.Addr, ttl uint32) dns.RR {
	if a.Is4() {
		return &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IP(a.AsSlice())}
	}
	return &dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: net.IP(a.AsSlice())}
}

// negative is the SOA a negative answer carries in authority: its TTL is
// the lesser of the SOA's and its MINIMUM (RFC 2308 §5).
func (z *zone) negative() dns.RR {
	s := dns.Copy(z.soa).(*dns.SOA)
	s.Hdr.Ttl = min(s.Hdr.Ttl, s.Minttl)
	return s
}

// glue returns the A/AAAA of the in-zone name servers the NS records of
// rrs name, for the additional section.
func (z *zone) glue(rrs []dns.RR) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if ns, ok := rr.(*dns.NS); ok {
			if n := z.names[ns.Ns]; n != nil {
				for _, a := range n.addrs {
					out = append(out, addrRR(ns.Ns, a, z.soa.Hdr.Ttl))
				}
			}
		}
	}
	return out
}
