package cdndns

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var a = netip.MustParseAddr

func cands() []Candidate {
	return []Candidate{
		{Name: "paris", Alive: true, Score: 0.6, Server: 0.9, V4: a("10.77.0.1"), V6: a("fd00::1")},
		{Name: "tokyo", Alive: true, Score: 0.8, Server: 0.9, V4: a("10.77.0.2")},
		{Name: "lima", Alive: false, Score: 0.95, Server: 1, V4: a("10.77.0.3")},
		{Name: "oslo", Alive: true, Score: 0.9, Server: 0.01, V4: a("10.77.0.4")}, // over capacity
	}
}

func TestChoose(t *testing.T) {
	cov, err := NewCoverage([]Rule{{"192.0.2.0/24", "paris"}, {"192.0.2.128/25", "tokyo"},
		{"198.51.100.0/24", "lima"}, {"203.0.113.0/24", "oslo"}, {"2001:db8::/32", "paris"}, {"100.64.0.0/10", "nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		client string
		v6     bool
		want   string
		why    Reason
	}{
		{"192.0.2.10", false, "paris", ByCoverage},
		{"192.0.2.200", false, "tokyo", ByCoverage},       // longest prefix wins
		{"::ffff:192.0.2.10", false, "paris", ByCoverage}, // v4-mapped
		{"198.51.100.7", false, "tokyo", Fallback},        // lima is down; tokyo has the best live score
		{"203.0.113.9", false, "tokyo", Fallback},         // oslo is above capacity
		{"100.64.1.1", false, "tokyo", Fallback},          // a PoP not in the view
		{"8.8.8.8", false, "tokyo", ByScore},              // no rule
		{"2001:db8::5", true, "paris", ByCoverage},
		{"192.0.2.200", true, "paris", Fallback}, // tokyo has no v6 address
	} {
		c, why := Choose(cov, cands(), a(tc.client), tc.v6, 0.05)
		if c.Name != tc.want || why != tc.why {
			t.Errorf("%s v6=%v: %s (%d), want %s (%d)", tc.client, tc.v6, c.Name, why, tc.want, tc.why)
		}
	}
	if _, why := Choose(cov, nil, a("192.0.2.1"), false, 0.05); why != NoPoP {
		t.Errorf("empty view: reason %d, want NoPoP", why)
	}
}

func TestLoadCoverage(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "c.csv")
	os.WriteFile(csv, []byte("# prefix,pop\n10.0.0.0/8, a\n10.1.0.0/16,b # more specific\n\n"), 0o600)
	js := filepath.Join(dir, "c.json")
	os.WriteFile(js, []byte(`[{"prefix":"10.0.0.0/8","pop":"a"},{"prefix":"10.1.0.0/16","pop":"b"}]`), 0o600)
	for _, p := range []string{csv, js} {
		c, err := LoadCoverage(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := c.Lookup(a("10.1.2.3")); got != "b" || c.Len() != 2 {
			t.Errorf("%s: 10.1.2.3 → %q (%d rules)", p, got, c.Len())
		}
		if got, _ := c.Lookup(a("10.2.2.3")); got != "a" {
			t.Errorf("%s: 10.2.2.3 → %q", p, got)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	for _, body := range []string{"10.0.0.0/33,a\n", "10.0.0.0/8\n", "10.0.0.0/8,\n"} {
		os.WriteFile(bad, []byte(body), 0o600)
		if _, err := LoadCoverage(bad); err == nil {
			t.Errorf("%q accepted", body)
		}
	}
}

func query(t *testing.T, srv, name string, qt uint16, subnet string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qt)
	if subnet != "" {
		p := netip.MustParsePrefix(subnet)
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		fam := uint16(1)
		if p.Addr().Is6() {
			fam = 2
		}
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())})
		m.Extra = append(m.Extra, o)
	}
	r, _, err := new(dns.Client).Exchange(m, srv)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestServer(t *testing.T) {
	cov, _ := NewCoverage([]Rule{{"192.0.2.0/24", "paris"}, {"127.0.0.0/8", "tokyo"}})
	var mu sync.Mutex
	view := cands()
	s, err := Start(Config{Addr: "127.0.0.1:0", Zone: "cdn.example", TTL: 20, MinServer: 0.05}, cov, func() []Candidate {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(view)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ans := func(r *dns.Msg) string {
		if len(r.Answer) != 1 {
			return dns.RcodeToString[r.Rcode]
		}
		switch rr := r.Answer[0].(type) {
		case *dns.A:
			return rr.A.String()
		case *dns.AAAA:
			return rr.AAAA.String()
		}
		return "?"
	}
	// ECS names the client: the Paris prefix gets Paris, with the scope echoed.
	r := query(t, s.UDPAddr, "www.cdn.example.", dns.TypeA, "192.0.2.0/24")
	if got := ans(r); got != "10.77.0.1" || !r.Authoritative || r.Answer[0].Header().Ttl != 20 {
		t.Fatalf("ECS 192.0.2.0/24: %s aa=%v", got, r.Authoritative)
	}
	if e := r.IsEdns0(); e == nil || len(e.Option) != 1 || e.Option[0].(*dns.EDNS0_SUBNET).SourceScope != 24 {
		t.Fatalf("ECS not echoed with scope 24: %v", r.Extra)
	}
	// Without ECS the resolver's address (127.0.0.1) counts: Tokyo.
	if got := ans(query(t, s.UDPAddr, "cdn.example.", dns.TypeA, "")); got != "10.77.0.2" {
		t.Fatalf("no ECS: %s, want tokyo's 10.77.0.2", got)
	}
	// Paris goes down in the view: its prefix gets the best live PoP.
	mu.Lock()
	view[0].Alive = false
	mu.Unlock()
	if got := ans(query(t, s.UDPAddr, "www.cdn.example.", dns.TypeA, "192.0.2.0/24")); got != "10.77.0.2" {
		t.Fatalf("paris down: %s, want tokyo", got)
	}
	// No live PoP with an IPv6 address: SERVFAIL. Outside the zone: REFUSED.
	if got := ans(query(t, s.UDPAddr, "www.cdn.example.", dns.TypeAAAA, "")); got != "SERVFAIL" {
		t.Fatalf("AAAA with paris down: %s", got)
	}
	if got := ans(query(t, s.UDPAddr, "www.example.org.", dns.TypeA, "")); got != "REFUSED" {
		t.Fatalf("out of zone: %s", got)
	}
	// TCP answers too.
	c := &dns.Client{Net: "tcp"}
	m := new(dns.Msg)
	m.SetQuestion("x.cdn.example.", dns.TypeA)
	if r, _, err := c.Exchange(m, s.TCPAddr); err != nil || ans(r) != "10.77.0.2" {
		t.Fatalf("tcp: %v %v", err, r)
	}
	st := s.Stats()
	if st.Coverage != 3 || st.Fallback != 1 || st.NoPoP != 1 || st.Refused != 1 || st.ECS != 2 || st.ByPoP["tokyo"] != 3 || st.ByPoP["paris"] != 1 {
		t.Fatalf("stats %+v", st)
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
	s, err := Start(cfg, cov, cands)
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
	m.SetQuestion("x.cdn.example.", dns.TypeA)
	held[0].Close()
	held = held[1:]
	time.Sleep(50 * time.Millisecond)
	if r, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, s.TCPAddr); err != nil || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("tcp query with a slot free: %v %v", r, err)
	}
}
