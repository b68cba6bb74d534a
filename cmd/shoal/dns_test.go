package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"shoal/internal/testutil"
)

// unboundPath finds unbound (Debian puts it in /usr/sbin, often not in a
// user's PATH).
func unboundPath() (string, bool) {
	if p, err := exec.LookPath("unbound"); err == nil {
		return p, true
	}
	if _, err := os.Stat("/usr/sbin/unbound"); err == nil {
		return "/usr/sbin/unbound", true
	}
	return "", false
}

// freePort returns a loopback port free for both UDP and TCP now.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		ln.Close()
		if err == nil {
			pc.Close()
			return port
		}
	}
	t.Fatal("no port free for both UDP and TCP")
	return 0
}

// exchange asks server over UDP (or TCP) and retries for up to 30 s while
// it does not answer yet (a PoP's DNS starts after its cluster).
func exchange(t *testing.T, server string, m *dns.Msg, tcp bool) *dns.Msg {
	t.Helper()
	c := &dns.Client{Timeout: 2 * time.Second}
	if tcp {
		c.Net = "tcp"
	}
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		var r *dns.Msg
		if r, _, err = c.Exchange(m, server); err == nil {
			return r
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%v via %s: %v", m.Question, server, err)
	return nil
}

func question(name string, qtype uint16, subnet string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = true
	if subnet != "" {
		ip, n, _ := net.ParseCIDR(subnet)
		bits, _ := n.Mask.Size()
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(1232)
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(bits), Address: ip.To4()})
		m.Extra = append(m.Extra, o)
	}
	return m
}

// rrs renders a section as "TYPE data;TYPE data".
func rrs(sec []dns.RR) string {
	var out []string
	for _, rr := range sec {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(f[3:], " "))
	}
	return strings.Join(out, ";")
}

// TestResolverThroughPopDNS: a real resolver (unbound, from Debian) with
// the zone cdn.example. delegated to `shoal pop --dns` (a stub zone, ECS
// on) resolves the CDN's names as any client would: PoP a founds the DCDN
// with IPv4 and IPv6 gateways, PoP b joins with IPv4 only; the coverage
// file puts 127.0.0.0/8 (this test's own address, which unbound sends as
// its client subnet) at b and 10.9.0.0/16 at a. The local preference is
// raised and the capacity floor lowered to 0 so that the answers do not
// follow the PoPs' CPU load (MBPP's balancing and the capacity check,
// tested in internal/cdn/cdndns) on a busy test machine, where a node's
// idle CPU can read 0. It needs no root; without unbound it skips.
func TestResolverThroughPopDNS(t *testing.T) {
	ub, ok := unboundPath()
	if !ok {
		t.Skip("unbound is not installed (apt-get install unbound): the resolver check needs it")
	}
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	os.WriteFile(seed, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	cov := filepath.Join(dir, "coverage.csv")
	os.WriteFile(cov, []byte("127.0.0.0/8,b\n10.9.0.0/16,a\n"), 0o600)
	dnsPort, peerA := freePort(t), freeAddr(t)
	authority := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	// 30 name servers: the NS answer is too big for a 512-byte UDP answer.
	ns := []string{"ns1=127.0.0.1"}
	for i := 2; i <= 30; i++ {
		ns = append(ns, fmt.Sprintf("ns%d=192.0.2.%d", i, 100+i))
	}
	conf := func(name string) string { // the file is checked whole, before the flags
		p := filepath.Join(dir, name+".toml")
		os.WriteFile(p, []byte(fmt.Sprintf("name = %q\nseed_file = %q\n[mbpp]\nlocal_bonus = 2.0\n[dns]\nmin_server = 0.0\n", name, seed)), 0o600)
		return p
	}
	common := []string{"--seed-file", seed, "--listen", "127.0.0.1:0", "--admin", "off", "--nodes", "1", "--data", filepath.Join(dir, "data")}
	var errA, errB testutil.SyncBuf
	startMain(t, &errA, append([]string{"pop", "--config", conf("a"), "--name", "a", "--peer", peerA, "--dns", authority, "--zone", "cdn.example.",
		"--coverage", cov, "--gateway-ip", "192.0.2.1,2001:db8::1", "--ns", strings.Join(ns, ","), "--dns-names", "@,www,img.static"}, common...)...)
	exchange(t, authority, question("cdn.example.", dns.TypeSOA, ""), false)
	startMain(t, &errB, append([]string{"pop", "--config", conf("b"), "--name", "b", "--peer", "127.0.0.1:0", "--join", peerA, "--gateway-ip", "192.0.2.2"}, common...)...)
	// Wait until b (and its gateway) is in a's view: asked for this
	// test's subnet, a answers b's gateway.
	deadline := time.Now().Add(30 * time.Second)
	for rrs(exchange(t, authority, question("www.cdn.example.", dns.TypeA, "127.0.0.0/24"), false).Answer) != "A 192.0.2.2" {
		if time.Now().After(deadline) {
			t.Fatalf("b never answered for its prefix\na: %s\nb: %s", errA.String(), errB.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	resolver := startUnbound(t, ub, dir, dnsPort)

	for _, c := range []struct {
		name, subnet string
		qtype        uint16
		rcode        int
		answer, auth string
	}{
		{"www.cdn.example.", "", dns.TypeA, dns.RcodeSuccess, "A 192.0.2.2", ""},            // by unbound's ECS for 127.0.0.1: b
		{"www.cdn.example.", "10.9.1.0/24", dns.TypeA, dns.RcodeSuccess, "A 192.0.2.1", ""}, // the client's own subnet, forwarded: a
		{"www.cdn.example.", "", dns.TypeAAAA, dns.RcodeSuccess, "AAAA 2001:db8::1", ""},    // b has no IPv6 gateway: a, nearest with one
		{"img.static.cdn.example.", "", dns.TypeA, dns.RcodeSuccess, "A 192.0.2.2", ""},     // a deeper name
		{"cdn.example.", "", dns.TypeSOA, dns.RcodeSuccess, "SOA ns1.cdn.example. hostmaster.cdn.example. 1 3600 600 1209600 60", ""},
		{"www.cdn.example.", "", dns.TypeMX, dns.RcodeSuccess, "", "SOA ns1.cdn.example. hostmaster.cdn.example. 1 3600 600 1209600 60"},   // NODATA
		{"static.cdn.example.", "", dns.TypeA, dns.RcodeSuccess, "", "SOA ns1.cdn.example. hostmaster.cdn.example. 1 3600 600 1209600 60"}, // empty non-terminal
		{"nope.cdn.example.", "", dns.TypeA, dns.RcodeNameError, "", "SOA ns1.cdn.example. hostmaster.cdn.example. 1 3600 600 1209600 60"},
	} {
		r := exchange(t, resolver, question(c.name, c.qtype, c.subnet), false)
		if r.Rcode != c.rcode || rrs(r.Answer) != c.answer || rrs(r.Ns) != c.auth {
			t.Errorf("via unbound, %s %s (subnet %q): %s, answer %q, authority %q; want %s, %q, %q", c.name, dns.TypeToString[c.qtype], c.subnet,
				dns.RcodeToString[r.Rcode], rrs(r.Answer), rrs(r.Ns), dns.RcodeToString[c.rcode], c.answer, c.auth)
		}
	}
	// unbound asks with a 512-byte buffer (edns-buffer-size below): the
	// 30 NS records come back truncated over UDP, and unbound has them
	// all only because it asked again over TCP.
	if r := exchange(t, resolver, question("cdn.example.", dns.TypeNS, ""), true); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 30 {
		t.Errorf("via unbound, NS: %s with %d records, want 30", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if r := exchange(t, authority, question("cdn.example.", dns.TypeNS, ""), false); !r.Truncated {
		t.Errorf("direct NS over UDP without EDNS: not truncated (%d records)", len(r.Answer))
	}
	// What a resolver never sends, straight to the authority.
	notify := question("cdn.example.", dns.TypeSOA, "")
	notify.SetNotify("cdn.example.")
	two := question("www.cdn.example.", dns.TypeA, "10.9.1.0/24")
	two.Extra = append(two.Extra, two.Extra[0])
	for _, c := range []struct {
		what  string
		m     *dns.Msg
		rcode int
	}{
		{"NOTIFY", notify, dns.RcodeNotImplemented},
		{"two OPT records", two, dns.RcodeFormatError},
		{"a name outside the zone", question("www.example.org.", dns.TypeA, ""), dns.RcodeRefused},
	} {
		if r := exchange(t, authority, c.m, false); r.Rcode != c.rcode {
			t.Errorf("%s: %s, want %s", c.what, dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
		}
	}
}

// startUnbound runs unbound in the foreground on a free loopback port with
// cdn.example. as a stub zone at the authority's port, sending ECS to it,
// and returns its address once it answers.
func startUnbound(t *testing.T, path, dir string, authPort int) string {
	t.Helper()
	port := freePort(t)
	conf := filepath.Join(dir, "unbound.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(`server:
  interface: 127.0.0.1
  port: %d
  do-daemonize: no
  chroot: ""
  username: ""
  directory: %q
  pidfile: ""
  use-syslog: no
  logfile: ""
  do-ip6: no
  do-not-query-localhost: no
  access-control: 127.0.0.0/8 allow
  module-config: "subnetcache iterator"
  send-client-subnet: 127.0.0.1
  max-client-subnet-ipv4: 24
  edns-buffer-size: 512
  qname-minimisation: no
stub-zone:
  name: "cdn.example."
  stub-addr: 127.0.0.1@%d
remote-control:
  control-enable: no
`, port, dir, authPort)), 0o600)
	var out testutil.SyncBuf
	cmd := exec.Command(path, "-d", "-c", conf)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	for i := 0; ; i++ {
		if _, _, err := c.Exchange(question("cdn.example.", dns.TypeSOA, ""), addr); err == nil {
			return addr
		}
		if i == 40 {
			t.Fatalf("unbound did not answer: %s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
