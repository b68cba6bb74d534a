package cdndns

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// freePort returns a port free on 127.0.0.1 for UDP and TCP (the kernel
// picks it; a race with another process is possible but rare).
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			pc.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// TestUnboundResolvesThroughShoal delegates the CDN's zone from a real
// resolver (unbound, stub zone) to shoal's responder and resolves through
// it: an A answer, an NXDOMAIN and a NODATA the resolver accepts and
// passes on, as it would for any authority.
func TestUnboundResolvesThroughShoal(t *testing.T) {
	bin, err := exec.LookPath("unbound")
	if err != nil {
		t.Skip("unbound is not installed (apt-get install unbound): the resolver test cannot run")
	}
	cfg := DefaultConfig()
	cfg.Addr, cfg.Zone = "127.0.0.1:0", "cdn.example."
	s, err := Start(cfg, nil, func() []Candidate {
		return []Candidate{{Name: "paris", Alive: true, Score: 0.6, Server: 0.9, V4: a("10.77.0.1")}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, shoalPort, _ := net.SplitHostPort(s.UDPAddr)
	dir := t.TempDir()
	port := freePort(t)
	conf := fmt.Sprintf(`server:
  interface: 127.0.0.1
  port: %d
  do-not-query-localhost: no
  do-daemonize: no
  use-syslog: no
  logfile: ""
  chroot: ""
  username: ""
  directory: %q
  pidfile: %q
  module-config: "iterator"
  qname-minimisation: no
  verbosity: 1
stub-zone:
  name: "cdn.example."
  stub-addr: 127.0.0.1@%s
`, port, dir, filepath.Join(dir, "unbound.pid"), shoalPort)
	cf := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-d", "-c", cf)
	logf, _ := os.Create(filepath.Join(dir, "unbound.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	res := fmt.Sprintf("127.0.0.1:%d", port)
	var r *dns.Msg
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m := new(dns.Msg)
		m.SetQuestion("www.cdn.example.", dns.TypeA)
		m.RecursionDesired = true
		if r, _, err = new(dns.Client).Exchange(m, res); err == nil {
			break
		}
		if time.Now().After(end) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("unbound does not answer: %v\n%s", err, b)
		}
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.77.0.1" {
		t.Fatalf("A through unbound: %v", r)
	}
	for _, c := range []struct {
		name  string
		qt    uint16
		rcode int
	}{{"nope.cdn.example.", dns.TypeA, dns.RcodeNameError}, {"www.cdn.example.", dns.TypeAAAA, dns.RcodeSuccess}} {
		m := new(dns.Msg)
		m.SetQuestion(c.name, c.qt)
		m.RecursionDesired = true
		r, _, err := new(dns.Client).Exchange(m, res)
		if err != nil || r.Rcode != c.rcode || len(r.Answer) != 0 {
			t.Fatalf("%s %s through unbound: %v %v (want %s, no answer)", c.name, dns.TypeToString[c.qt], err, r, dns.RcodeToString[c.rcode])
		}
	}
}
