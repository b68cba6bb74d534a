package cdndns

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// answerer holds what one answer is built from: the zone, the coverage
// table and the view (read once, when a PoP must be picked).
type answerer struct {
	z         *zone
	cov       *Coverage
	view      func() View
	minServer float64
	maxUDP    uint16
	got       *View
}

func (a *answerer) v() View {
	if a.got == nil {
		v := a.view()
		a.got = &v
	}
	return *a.got
}

// outcome is what one answer counts for in Stats.
type outcome struct {
	key string // a Reason's name for a PoP answer, else the answer's kind
	pop string // the PoP answered, if any
	ecs bool   // the query carried a client subnet
}

// respond builds the answer to req from a resolver at resolver. It is a
// pure function of the zone, the view and its arguments; the transport's
// size limit (truncation) is the caller's.
func (a *answerer) respond(req *dns.Msg, resolver netip.Addr) (*dns.Msg, outcome) {
	m := new(dns.Msg)
	m.SetReply(req)
	fail := func(rcode int, key string) (*dns.Msg, outcome) {
		m.Rcode, m.Authoritative = rcode, false
		return m, outcome{key: key}
	}
	if req.Opcode != dns.OpcodeQuery {
		// NOTIFY, UPDATE, IQUERY, STATUS: this zone has no secondaries to
		// be told of changes and takes no updates (RFC 1996 §3.9 answers
		// NOTIMP where NOTIFY is not implemented).
		m.Opcode = req.Opcode
		return fail(dns.RcodeNotImplemented, "notimp")
	}
	opt, ecs, bad := a.edns(req)
	if bad != "" || len(req.Question) != 1 {
		return fail(dns.RcodeFormatError, "formerr")
	}
	if opt != nil {
		m.Extra = append(m.Extra, opt)
		if req.IsEdns0().Version() != 0 {
			return fail(dns.RcodeBadVers, "badvers") // RFC 6891 §6.1.3
		}
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if q.Qclass != dns.ClassINET || !inZone(name, a.z.apex) || q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		return fail(dns.RcodeRefused, "refused")
	}
	m.Authoritative = true
	client := resolver
	if ecs != nil && ecs.SourceNetmask > 0 {
		client, _ = netip.AddrFromSlice(ecs.Address)
		client = client.Unmap()
	}
	out := outcome{ecs: ecs != nil}
	n := a.z.find(name)
	if n == nil {
		m.Rcode, m.Ns, out.key = dns.RcodeNameError, []dns.RR{a.z.negative()}, "nxdomain"
		a.echo(opt, ecs, client, false)
		return m, out
	}
	pick := func(v6 bool) (Candidate, Reason) { return Choose(a.cov, a.v(), client, v6, a.minServer) }
	rrs, why, pop, servfail := a.z.records(n, name, q.Qtype, pick, a.hasFamily)
	a.echo(opt, ecs, client, why != nil)
	switch {
	case servfail:
		m.Rcode, m.Authoritative, out.key = dns.RcodeServerFailure, false, "servfail"
		return m, out
	case len(rrs) == 0:
		m.Ns, out.key = []dns.RR{a.z.negative()}, "nodata"
		return m, out
	}
	for _, rr := range rrs {
		rr.Header().Name = q.Name // the owner as asked, case included
	}
	m.Answer = rrs
	m.Extra = append(a.z.glue(rrs), m.Extra...)
	out.key = "answer"
	if why != nil {
		out.key, out.pop = why.String(), pop
	}
	return m, out
}

// edns checks the request's EDNS (RFC 6891 §6.1.1: at most one OPT record;
// RFC 7871 §7.1.2: one client subnet option whose address has no bits past
// its source prefix) and returns the OPT record for the answer and the
// client subnet; bad names what is wrong.
func (a *answerer) edns(req *dns.Msg) (*dns.OPT, *dns.EDNS0_SUBNET, string) {
	var in *dns.OPT
	for _, rr := range req.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if in != nil {
				return nil, nil, "two OPT records"
			}
			in = o
		}
	}
	if in == nil {
		return nil, nil, ""
	}
	var ecs *dns.EDNS0_SUBNET
	for _, o := range in.Option {
		e, ok := o.(*dns.EDNS0_SUBNET)
		if !ok {
			continue
		}
		if ecs != nil {
			return nil, nil, "two client subnet options"
		}
		if e.Family == 0 && e.SourceNetmask == 0 {
			ecs = e // dig's way of saying "no client information"
			continue
		}
		addr, ok := netip.AddrFromSlice(e.Address)
		if e.Family == 1 {
			addr = addr.Unmap()
		}
		if !ok || e.Family == 1 && !addr.Is4() || e.Family == 2 && !addr.Is6() || e.Family != 1 && e.Family != 2 {
			return nil, nil, "client subnet of no known family"
		}
		if p, err := addr.Prefix(int(e.SourceNetmask)); err != nil || p.Addr() != addr {
			return nil, nil, "client subnet address has bits past its prefix"
		}
		ecs = e
	}
	out := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	out.SetUDPSize(a.maxUDP)
	return out, ecs, ""
}

// echo adds the client subnet to the answer's OPT (RFC 7871 §7.2.1): family,
// source prefix and address as asked, and the scope the answer holds for —
// 0 when it does not depend on the client (tailored false), else the
// coverage rule's prefix when no longer rule lies inside it, else the
// source prefix.
func (a *answerer) echo(opt *dns.OPT, ecs *dns.EDNS0_SUBNET, client netip.Addr, tailored bool) {
	if opt == nil || ecs == nil {
		return
	}
	e := *ecs
	e.SourceScope = 0
	if tailored && ecs.SourceNetmask > 0 {
		e.SourceScope = ecs.SourceNetmask
		if bits, ok := a.cov.Scope(client); ok {
			e.SourceScope = uint8(bits)
		}
	}
	opt.Option = append(opt.Option, &e)
}

// hasFamily reports whether any PoP in the view has a gateway address of
// the family, live or not.
func (a *answerer) hasFamily(v6 bool) bool {
	for _, c := range a.v().PoPs {
		if v6 && c.V6.IsValid() || !v6 && c.V4.IsValid() {
			return true
		}
	}
	return false
}
