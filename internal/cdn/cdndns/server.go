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
	// Names are the names of the zone that answer with a PoP, relative to
	// the zone ("@" is the zone itself, "*" any name); a name in the zone
	// that is none of these, nor a name server's, is NXDOMAIN.
	Names []string
	// NS are the zone's name servers (relative to the zone, or absolute
	// with a final dot), answered at the zone's apex; NSAddrs are the
	// addresses answered for those inside the zone (glue). With none, the
	// responder's own address when it listens on one.
	NS      []string
	NSAddrs []netip.Addr
	// SOA: the mailbox of the zone's keeper (relative or absolute, "@"
	// for "."), the serial (0: the responder's start time in seconds,
	// which grows with each start), and the timers of RFC 1035 §3.3.13;
	// NegTTL is the SOA minimum, how long resolvers keep a negative
	// answer (RFC 2308).
	Mbox                           string
	Serial                         uint32
	Refresh, Retry, Expire, NegTTL uint32
}

// DefaultConfig returns the defaults: TTL 20 s, a PoP with under 5 % of
// its capacity left is not answered; the names "@" and "www", one name
// server "ns1", and SOA timers of an hour, ten minutes, a week and a
// minute of negative caching (a PoP that comes back shows within it).
func DefaultConfig() Config {
	return Config{TTL: 20, MinServer: 0.05, Names: []string{"@", "www"}, NS: []string{"ns1"}, Mbox: "hostmaster",
		Refresh: 3600, Retry: 600, Expire: 604800, NegTTL: 60}
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
	zone  zone
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
	if cfg.Mbox == "" {
		return nil, fmt.Errorf("dns: the SOA needs a mailbox (Config.Mbox, default %q)", DefaultConfig().Mbox)
	}
	cfg.Zone = dns.Fqdn(strings.ToLower(cfg.Zone))
	if cfg.Serial == 0 {
		cfg.Serial = uint32(time.Now().Unix())
	}
	s := &Server{cfg: cfg, cov: cov, view: view, stats: Stats{ByPoP: map[string]uint64{}}}
	pc, ln, err := listenPair(cfg.Addr)
	if err != nil {
		return nil, err
	}
	s.UDPAddr, s.TCPAddr = pc.LocalAddr().String(), ln.Addr().String()
	if len(s.cfg.NSAddrs) == 0 {
		if ap, err := netip.ParseAddrPort(s.UDPAddr); err == nil && !ap.Addr().IsUnspecified() {
			s.cfg.NSAddrs = []netip.Addr{ap.Addr().Unmap()}
		}
	}
	s.zone = newZone(s.cfg)
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
	s.tcp = &dns.Server{Listener: ln, Handler: h, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, IdleTimeout: func() time.Duration { return 5 * time.Second }}
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
	switch {
	case r.Opcode != dns.OpcodeQuery: // NOTIFY, UPDATE, …: not an authority's job here
		m.Rcode = dns.RcodeNotImplemented
		w.WriteMsg(m)
		return
	case len(r.Question) != 1 || countOPT(r) > 1: // RFC 6891 §6.1.1: one OPT at most
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	rel, ok := s.zone.relative(q.Name)
	if !ok {
		m.Rcode = dns.RcodeRefused
		s.count(func(st *Stats) { st.Refused++ })
		w.WriteMsg(m)
		return
	}
	m.Authoritative = true
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
	s.answer(m, q, rel, addr)
	s.write(w, r, m)
}

// answer fills m for question q, whose name is rel inside the zone.
func (s *Server) answer(m *dns.Msg, q dns.Question, rel string, addr netip.Addr) {
	z := &s.zone
	switch {
	case rel == "@" && q.Qtype == dns.TypeSOA:
		m.Answer = append(m.Answer, z.soa())
	case rel == "@" && q.Qtype == dns.TypeNS:
		m.Answer = append(m.Answer, z.nsRecords()...)
		m.Extra = append(m.Extra, z.glue()...)
	case z.isNS(rel):
		if !z.answerGlue(m, q) {
			z.nodata(m)
		}
	case !z.isName(rel):
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, z.soa())
	case q.Qtype == dns.TypeA || q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY:
		s.answerPoP(m, q, addr)
	default:
		z.nodata(m) // the name exists, not this type
	}
}

// answerPoP answers A or AAAA (ANY as A, RFC 8482) with the PoP Choose
// picks for the client. No PoP of the family at all is NODATA (the zone
// has no such address); one of the family but none usable is SERVFAIL,
// so that resolvers retry rather than cache an absence.
func (s *Server) answerPoP(m *dns.Msg, q dns.Question, addr netip.Addr) {
	v6 := q.Qtype == dns.TypeAAAA
	view := s.view()
	c, why := Choose(s.cov, view, addr, v6, s.cfg.MinServer)
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
		if !anyFamily(view, v6) {
			s.zone.nodata(m)
			return
		}
		m.Rcode = dns.RcodeServerFailure
		return
	}
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: s.cfg.TTL}
	if v6 {
		hdr.Rrtype = dns.TypeAAAA
		m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.IP(c.V6.AsSlice())})
	} else {
		hdr.Rrtype = dns.TypeA
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.IP(c.V4.AsSlice())})
	}
}

// write sends m, truncated over UDP to what the client can take (its
// EDNS buffer size, else 512 bytes; RFC 1035 §4.2.1, RFC 6891 §6.2.5): a
// truncated answer makes it ask again over TCP.
func (s *Server) write(w dns.ResponseWriter, r *dns.Msg, m *dns.Msg) {
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if o := r.IsEdns0(); o != nil {
			size = min(max(int(o.UDPSize()), dns.MinMsgSize), 1232)
		}
		m.Truncate(size)
	}
	w.WriteMsg(m)
}

// countOPT counts the OPT records of r's additional section.
func countOPT(r *dns.Msg) int {
	n := 0
	for _, rr := range r.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			n++
		}
	}
	return n
}

// anyFamily reports whether a PoP of the view has an address of the
// family at all.
func anyFamily(cs []Candidate, v6 bool) bool {
	for _, c := range cs {
		if v6 && c.V6.IsValid() || !v6 && c.V4.IsValid() {
			return true
		}
	}
	return false
}
