package cdndns

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"shoal/internal/base/accept"
)

// Config is the server's settings; DefaultConfig gives the defaults. The
// zone's SOA timers are in seconds, as in a zone file.
type Config struct {
	// Addr is the UDP and TCP listen address (--dns).
	Addr string
	// Zone is the CDN's zone (--zone), e.g. "cdn.example."; names in it
	// are answered, others refused.
	Zone string
	// Names are the names answered with the client's PoP, relative to
	// the zone ("@" the apex, "*" any name the zone does not otherwise
	// hold, RFC 4592) or absolute; other names of the zone are NXDOMAIN.
	Names []string
	// NS are the zone's name servers, "name=address" once per address
	// ("ns1=192.0.2.1"; a name inside the zone needs one, its glue) or a
	// bare name outside the zone. Empty: "ns1" at the listen address's IP,
	// which must then be a specific address.
	NS []string
	// Hostmaster is the SOA's responsible mailbox ("hostmaster@cdn.example"
	// or "hostmaster.cdn.example."); empty: hostmaster at the zone.
	Hostmaster string
	// Serial, Refresh, Retry, Expire and NegTTL are the SOA's fields;
	// NegTTL (the SOA MINIMUM) is how long resolvers cache NXDOMAIN and
	// NODATA (RFC 2308).
	Serial, Refresh, Retry, Expire, NegTTL uint32
	// ZoneTTL is the TTL of the SOA, NS and glue records.
	ZoneTTL uint32
	// TTL of the PoP answers: short, so that a client follows the view
	// within seconds when a PoP fails (RFC 7871 §7.3.1 caches per scope
	// anyway).
	TTL uint32
	// MinServer is the server performance below which a PoP is taken as
	// above capacity and not answered.
	MinServer float64
	// MaxUDP is the largest UDP answer sent to an EDNS client (RFC 6891
	// §6.2.5; 1232 avoids IP fragmentation, DNS Flag Day 2020); a client
	// without EDNS gets 512 bytes. A longer answer is truncated (TC) and
	// the resolver asks again over TCP.
	MaxUDP uint16
	// TCP bounds the TCP port's connections (accept.Limits: its
	// connection counts; the timeouts are the server's own, 2 s per
	// message and 5 s idle).
	TCP accept.Limits
}

// DefaultConfig returns the defaults: the apex and www answered, TTL 20 s,
// a PoP with under 5 % of its capacity left not answered, SOA serial 1,
// refresh 1 h, retry 10 min, expire 14 d, negative TTL 60 s, SOA/NS TTL
// 1 h, UDP answers up to 1232 bytes, at most 256 TCP connections and 64
// from one address (resolvers use TCP only for answers too long for UDP).
func DefaultConfig() Config {
	return Config{Names: []string{"@", "www"}, Serial: 1, Refresh: 3600, Retry: 600, Expire: 1209600, NegTTL: 60,
		ZoneTTL: 3600, TTL: 20, MinServer: 0.05, MaxUDP: 1232, TCP: accept.Limits{MaxConns: 256, MaxPerIP: 64}}
}

// Stats counts the answers: by the PoP answered, and by outcome (a
// Reason's name for a PoP answer; answer, nodata, nxdomain, servfail,
// refused, notimp, formerr, badvers otherwise).
type Stats struct {
	ByPoP     map[string]uint64
	Outcomes  map[string]uint64
	ECS       uint64 // queries with a client subnet
	Truncated uint64 // UDP answers cut to the client's size (TC set)
}

// Server answers DNS queries for the zone.
type Server struct {
	cfg   Config
	z     *zone
	cov   *Coverage
	view  func() View
	udp   *dns.Server
	tcp   *dns.Server
	mu    sync.Mutex
	stats Stats
	// UDPAddr and TCPAddr are the bound addresses.
	UDPAddr, TCPAddr string
}

// Start listens on cfg.Addr (UDP and TCP) and serves until Close. view
// returns the current view (the MBPP view with the gateways' addresses).
func Start(cfg Config, cov *Coverage, view func() View) (*Server, error) {
	if cfg.Zone == "" {
		return nil, fmt.Errorf("dns: a zone is required (--zone)")
	}
	d := DefaultConfig()
	if cfg.TTL == 0 {
		cfg.TTL = d.TTL
	}
	if cfg.MaxUDP < dns.MinMsgSize {
		cfg.MaxUDP = d.MaxUDP
	}
	if cfg.TCP == (accept.Limits{}) {
		cfg.TCP = d.TCP
	}
	cfg.Zone = dns.Fqdn(strings.ToLower(cfg.Zone))
	if len(cfg.NS) == 0 {
		host, _, err := net.SplitHostPort(cfg.Addr)
		ip, perr := netip.ParseAddr(host)
		if err != nil || perr != nil || ip.IsUnspecified() {
			return nil, fmt.Errorf("dns: listening on %q, the zone's name server has no address to give: set --ns ns1=ADDRESS", cfg.Addr)
		}
		cfg.NS = []string{"ns1=" + ip.String()}
	}
	z, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, z: z, cov: cov, view: view, stats: Stats{ByPoP: map[string]uint64{}, Outcomes: map[string]uint64{}}}
	pc, ln, err := listenPair(cfg.Addr)
	if err != nil {
		return nil, err
	}
	s.UDPAddr, s.TCPAddr = pc.LocalAddr().String(), ln.Addr().String()
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h, MsgAcceptFunc: acceptRequests, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
	s.tcp = &dns.Server{Listener: accept.Bound(ln, cfg.TCP), Handler: h, MsgAcceptFunc: acceptRequests, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		IdleTimeout: func() time.Duration { return 5 * time.Second }}
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	return s, nil
}

// acceptRequests lets every request through to serve, which answers NOTIMP,
// FORMERR and the rest itself with the question echoed (miekg's default
// answers FORMERR to a second OPT record only past two additional records,
// and NOTIMP without the question); responses are dropped, as any answer
// to them could be used to reflect traffic.
func acceptRequests(h dns.Header) dns.MsgAcceptAction {
	if h.Bits&(1<<15) != 0 {
		return dns.MsgIgnore
	}
	return dns.MsgAccept
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
	c.ByPoP, c.Outcomes = maps.Clone(s.stats.ByPoP), maps.Clone(s.stats.Outcomes)
	return c
}

// serve answers one request and cuts a UDP answer to the client's size:
// 512 bytes without EDNS, else its advertised size up to MaxUDP.
func (s *Server) serve(w dns.ResponseWriter, r *dns.Msg) {
	var resolver netip.Addr
	udp := false
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		resolver, udp = a.AddrPort().Addr().Unmap(), true
	case *net.TCPAddr:
		resolver = a.AddrPort().Addr().Unmap()
	}
	a := answerer{z: s.z, cov: s.cov, view: s.view, minServer: s.cfg.MinServer, maxUDP: s.cfg.MaxUDP}
	m, out := a.respond(r, resolver)
	// Compressed, an answer's owner is a pointer to the question's name:
	// a reply to a 255-byte name stays within 512 bytes.
	m.Compress = true
	truncated := false
	if udp {
		size := dns.MinMsgSize
		if o := r.IsEdns0(); o != nil {
			size = int(min(max(o.UDPSize(), dns.MinMsgSize), s.cfg.MaxUDP))
		}
		m.Truncate(size)
		truncated = m.Truncated
	}
	s.mu.Lock()
	s.stats.Outcomes[out.key]++
	if out.pop != "" {
		s.stats.ByPoP[out.pop]++
	}
	if out.ecs {
		s.stats.ECS++
	}
	if truncated {
		s.stats.Truncated++
	}
	s.mu.Unlock()
	w.WriteMsg(m)
}
