package cdndns

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/miekg/dns"
)

// recorder is a dns.ResponseWriter that keeps what the handler writes, as
// the UDP server would send it.
type recorder struct {
	remote net.Addr
	msgs   []*dns.Msg
}

func (r *recorder) LocalAddr() net.Addr       { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (r *recorder) RemoteAddr() net.Addr      { return r.remote }
func (r *recorder) WriteMsg(m *dns.Msg) error { r.msgs = append(r.msgs, m.Copy()); return nil }
func (r *recorder) Write([]byte) (int, error) { panic("the handler writes messages, not bytes") }
func (r *recorder) Close() error              { return nil }
func (r *recorder) TsigStatus() error         { return nil }
func (r *recorder) TsigTimersOnly(bool)       {}
func (r *recorder) Hijack()                   {}

// fuzzServer is a server for cdn.example with the test view and one name
// server with glue, not listening: the fuzz target calls its handler
// directly.
func fuzzServer() *Server {
	cov, _ := NewCoverage([]Rule{{"192.0.2.0/24", "paris"}, {"2001:db8::/32", "tokyo"}})
	cfg := DefaultConfig()
	cfg.Zone, cfg.NS = "cdn.example.", []string{"ns1=192.0.2.53"}
	z, err := compile(cfg)
	if err != nil {
		panic(err)
	}
	return &Server{cfg: cfg, z: z, cov: cov, view: testView, stats: Stats{ByPoP: map[string]uint64{}, Outcomes: map[string]uint64{}}}
}

// FuzzServe feeds arbitrary packets to the responder the way the UDP
// server does (the library's accept check on the header, then unpacking)
// and checks every reply: exactly one, with the query's ID and opcode,
// packable, within 512 bytes for a client without EDNS (RFC 1035 §4.2.1)
// and within the advertised size otherwise (RFC 6891 §6.2.5), answering
// only QUERY opcodes for class IN names in the zone, with addresses of the
// view's PoPs or the name server's glue, or the zone's SOA and NS. The seed
// corpus (testdata/fuzz/FuzzServe) holds A, AAAA, ECS, out-of-zone,
// maximum-length, multi-question, NOTIFY and malformed-option queries.
func FuzzServe(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("www.cdn.example.", dns.TypeA)
	b, _ := q.Pack()
	f.Add(b)
	addrs := map[string]bool{"192.0.2.53": true}
	for _, c := range testView().PoPs {
		addrs[c.V4.String()], addrs[c.V6.String()] = true, true
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 12 {
			return
		}
		h := dns.Header{Id: binary.BigEndian.Uint16(in), Bits: binary.BigEndian.Uint16(in[2:]),
			Qdcount: binary.BigEndian.Uint16(in[4:]), Ancount: binary.BigEndian.Uint16(in[6:]),
			Nscount: binary.BigEndian.Uint16(in[8:]), Arcount: binary.BigEndian.Uint16(in[10:])}
		if dns.DefaultMsgAcceptFunc(h) != dns.MsgAccept {
			return // the library answers these itself
		}
		var r dns.Msg
		if r.Unpack(in) != nil {
			return
		}
		s := fuzzServer()
		w := &recorder{remote: &net.UDPAddr{IP: net.IPv4(198, 51, 100, 7), Port: 5353}}
		s.serve(w, &r)
		if len(w.msgs) != 1 {
			t.Fatalf("%d replies", len(w.msgs))
		}
		m := w.msgs[0]
		if m.Id != r.Id || !m.Response || m.Opcode != r.Opcode {
			t.Fatalf("reply id %d response %v opcode %d for query id %d opcode %d", m.Id, m.Response, m.Opcode, r.Id, r.Opcode)
		}
		out, err := m.Pack()
		if err != nil {
			t.Fatalf("reply does not pack: %v", err)
		}
		limit := dns.MinMsgSize
		if o := r.IsEdns0(); o != nil {
			limit = max(dns.MinMsgSize, int(o.UDPSize()))
		}
		if len(out) > limit {
			t.Fatalf("reply of %d bytes to a client that takes %d", len(out), limit)
		}
		if len(m.Answer) > 0 && (r.Opcode != dns.OpcodeQuery || r.Question[0].Qclass != dns.ClassINET) {
			t.Fatalf("answered opcode %d class %d", r.Opcode, r.Question[0].Qclass)
		}
		for _, rr := range m.Answer {
			var a string
			switch rr := rr.(type) {
			case *dns.A:
				a = rr.A.String()
			case *dns.AAAA:
				a = rr.AAAA.String()
			case *dns.SOA, *dns.NS:
				a = "192.0.2.53" // the zone's own records
			default:
				t.Fatalf("answer of type %T", rr)
			}
			if !addrs[a] {
				t.Fatalf("answered %s, not a PoP's address", a)
			}
			if !dns.IsSubDomain(s.cfg.Zone, dns.CanonicalName(rr.Header().Name)) {
				t.Fatalf("answered %q outside the zone", rr.Header().Name)
			}
		}
	})
}
