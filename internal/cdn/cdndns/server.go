package cdndns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"shoal/internal/base/accept"
)

// Config is the responder's settings; DefaultConfig gives the defaults.
type Config struct {
	// Addr is the UDP and TCP listen address (--dns).
	Addr string
	// Zone is the CDN's zone (--zone), e.g. "cdn.example."; names in it
	// are answered, others refused.
	Zone string
	// TTL of the answers: short, so that a client follows the view within
	// seconds when a PoP fails (RFC 7871 §7.3.1 caches per scope anyway).
	TTL uint32
	// MinServer is the server performance below which a PoP is taken as
	// above capacity and not answered.
	MinServer float64
	// TCP bounds the TCP port's connections (accept.Limits: its
	// connection counts; the timeouts are the responder's own, 2 s per
	// message and 5 s idle).
	TCP accept.Limits
}

// DefaultConfig returns the defaults: TTL 20 s, a PoP with under 5 % of
// its capacity left is not answered, at most 256 TCP connections and 64
// from one address (a resolver uses TCP only for answers that do not fit
// UDP, which these never are).
func DefaultConfig() Config {
	return Config{TTL: 20, MinServer: 0.05, TCP: accept.Limits{MaxConns: 256, MaxPerIP: 64}}
}

// Stats counts the answers.
type Stats struct {
	ByPoP                                     map[string]uint64
	Coverage, Score, Fallback, NoPoP, Refused uint64
	ECS                                       uint64
}

// Server answers DNS queries for the zone with the PoP Choose picks.
type Server struct {
	cfg   Config
	cov   *Coverage
	view  func() []Candidate
	udp   *dns.Server
	tcp   *dns.Server
	mu    sync.Mutex
	stats Stats
	// UDPAddr and TCPAddr are the bound addresses.
	UDPAddr, TCPAddr string
}

// Start listens on cfg.Addr (UDP and TCP) and serves until Close. view
// returns the current candidates (the MBPP view with answer addresses).
func Start(cfg Config, cov *Coverage, view func() []Candidate) (*Server, error) {
	if cfg.Zone == "" {
		return nil, fmt.Errorf("dns: a zone is required (--zone)")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultConfig().TTL
	}
	if cfg.TCP == (accept.Limits{}) {
		cfg.TCP = DefaultConfig().TCP
	}
	cfg.Zone = dns.Fqdn(strings.ToLower(cfg.Zone))
	s := &Server{cfg: cfg, cov: cov, view: view, stats: Stats{ByPoP: map[string]uint64{}}}
	pc, ln, err := listenPair(cfg.Addr)
	if err != nil {
		return nil, err
	}
	s.UDPAddr, s.TCPAddr = pc.LocalAddr().String(), ln.Addr().String()
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
	s.tcp = &dns.Server{Listener: accept.Bound(ln, cfg.TCP), Handler: h, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, IdleTimeout: func() time.Duration { return 5 * time.Second }}
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	return s, nil
}

// listenPair binds UDP and TCP on one port. With port 0 the kernel picks
// UDP's port, which another process may already hold for TCP; that is
// retried with a fresh port instead of failing (a CI run hit it).
func listenPair(addr string) (net.PacketConn, net.Listener, error) {
	host, want, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dns %s: %w", addr, err)
	}
	for try := 0; ; try++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns %s: %w", addr, err)
		}
		_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if (want != "0" && want != "") || try == 16 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("dns %s tcp: %w", addr, err)
		}
	}
}

// Close stops both listeners.
func (s *Server) Close() error {
	e1 := s.udp.Shutdown()
	e2 := s.tcp.Shutdown()
	if e1 != nil {
		return e1
	}
	return e2
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.stats
	c.ByPoP = make(map[string]uint64, len(s.stats.ByPoP))
	for k, v := range s.stats.ByPoP {
		c.ByPoP[k] = v
	}
	return c
}

func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// clientAddr is the ECS address when present (and its option, echoed in
// the answer with the scope we used), else the resolver's address.
func clientAddr(w dns.ResponseWriter, r *dns.Msg) (netip.Addr, *dns.EDNS0_SUBNET) {
	if o := r.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_SUBNET); ok {
				if a, ok := netip.AddrFromSlice(e.Address); ok {
					return a.Unmap(), e
				}
			}
		}
	}
	var ip net.IP
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.TCPAddr:
		ip = a.IP
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap(), nil
}

func (s *Server) serve(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	// Compressed, the answer's owner name is a pointer to the question's:
	// a reply to a 255-byte name stays within the 512 bytes a client
	// without EDNS takes (RFC 1035 §4.2.1), with no truncation needed.
	m.Compress = true
	if r.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented // NOTIFY, which the library lets through
		w.WriteMsg(m)
		return
	}
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	if q.Qclass != dns.ClassINET || name != s.cfg.Zone && !strings.HasSuffix(name, "."+s.cfg.Zone) {
		m.Authoritative = false
		m.Rcode = dns.RcodeRefused
		s.count(func(st *Stats) { st.Refused++ })
		w.WriteMsg(m)
		return
	}
	addr, ecs := clientAddr(w, r)
	if o := r.IsEdns0(); o != nil {
		opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		opt.SetUDPSize(1232)
		if ecs != nil {
			// RFC 7871 §7.2.1: echo family, source prefix and address;
			// the scope is the source prefix (we used all of it).
			e := *ecs
			e.SourceScope = ecs.SourceNetmask
			opt.Option = append(opt.Option, &e)
			s.count(func(st *Stats) { st.ECS++ })
		}
		m.Extra = append(m.Extra, opt)
	}
	if q.Qtype != dns.TypeA && q.Qtype != dns.TypeAAAA {
		w.WriteMsg(m) // NODATA: the name exists, not this type
		return
	}
	c, why := Choose(s.cov, s.view(), addr, q.Qtype == dns.TypeAAAA, s.cfg.MinServer)
	s.count(func(st *Stats) {
		switch why {
		case ByCoverage:
			st.Coverage++
		case ByScore:
			st.Score++
		case Fallback:
			st.Fallback++
		case NoPoP:
			st.NoPoP++
		}
		if why != NoPoP {
			st.ByPoP[c.Name]++
		}
	})
	if why == NoPoP {
		m.Rcode = dns.RcodeServerFailure
		w.WriteMsg(m)
		return
	}
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: s.cfg.TTL}
	if q.Qtype == dns.TypeA {
		hdr.Rrtype = dns.TypeA
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.IP(c.V4.AsSlice())})
	} else {
		hdr.Rrtype = dns.TypeAAAA
		m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.IP(c.V6.AsSlice())})
	}
	w.WriteMsg(m)
}
