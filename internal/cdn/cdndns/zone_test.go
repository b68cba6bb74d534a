package cdndns

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// exchange sends m over net ("udp" or "tcp") to srv.
func exchange(t *testing.T, netw, srv string, m *dns.Msg) *dns.Msg {
	t.Helper()
	r, _, err := (&dns.Client{Net: netw}).Exchange(m, srv)
	if err != nil && r == nil {
		t.Fatalf("%s %v: %v", netw, m.Question, err)
	}
	return r
}

func ask(name string, qt uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qt)
	return m
}

// TestAuthority: the zone answers as an authority (RFC 1034, 2308, 6891):
// hand-checked rcode and sections for each case the issue lists.
func TestAuthority(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Zone, cfg.Serial = "127.0.0.1:0", "cdn.example.", 2026120101
	cfg.NS = []string{"ns1", "ns.other.example."}
	cfg.NSAddrs = []netip.Addr{a("192.0.2.53"), a("2001:db8::53")}
	v4only := func() []Candidate {
		return []Candidate{{Name: "paris", Alive: true, Score: 0.6, Server: 0.9, V4: a("10.77.0.1")}}
	}
	s, err := Start(cfg, nil, v4only)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	type want struct {
		rcode          int
		answer, auth   string // the first record's type, "" none
		nAnswer, extra int
	}
	first := func(rrs []dns.RR) string {
		if len(rrs) == 0 {
			return ""
		}
		return dns.TypeToString[rrs[0].Header().Rrtype]
	}
	for _, tc := range []struct {
		what string
		q    *dns.Msg
		w    want
	}{
		{"SOA at the apex", ask("cdn.example.", dns.TypeSOA), want{dns.RcodeSuccess, "SOA", "", 1, 0}},
		{"NS at the apex, glue for the one inside", ask("cdn.example.", dns.TypeNS), want{dns.RcodeSuccess, "NS", "", 2, 2}},
		{"A of a name", ask("www.cdn.example.", dns.TypeA), want{dns.RcodeSuccess, "A", "", 1, 0}},
		{"AAAA with no PoP on IPv6: NODATA", ask("www.cdn.example.", dns.TypeAAAA), want{dns.RcodeSuccess, "", "SOA", 0, 0}},
		{"TXT of a name: NODATA", ask("www.cdn.example.", dns.TypeTXT), want{dns.RcodeSuccess, "", "SOA", 0, 0}},
		{"unknown name: NXDOMAIN", ask("nope.cdn.example.", dns.TypeA), want{dns.RcodeNameError, "", "SOA", 0, 0}},
		{"the name server's address", ask("ns1.cdn.example.", dns.TypeAAAA), want{dns.RcodeSuccess, "AAAA", "", 1, 0}},
		{"outside the zone: REFUSED", ask("www.example.org.", dns.TypeA), want{dns.RcodeRefused, "", "", 0, 0}},
	} {
		r := exchange(t, "udp", s.UDPAddr, tc.q)
		got := want{r.Rcode, first(r.Answer), first(r.Ns), len(r.Answer), len(r.Extra)}
		if got != tc.w || (r.Rcode != dns.RcodeRefused) != r.Authoritative {
			t.Errorf("%s: got %+v aa=%v, want %+v\n%v", tc.what, got, r.Authoritative, tc.w, r)
		}
	}
	soa := exchange(t, "udp", s.UDPAddr, ask("cdn.example.", dns.TypeSOA)).Answer[0].(*dns.SOA)
	if soa.Serial != 2026120101 || soa.Ns != "ns1.cdn.example." || soa.Mbox != "hostmaster.cdn.example." || soa.Minttl != 60 {
		t.Errorf("SOA %v", soa)
	}
	// NOTIFY is not an authority's business here: NOTIMP, not an answer.
	n := ask("cdn.example.", dns.TypeSOA)
	n.Opcode = dns.OpcodeNotify
	if r := exchange(t, "udp", s.UDPAddr, n); r.Rcode != dns.RcodeNotImplemented || len(r.Answer) != 0 {
		t.Errorf("NOTIFY: %v", r)
	}
	// Two OPT records: FORMERR (RFC 6891 §6.1.1).
	two := ask("www.cdn.example.", dns.TypeA)
	two.SetEdns0(1232, false)
	two.SetEdns0(1232, false)
	if len(two.Extra) != 2 {
		two.Extra = append(two.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}})
	}
	if r := exchange(t, "udp", s.UDPAddr, two); r.Rcode != dns.RcodeFormatError {
		t.Errorf("two OPT: %s", dns.RcodeToString[r.Rcode])
	}
}

// TestTruncation: an answer larger than the client takes over UDP (512
// bytes without EDNS) comes truncated, and whole over TCP.
func TestTruncation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Zone = "127.0.0.1:0", "cdn.example."
	cfg.NS = nil
	for i := range 30 {
		cfg.NS = append(cfg.NS, fmt.Sprintf("a-rather-long-name-server-name-%02d.elsewhere.example.", i))
	}
	s, err := Start(cfg, nil, func() []Candidate { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u := exchange(t, "udp", s.UDPAddr, ask("cdn.example.", dns.TypeNS))
	if !u.Truncated || len(u.Answer) >= 30 {
		t.Fatalf("UDP: truncated %v with %d NS, want truncated", u.Truncated, len(u.Answer))
	}
	c := exchange(t, "tcp", s.TCPAddr, ask("cdn.example.", dns.TypeNS))
	if c.Truncated || len(c.Answer) != 30 || !strings.HasPrefix(c.Answer[0].(*dns.NS).Ns, "a-rather-long") {
		t.Fatalf("TCP: truncated %v with %d NS, want all 30", c.Truncated, len(c.Answer))
	}
}
