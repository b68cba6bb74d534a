package pop

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestDNSAnswersCoveragePoPThenALiveOne: two PoPs, A on 127.0.0.1, B with
// its peer listener on 127.0.0.2 and its gateway on 127.0.0.3; A answers
// the CDN zone. A client subnet covered by B gets B's gateway (not its peer
// address: B's entry carries it to A); once B is killed and dropped from
// A's view, the same subnet gets A (a live PoP), and the counters say so.
func TestDNSAnswersCoveragePoPThenALiveOne(t *testing.T) {
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		if l, err := net.Listen("tcp", ip+":0"); err != nil {
			t.Skipf("no %s here: %v", ip, err)
		} else {
			l.Close()
		}
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	seed := writeSeed(t, dir, "seed", "0123456789abcdef0123456789abcdef")
	cov := writeSeed(t, dir, "coverage.csv", "10.1.0.0/16,b\n10.2.0.0/16,a\n")
	ca := testConfig(t, "a", seed, nil, data)
	ca.DNS.Addr, ca.DNS.Zone, ca.Coverage = "127.0.0.1:0", "cdn.example.", cov
	a, err := Start(ca)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cb := testConfig(t, "b", seed, []string{a.PeerAddr}, data)
	cb.Peer, cb.Cluster.Listen = "127.0.0.2:0", "127.0.0.3:0"
	b, err := Start(cb)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(subnet string) string {
		m := new(dns.Msg)
		m.SetQuestion("www.cdn.example.", dns.TypeA)
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP(subnet).To4()})
		m.Extra = append(m.Extra, o)
		r, _, err := new(dns.Client).Exchange(m, a.DNS.UDPAddr)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Answer) != 1 {
			return dns.RcodeToString[r.Rcode]
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	waitFor := func(what, subnet, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := ask(subnet)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s answered %s, want %s", what, subnet, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("b alive", "10.1.2.0", "127.0.0.3")
	waitFor("a's prefix", "10.2.3.0", "127.0.0.1")
	b.Close()
	start := time.Now()
	waitFor("b killed", "10.1.2.0", "127.0.0.1")
	t.Logf("b's prefix answered by a %v after b stopped", time.Since(start).Round(10*time.Millisecond))
	st := a.DNS.Stats()
	// b's prefix after b left is answered by another PoP: counted as a
	// fallback (b still in the view, dead) or balanced (b gone from it),
	// or overloaded when a, the one live PoP, reports itself above capacity
	// (its server score follows the CPU, which a loaded machine takes).
	if st.Outcomes["fallback"]+st.Outcomes["balanced"]+st.Outcomes["overloaded"] == 0 || st.ByPoP["b"] == 0 || st.ECS == 0 {
		t.Fatalf("stats %+v", st)
	}
}
