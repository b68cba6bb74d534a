package cdndns

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// startTest serves the zone cdn.example. on loopback with the test view:
// names @, www and img.static (so static is an empty non-terminal), two
// name servers with glue and one outside the zone.
func startTest(t *testing.T, mod func(*Config, *View)) (*Server, func(func(*View))) {
	t.Helper()
	cov, _ := NewCoverage([]Rule{{"192.0.2.0/24", "paris"}, {"127.0.0.0/8", "tokyo"}, {"198.51.100.0/24", "lima"}})
	cfg := DefaultConfig()
	cfg.Addr, cfg.Zone, cfg.Serial = "127.0.0.1:0", "cdn.example", 2026010101
	cfg.Names = []string{"@", "www", "img.static"}
	cfg.NS = []string{"ns1=192.0.2.53", "ns1=2001:db8::53", "ns2.cdn.example.=198.51.100.53", "ns.other.example."}
	var mu sync.Mutex
	view := testView()
	if mod != nil {
		mod(&cfg, &view)
	}
	s, err := Start(cfg, cov, func() View {
		mu.Lock()
		defer mu.Unlock()
		v := view
		v.PoPs = append([]Candidate(nil), view.PoPs...)
		return v
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, func(f func(*View)) { mu.Lock(); f(&view); mu.Unlock() }
}

// ask sends m over UDP (tcp false) or TCP.
func ask(t *testing.T, s *Server, m *dns.Msg, tcp bool) *dns.Msg {
	t.Helper()
	c, addr := &dns.Client{}, s.UDPAddr
	if tcp {
		c.Net, addr = "tcp", s.TCPAddr
	}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%v: %v", m.Question, err)
	}
	return r
}

func ecsOpt(subnet string) *dns.OPT {
	p := netip.MustParsePrefix(subnet)
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(1232)
	fam := uint16(1)
	if p.Addr().Is6() {
		fam = 2
	}
	o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())})
	return o
}

// summary renders an answer as "RCODE aa|- answer;answer | authority | additional".
func summary(r *dns.Msg) string {
	sec := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			f := strings.Fields(rr.String())
			out = append(out, f[0]+" "+f[1]+" "+f[3]+" "+strings.Join(f[4:], " "))
		}
		return strings.Join(out, ";")
	}
	aa := "-"
	if r.Authoritative {
		aa = "aa"
	}
	if r.Truncated {
		aa += " tc"
	}
	return fmt.Sprintf("%s %s %s | %s | %s", dns.RcodeToString[r.Rcode], aa, sec(r.Answer), sec(r.Ns), sec(r.Extra))
}

const negSOA = "cdn.example. 60 SOA ns1.cdn.example. hostmaster.cdn.example. 2026010101 3600 600 1209600 60"

// TestAuthority: each kind of question an authority must answer as
// resolvers expect, over UDP from 127.0.0.1 (tokyo's prefix), hand-written.
func TestAuthority(t *testing.T) {
	s, _ := startTest(t, nil)
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"www.cdn.example.", dns.TypeA, "NOERROR aa www.cdn.example. 20 A 10.77.0.2 |  | "},
		{"WwW.CDN.example.", dns.TypeA, "NOERROR aa WwW.CDN.example. 20 A 10.77.0.2 |  | "}, // the owner as asked
		{"cdn.example.", dns.TypeA, "NOERROR aa cdn.example. 20 A 10.77.0.2 |  | "},
		// tokyo has no IPv6 gateway: the best PoP with one from tokyo's place.
		{"www.cdn.example.", dns.TypeAAAA, "NOERROR aa www.cdn.example. 20 AAAA fd00::1 |  | "},
		{"cdn.example.", dns.TypeSOA, "NOERROR aa " + strings.Replace(negSOA, " 60 ", " 3600 ", 1) + " |  | "},
		{"cdn.example.", dns.TypeNS, "NOERROR aa cdn.example. 3600 NS ns1.cdn.example.;cdn.example. 3600 NS ns2.cdn.example.;cdn.example. 3600 NS ns.other.example. |  | " +
			"ns1.cdn.example. 3600 A 192.0.2.53;ns1.cdn.example. 3600 AAAA 2001:db8::53;ns2.cdn.example. 3600 A 198.51.100.53"},
		{"ns1.cdn.example.", dns.TypeAAAA, "NOERROR aa ns1.cdn.example. 3600 AAAA 2001:db8::53 |  | "},
		{"ns2.cdn.example.", dns.TypeAAAA, "NOERROR aa  | " + negSOA + " | "}, // NODATA
		{"www.cdn.example.", dns.TypeMX, "NOERROR aa  | " + negSOA + " | "},   // NODATA
		{"www.cdn.example.", dns.TypeSOA, "NOERROR aa  | " + negSOA + " | "},  // NODATA
		{"static.cdn.example.", dns.TypeA, "NOERROR aa  | " + negSOA + " | "}, // an empty non-terminal
		{"img.static.cdn.example.", dns.TypeA, "NOERROR aa img.static.cdn.example. 20 A 10.77.0.2 |  | "},
		{"nope.cdn.example.", dns.TypeA, "NXDOMAIN aa  | " + negSOA + " | "},
		{"x.www.cdn.example.", dns.TypeA, "NXDOMAIN aa  | " + negSOA + " | "},
		{"www.example.org.", dns.TypeA, "REFUSED -  |  | "},
		{"cdn.example.", dns.TypeAXFR, "REFUSED -  |  | "},
	} {
		m := new(dns.Msg)
		m.SetQuestion(tc.name, tc.qtype)
		if got := summary(ask(t, s, m, false)); got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
	// Class CHAOS (version.bind and the like) is refused.
	m := new(dns.Msg)
	m.SetQuestion("version.bind.", dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	if r := ask(t, s, m, false); r.Rcode != dns.RcodeRefused {
		t.Errorf("CH TXT version.bind: %s", dns.RcodeToString[r.Rcode])
	}
}

// TestProtocol: opcodes, EDNS and client subnet handling, truncation and
// the TCP retry, the counters.
func TestProtocol(t *testing.T) {
	s, set := startTest(t, nil)
	www := func() *dns.Msg { m := new(dns.Msg); m.SetQuestion("www.cdn.example.", dns.TypeA); return m }
	// NOTIFY and UPDATE are not implemented, and say so (with the opcode).
	n := www()
	n.SetNotify("cdn.example.")
	if r := ask(t, s, n, false); r.Rcode != dns.RcodeNotImplemented || r.Opcode != dns.OpcodeNotify || len(r.Answer) != 0 {
		t.Errorf("NOTIFY: %s opcode %d", dns.RcodeToString[r.Rcode], r.Opcode)
	}
	u := new(dns.Msg)
	u.SetUpdate("cdn.example.")
	u.Insert([]dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "x.cdn.example.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(1, 2, 3, 4)}})
	if r := ask(t, s, u, false); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("UPDATE: %s", dns.RcodeToString[r.Rcode])
	}
	// Two OPT records: FORMERR. EDNS version 1: BADVERS with an OPT of version 0.
	two := www()
	two.Extra = append(two.Extra, ecsOpt("192.0.2.0/24"), ecsOpt("192.0.2.0/24"))
	if r := ask(t, s, two, false); r.Rcode != dns.RcodeFormatError || len(r.Answer) != 0 {
		t.Errorf("two OPT: %s", summary(r))
	}
	v1 := www()
	v1.SetEdns0(1232, false)
	v1.IsEdns0().SetVersion(1)
	if r := ask(t, s, v1, false); r.Rcode != dns.RcodeBadVers || r.IsEdns0() == nil || r.IsEdns0().Version() != 0 {
		t.Errorf("EDNS version 1: %s", summary(r))
	}
	bad := www()
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(1232) // miekg masks a subnet's address when packing: raw bytes, family 1, /24, 192.0.2.7
	o.Option = append(o.Option, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 1, 24, 0, 192, 0, 2, 7}})
	bad.Extra = append(bad.Extra, o)
	if r := ask(t, s, bad, false); r.Rcode != dns.RcodeFormatError {
		t.Errorf("subnet with host bits: %s", summary(r))
	}
	// The client subnet names the client: paris's prefix gets paris,
	// with the scope of its rule; lima's prefix (lima is down) gets the
	// PoP nearest lima.
	for _, tc := range []struct{ subnet, want string }{{"192.0.2.0/24", "10.77.0.1"}, {"192.0.2.0/25", "10.77.0.1"}, {"198.51.100.0/24", "10.77.0.2"}} {
		m := www()
		m.Extra = append(m.Extra, ecsOpt(tc.subnet))
		r := ask(t, s, m, false)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != tc.want {
			t.Fatalf("ECS %s: %s, want %s", tc.subnet, summary(r), tc.want)
		}
		if e := r.IsEdns0(); e == nil || len(e.Option) != 1 || e.Option[0].(*dns.EDNS0_SUBNET).SourceScope != 24 {
			t.Fatalf("ECS %s not echoed with scope 24: %v", tc.subnet, r.Extra)
		}
	}
	// No PoP with an IPv6 gateway alive: SERVFAIL (passing); none with
	// one at all: NODATA (the name has no AAAA).
	set(func(v *View) { v.PoPs[0].Alive = false })
	m := new(dns.Msg)
	m.SetQuestion("www.cdn.example.", dns.TypeAAAA)
	if r := ask(t, s, m, false); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("AAAA, the v6 PoP down: %s", summary(r))
	}
	set(func(v *View) { v.PoPs[0].V6 = netip.Addr{} })
	if got := summary(ask(t, s, m, false)); got != "NOERROR aa  | "+negSOA+" | " {
		t.Errorf("AAAA, no v6 gateway anywhere: %s", got)
	}
	st := s.Stats()
	if st.Outcomes["notimp"] != 2 || st.Outcomes["formerr"] != 2 || st.Outcomes["badvers"] != 1 || st.Outcomes["coverage"] != 2 ||
		st.Outcomes["fallback"] != 1 || st.Outcomes["servfail"] != 1 || st.Outcomes["nodata"] != 1 || st.ECS != 3 || st.ByPoP["paris"] != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestTruncation: an NS set too big for 512 bytes comes back truncated over
// UDP to a client without EDNS, whole over TCP, and whole over UDP to an
// EDNS client with room for it.
func TestTruncation(t *testing.T) {
	s, _ := startTest(t, func(c *Config, _ *View) {
		c.NS = nil
		for i := range 30 {
			c.NS = append(c.NS, fmt.Sprintf("ns%d=192.0.2.%d", i, i+1))
		}
	})
	m := new(dns.Msg)
	m.SetQuestion("cdn.example.", dns.TypeNS)
	r := ask(t, s, m, false)
	if !r.Truncated || len(r.Answer) >= 30 {
		t.Fatalf("UDP without EDNS: tc=%v, %d bytes, %d NS", r.Truncated, r.Len(), len(r.Answer))
	}
	r = ask(t, s, m, true)
	if r.Truncated || len(r.Answer) != 30 || len(r.Extra) != 30 {
		t.Fatalf("TCP: tc=%v, %d NS, %d glue", r.Truncated, len(r.Answer), len(r.Extra))
	}
	m.SetEdns0(1232, false)
	r = ask(t, s, m, false)
	if r.Truncated || len(r.Answer) != 30 || len(r.Extra) != 31 {
		t.Fatalf("UDP with EDNS 1232: tc=%v, %d NS, %d additional", r.Truncated, len(r.Answer), len(r.Extra))
	}
	if s.Stats().Truncated != 1 {
		t.Errorf("truncated counted %d times, want 1", s.Stats().Truncated)
	}
}

// TestWildcardAndConfig: "*" makes every name the zone does not hold a host
// (but not below a name it holds), and a bad zone is refused at start.
func TestWildcardAndConfig(t *testing.T) {
	s, _ := startTest(t, func(c *Config, _ *View) { c.Names = []string{"*"} })
	for name, want := range map[string]int{"anything.cdn.example.": 1, "a.b.cdn.example.": 1, "x.ns1.cdn.example.": 0, "cdn.example.": 0} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		if r := ask(t, s, m, false); len(r.Answer) != want {
			t.Errorf("wildcard, %s: %s", name, summary(r))
		}
	}
	for _, c := range []struct {
		names, ns []string
		addr, err string
	}{
		{nil, []string{"ns1"}, "127.0.0.1:0", "needs an address"},
		{nil, []string{"ns.other.example.=192.0.2.1"}, "127.0.0.1:0", "outside the zone"},
		{nil, []string{"ns1=not-an-ip"}, "127.0.0.1:0", "ns1.cdn.example."},
		{[]string{"www.example.org."}, nil, "127.0.0.1:0", "not a name inside"},
		{nil, nil, "0.0.0.0:0", "--ns"},
	} {
		cfg := DefaultConfig()
		cfg.Addr, cfg.Zone, cfg.NS = c.addr, "cdn.example.", c.ns
		if c.names != nil {
			cfg.Names = c.names
		}
		if s, err := Start(cfg, nil, testView); err == nil || !strings.Contains(err.Error(), c.err) {
			if s != nil {
				s.Close()
			}
			t.Errorf("names %v ns %v: %v, want an error with %q", c.names, c.ns, err, c.err)
		}
	}
}

// TestTCPConnectionsBounded: the TCP port keeps at most TCP.MaxPerIP
// connections from one address; one more is closed at once, so a client
// holding connections open cannot take the port's descriptors.
func TestTCPConnectionsBounded(t *testing.T) {
	cov, _ := NewCoverage(nil)
	cfg := DefaultConfig()
	cfg.Addr, cfg.Zone = "127.0.0.1:0", "cdn.example"
	cfg.TCP.MaxPerIP = 4
	s, err := Start(cfg, cov, testView)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 4 {
		c, err := net.Dial("tcp", s.TCPAddr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	c, err := net.Dial("tcp", s.TCPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Second)) // well before the 2 s read timeout
	if _, err := c.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Fatalf("a fifth connection from one address was kept (%v)", err)
	}
	// A TCP query on a kept connection is still answered.
	m := new(dns.Msg)
	m.SetQuestion("www.cdn.example.", dns.TypeA)
	held[0].Close()
	held = held[1:]
	time.Sleep(50 * time.Millisecond)
	if r, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, s.TCPAddr); err != nil || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("tcp query with a slot free: %v %v", r, err)
	}
}
