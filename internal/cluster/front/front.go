// Package front is the front-end's data plane (SPEC §1 "front", §4): it
// accepts client connections, reads each request head with httpwire's strict
// parser, asks the control plane (internal/cluster/control) for a node per request,
// and moves the request by a data path — relay through pooled keep-alive
// connections (the baseline every load balancer has), a 302 redirect, or the
// handoff paths of seeds 000/002 (passfd, repair). Whatever the path, one
// dispatch core (dispatch.go) routes each request once and finishes it once.
//
// Why not net/http and httputil.ReverseProxy: they allocate a Request, a
// header map and a response per request and own the connection's buffers, and
// reach about 0.3× HAProxy's request rate on one core. This package keeps one
// goroutine and two reusable buffers per client connection, parses in place,
// rewrites the head in one pass (hop-by-hop headers out, X-Forwarded-For in)
// into one write, keeps a small LIFO free list of keep-alive connections per
// node without a goroutine per pooled connection, and streams bodies, using
// splice(2) (io.Copy between TCP sockets) for large ones.
//
// Every request on a keep-alive client connection is routed on its own, so
// content-aware policies (lard, tbccrd) see each URL (seed 000 §2.2: "several
// moves per keep-alive connection"). An idempotent request whose node fails
// before sending any response byte is retried once on another node; requests
// beyond a node's connection limit wait in a bounded queue (LARD's front-end
// queue, Pai et al. 1998) rather than overload it.
package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/accept"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/vhost"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/policy"
)

// Config tunes a Server. Zero fields take the documented defaults, chosen to
// match what nginx and HAProxy ship with where they have an equivalent.
type Config struct {
	// MaxHeadBytes bounds a request head; a larger one gets 431. Default
	// httpwire.DefaultMaxHead (8 KiB).
	MaxHeadBytes int
	// HeaderTimeout is how long a client may take to send a complete request
	// head once it has started one (or after connecting); it cuts slowloris
	// clients. Default 10 s (nginx client_header_timeout 60 s is generous;
	// HAProxy's timeout http-request is usually set to 10 s).
	HeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive client connection that sends no new
	// request for this long. Default 60 s.
	IdleTimeout time.Duration
	// WriteTimeout is the client send timeout: how long a write to a client
	// may make no progress (a client that stops reading) before the
	// connection is closed. Response bodies are written at most 256 KiB
	// per deadline, so this is nginx's send_timeout (the time between two
	// successive writes) for any client reading at least 256 KiB per
	// timeout. Default 60 s, nginx's and HAProxy's usual value.
	WriteTimeout time.Duration

	// MaxClientConns caps the client connections open at once (limits.go);
	// past 7/8 of it the connections idle the longest are closed, and at it
	// a new connection is refused with 503 if none is idle. Default
	// DefaultMaxClientConns(RLIMIT_NOFILE); negative: no limit.
	MaxClientConns int
	// MaxConnsPerIP caps the client connections open at once from one
	// address; one more is refused with 503. Default DefaultMaxConnsPerIP
	// (256); negative: no limit. Connections the raw accept path hands to a
	// node at once are not held by the front and not counted.
	MaxConnsPerIP int

	// DialTimeout bounds a connect to a node. Default 3 s.
	DialTimeout time.Duration
	// ResponseTimeout bounds the wait for a node's response head and each
	// read of its body; exceeding it answers 504. Default 60 s.
	ResponseTimeout time.Duration
	// PoolIdle is how long a pooled node connection may sit unused before it
	// is closed. Default 30 s (below nginx's keepalive_timeout of 75 s, so
	// the front, not the node, usually closes first).
	PoolIdle time.Duration
	// PoolSize caps idle pooled connections per node. Default 128.
	PoolSize int

	// MaxConn is the per-node limit of requests in flight; requests beyond it
	// queue at the front. 0 means no limit (the default). A request holds
	// its slot while the node works on it — until the response head has
	// arrived and, for a body already in the front's buffer, been passed
	// on; a body still to be streamed from the node gives the slot back
	// first, so clients that read slowly (or never) cannot use up the slots.
	// Stats.Streaming counts those bodies.
	MaxConn int
	// QueueLen bounds each node's queue; a request that finds it full gets
	// 503 at once. Default 1024.
	QueueLen int
	// QueueTimeout is the longest a request waits in a node's queue before
	// it is answered 503. Default 5 s.
	QueueTimeout time.Duration

	// Path is the data path used when Choose is nil. Default Relay().
	Path DataPath
	// Choose, when set, picks the data path for each request from the
	// policy's decision (the hybrid rule of seed 002 plugs in here).
	Choose func(d policy.Decision, x *Exchange) DataPath
	// Hybrid holds the thresholds of the hybrid rule (Hybrid, hybrid.go).
	Hybrid HybridConfig
	// Observer, when set, is told about every finished request (latency
	// histograms by node for /metrics).
	Observer Observer
	// AccessLog, when set, gets one line per request (accesslog.go):
	// Common Log Format by default. Nil turns the log off (the default).
	AccessLog *AccessLog
	// Log receives connection-level errors worth an operator's attention
	// (accept failures). Default: discard.
	// VHosts, when set, keys the policies' tables by site + path
	// ("example.com/index.html") instead of the path, so one cluster serves
	// many sites without their URLs colliding; the site comes from the Host
	// header or an absolute-form target, and hosts that are not configured
	// sites share the "_default" key space (vhost.Map), which bounds every
	// table and metric. Nil (the default): keys are paths.
	VHosts *vhost.Map
	// CacheKeys keys the policies' tables by the lower-cased host and the
	// request-target's path and query ("example.com/a?b=1"), the identity of
	// a response for nodes in cache mode (an HTTP cache keys on the whole
	// URL, so two queries are two objects to place). It takes precedence
	// over VHosts. Default false: keys are paths.
	CacheKeys bool
	Logger    *slog.Logger

	// HTTP2 tunes HTTP/2 (h2.go). NoHTTP2 turns it off: ALPN then offers
	// http/1.1 only (the listener's side: ALPN), and H2C is ignored. H2C
	// makes plain listeners take HTTP/2 with prior knowledge as well (the
	// client's connection preface, RFC 9113 §3.3); off by default, since
	// a plain listener is usually behind another proxy that speaks
	// HTTP/1.1.
	HTTP2   H2Config
	NoHTTP2 bool
	H2C     bool
	// AltSvc, when set, is sent as the Alt-Svc field (RFC 7838) on
	// responses over TLS and HTTP/3, to advertise HTTP/3 (AltSvcH3). Empty
	// by default: HTTP/3 is off unless asked for.
	AltSvc string
	// ProxyFrom lists the networks (a layer-4 balancer's addresses) whose
	// connections must begin with a PROXY protocol header, v1 or v2; the
	// client address it carries then stands for the peer's in per-address
	// limits, X-Forwarded-For, logs and the policies (proxyproto.go). A
	// connection from anywhere else that sends one is closed. Empty (the
	// default): no PROXY header is read.
	ProxyFrom []netip.Prefix

	// Knobs for tests and benchmarks only, unexported so that no operator
	// turns them: noFastAccept keeps every connection off the raw accept
	// path (fastaccept.go); noBatch makes each relayed request write its own
	// head to the node (batch.go); batchMin is how many requests must be in
	// relay at once before heads are batched (default 3).
	noFastAccept, noBatch bool
	batchMin              int
}

func (c *Config) fill() {
	d := DefaultConfig()
	orDefault(&c.batchMin, 3)
	orDefault(&c.MaxHeadBytes, d.MaxHeadBytes)
	orDefault(&c.HeaderTimeout, d.HeaderTimeout)
	orDefault(&c.IdleTimeout, d.IdleTimeout)
	orDefault(&c.WriteTimeout, d.WriteTimeout)
	if c.MaxClientConns == 0 { // negative: no limit
		c.MaxClientConns = DefaultMaxClientConns(nofile())
	}
	if c.MaxConnsPerIP == 0 {
		c.MaxConnsPerIP = d.MaxConnsPerIP
	}
	orDefault(&c.DialTimeout, d.DialTimeout)
	orDefault(&c.ResponseTimeout, d.ResponseTimeout)
	orDefault(&c.PoolIdle, d.PoolIdle)
	orDefault(&c.PoolSize, d.PoolSize)
	orDefault(&c.QueueLen, d.QueueLen)
	orDefault(&c.QueueTimeout, d.QueueTimeout)
	if c.Path == nil {
		c.Path = Relay()
	}
	c.HTTP2.fill()
}

// orDefault sets a zero or negative *v to def.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Observation describes one finished request for an Observer.
type Observation struct {
	Node    int           // node index, -1 if none was chosen
	NodeURL string        // the node's base URL, "" if none
	Path    string        // data path name ("relay", "redirect", ...)
	Status  int           // status sent to the client, 0 if none
	Retried bool          // the request was retried on another node
	Elapsed time.Duration // from head parsed to response done
	Site    string        // the request's site with Config.VHosts, else ""
	Bytes   int64         // bytes the front wrote to the client (HTTP/1: head and body; 0 after a handoff; HTTP/2, 3: body)
	Proto   string        // the client's protocol: "HTTP/1.1" (1.0 included), "HTTP/2.0", "HTTP/3.0"
}

// Observer receives per-request observations; the metrics engineer
// implements it (histograms by node and policy) so the front does not
// import Prometheus. Observe is called on the request's goroutine and must
// be fast and safe for concurrent use.
type Observer interface {
	Observe(o Observation)
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	ConnsAccepted uint64            // client connections accepted
	ConnsActive   int64             // client connections open now
	Requests      uint64            // request heads parsed and dispatched or refused
	Retries       uint64            // requests retried once on another node
	FreshRedials  uint64            // stale pooled connections replaced by a fresh one (not retries)
	Sent4xx       uint64            // 4xx answers the front generated (bad requests, 408, 431)
	Sent5xx       uint64            // 5xx answers the front generated (502, 503 — limits' refusals included —, 504)
	Status        [6]uint64         // responses to clients by class: [1]=1xx … [5]=5xx, relayed or generated
	BytesIn       uint64            // bytes read from clients
	BytesOut      uint64            // bytes written to clients
	Queued        uint64            // requests that waited in a node queue
	QueueTimeouts uint64            // requests answered 503 after waiting too long
	QueueFull     uint64            // requests answered 503 because a node queue was full
	NodeDials     uint64            // connections opened to nodes
	RefusedLimit  uint64            // client connections refused at MaxClientConns (none idle to close)
	RefusedPerIP  uint64            // client connections refused at MaxConnsPerIP
	IdleShed      uint64            // idle client connections closed to make room near MaxClientConns
	Streaming     int64             // response bodies streaming now after giving back their node slot
	HeadBatches   uint64            // rounds in which the batcher wrote request heads to nodes
	HeadsBatched  uint64            // request heads written in those rounds (HeadsBatched/HeadBatches: mean batch)
	HeadsPiped    uint64            // request heads that went in another request's batched write, on its node connection (pipelining)
	Paths         map[string]uint64 // requests per data path name
	Handoff       HandoffStats      // handoff paths: passes, fallbacks, returns, hybrid decisions
	Protocols     ProtocolStats     // requests and connections by protocol; PROXY headers
	Answers       AnswerStats       // the front's own answers (Sent4xx + Sent5xx) by reason
	Repair        *RepairStats      `json:",omitempty"` // the repair path's counters; nil on other paths
}

// Server is the front-end data plane. Create it with New, run it with
// Serve, stop it with Shutdown or Close.
type Server struct {
	cfg    Config
	cl     *control.Cluster
	parser httpwire.Parser
	dialer net.Dialer

	ctr   counters
	paths sync.Map // path name → *atomic.Uint64
	// share is the hybrid rule's count of relayed connections in tag
	// mode (hybrid.go), set by its first choice.
	share atomic.Pointer[relayShare]

	upMu      sync.Mutex
	upstreams atomic.Pointer[[]*upstream] // by Backend.Index; grown copy-on-write

	nextConn atomic.Uint64
	ccPool   sync.Pool // finished *clientConn, buffers included (conn.go)
	altSvc   []byte    // Config.AltSvc, nil when empty
	workers  workers   // stream handlers (workers.go)

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*clientConn]struct{}
	closing   atomic.Bool
	drainAt   atomic.Int64 // with closing: when idle connections close (unix ns)
	// serving counts Serve calls still accepting; drained is set (under
	// mu) once Shutdown saw every connection gone, or by Close: no
	// connection is taken on after it.
	serving  sync.WaitGroup
	drained  bool
	done     chan struct{}
	batch    *batcher // nil with Config.noBatch
	relaying atomic.Int64
	janitor  sync.Once

	// Client connection limits (limits.go): open connections per address
	// (under mu), the background shedder's wake-up, and its scratch.
	perIP     map[netip.Addr]int
	shedWake  chan struct{}
	shedMu    sync.Mutex
	shedCand  []idleConn
	shedConns []net.Conn
}

// New builds a server that dispatches through c.
func New(c *control.Cluster, cfg Config) (*Server, error) {
	if c == nil {
		return nil, errors.New("front: nil cluster")
	}
	cfg.fill()
	if cfg.MaxHeadBytes < 512 {
		return nil, fmt.Errorf("front: MaxHeadBytes %d: need at least 512", cfg.MaxHeadBytes)
	}
	s := &Server{
		cfg:       cfg,
		cl:        c,
		parser:    httpwire.Parser{MaxHead: cfg.MaxHeadBytes},
		dialer:    net.Dialer{Timeout: cfg.DialTimeout},
		listeners: map[net.Listener]struct{}{},
		conns:     map[*clientConn]struct{}{},
		done:      make(chan struct{}),
		perIP:     map[netip.Addr]int{},
		shedWake:  make(chan struct{}, 1),
	}
	if !cfg.noBatch {
		s.batch = newBatcher(s.done)
	}
	if cfg.AltSvc != "" {
		s.altSvc = []byte(cfg.AltSvc)
	}
	empty := []*upstream{}
	s.upstreams.Store(&empty)
	return s, nil
}

// Cluster returns the control plane the server dispatches through.
func (s *Server) Cluster() *control.Cluster { return s.cl }

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("front: server closed")

// Serve accepts connections on ln until Shutdown or Close, serving each on
// its own goroutine — except under PassFD or Repair alone on a
// *net.TCPListener, where connections that arrive with a whole request head
// are handed to their node straight from the accept loop (fastaccept.go; stop it with
// Shutdown or Close, not by closing ln). It always returns a non-nil error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.serving.Add(1)
	s.mu.Unlock()
	defer s.serving.Done()
	s.janitor.Do(func() {
		go s.reap()
		if s.cfg.MaxClientConns > 0 {
			go s.shedLoop()
		}
	})
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	if tl, ra := s.fastAccept(ln); tl != nil {
		return s.serveRaw(tl, ra)
	}
	err := accept.Loop(ln, func(c net.Conn) {
		if cc := s.acceptConn(c); cc != nil {
			go cc.serve()
		}
	}, s.acceptRetry)
	if s.closing.Load() {
		return ErrServerClosed
	}
	return fmt.Errorf("front: accept: %w", err)
}

// acceptRetry logs an accept error the loop retries after wait
// (internal/base/accept's rule: out of descriptors or memory, the port stays).
func (s *Server) acceptRetry(err error, wait time.Duration) {
	s.logf("front: accept: %v; retrying in %v", err, wait)
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logger != nil {
		s.cfg.Logger.Warn(fmt.Sprintf(format, args...))
	}
}

// Shutdown stops accepting and drains the client connections: a busy one
// finishes its request, answered with "Connection: close"; an idle
// keep-alive one may still send one more request for up to drainIdle,
// which is answered the same way, and is closed after that with a
// lingering close (FIN first, then what the client still sent is read and
// dropped), never on a request it has not read. Closing a connection with
// a request unread in its receive buffer makes the kernel reset it, which
// the client sees as a failed request: during a reload, which starts a new
// server on the same socket and shuts this one down, no request is lost.
// Then pooled node connections are closed. If ctx ends first, the
// remaining connections are closed and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	// A connection an accept loop took just before its listener closed is
	// served like the others: wait until every loop has handed its last
	// one over, so none is closed unread.
	loops := make(chan struct{})
	go func() { s.serving.Wait(); close(loops) }()
	select {
	case <-loops:
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if s.kickIdle() == 0 {
			s.closePools()
			return nil
		}
		select {
		case <-ctx.Done():
			s.Close()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// drainIdle is how long an idle keep-alive connection may still send one
// request once Shutdown began (or IdleTimeout, if shorter): a client
// reusing its connection sends it within milliseconds, and answering it
// with "Connection: close" moves the client to a new connection without
// an error; a connection quiet that long is closed.
const drainIdle = time.Second

// lingerClose closes c once the peer has seen the end of the stream:
// shutdown(SHUT_WR) sends FIN, then what the client sends meanwhile (a
// request that crossed the FIN) is read and dropped for at most a second,
// so the close never resets a request the client is waiting on (nginx's
// lingering_close).
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		c.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, io.LimitReader(c, 256<<10))
	}
	c.Close()
}

// Close closes listeners, every client connection and every pooled node
// connection at once. A connection in the keep-alive loop is shut down
// (shutLoop) and closed by its own goroutine as the shutdown wakes it.
func (s *Server) Close() error {
	s.beginClose()
	s.mu.Lock()
	s.drained = true
	for cc := range s.conns {
		if !cc.shutLoop() {
			closeNow(cc.c)
		}
	}
	s.mu.Unlock()
	s.closePools()
	return nil
}

func (s *Server) beginClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing.Load() {
		s.drainAt.Store(time.Now().Add(min(drainIdle, s.cfg.IdleTimeout)).UnixNano())
	}
	if !s.closing.Swap(true) {
		close(s.done)
	}
	for ln := range s.listeners {
		ln.Close()
	}
}

// kickIdle brings the read deadline of every client connection waiting
// for a request forward to drainAt, so it sees the shutdown, and returns
// how many connections are still open.
func (s *Server) kickIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := time.Unix(0, s.drainAt.Load())
	for cc := range s.conns {
		switch cc.state.Load() {
		case connIdle:
			cc.c.SetReadDeadline(at)
		case connH2:
			if h := cc.h2.Load(); h != nil {
				h.drain() // GOAWAY; it closes once its streams are done
			}
		}
	}
	if len(s.conns) == 0 {
		s.drained = true
	}
	return len(s.conns)
}

// Stats returns a snapshot of the counters (for the admin API and metrics).
func (s *Server) Stats() Stats {
	c := &s.ctr
	st := Stats{
		ConnsAccepted: c.connsAccepted.Load(),
		ConnsActive:   c.connsActive.Load(),
		Requests:      c.requests.Load(),
		Retries:       c.retries.Load(),
		FreshRedials:  c.freshRedials.Load(),
		Sent4xx:       c.sent4xx.Load(),
		Sent5xx:       c.sent5xx.Load(),
		BytesIn:       c.bytesIn.Load(),
		BytesOut:      c.bytesOut.Load(),
		Queued:        c.queued.Load(),
		QueueTimeouts: c.queueTimeouts.Load(),
		QueueFull:     c.queueFull.Load(),
		NodeDials:     c.nodeDials.Load(),
		RefusedLimit:  c.refusedLimit.Load(),
		RefusedPerIP:  c.refusedPerIP.Load(),
		IdleShed:      c.idleShed.Load(),
		Streaming:     c.streaming.Load(),
		HeadsPiped:    c.pipelined.Load(),
		Paths:         map[string]uint64{},
		Handoff:       c.handoffStats(),
		Protocols:     c.protocolStats(),
		Answers:       c.answerStats(),
	}
	if b := s.batch; b != nil {
		st.HeadBatches, st.HeadsBatched = b.batches.Load(), b.heads.Load()
	}
	for i := range c.status {
		st.Status[i] = c.status[i].Load()
	}
	s.paths.Range(func(k, v any) bool {
		st.Paths[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	if r, ok := s.cfg.Path.(interface{ Stats() RepairStats }); ok {
		rs := r.Stats()
		st.Repair = &rs
	}
	return st
}

// pathCounter returns the request counter of the data path called name.
func (s *Server) pathCounter(name string) *atomic.Uint64 {
	if v, ok := s.paths.Load(name); ok {
		return v.(*atomic.Uint64)
	}
	v, _ := s.paths.LoadOrStore(name, new(atomic.Uint64))
	return v.(*atomic.Uint64)
}

// upstream returns the per-node data-plane state (pool, limiter) of b,
// creating it on first use; nodes added at runtime get theirs lazily.
func (s *Server) upstream(b *control.Backend) *upstream {
	ups := *s.upstreams.Load()
	if b.Index < len(ups) && ups[b.Index] != nil {
		return ups[b.Index]
	}
	s.upMu.Lock()
	defer s.upMu.Unlock()
	ups = *s.upstreams.Load()
	if b.Index < len(ups) && ups[b.Index] != nil {
		return ups[b.Index]
	}
	n := len(ups)
	if b.Index >= n {
		n = b.Index + 1
	}
	grown := make([]*upstream, n)
	copy(grown, ups)
	u := newUpstream(b, &s.cfg)
	grown[b.Index] = u
	s.upstreams.Store(&grown)
	return u
}

// reap closes pooled node connections idle longer than PoolIdle, so that
// idle pools shrink without a timer or goroutine per connection.
func (s *Server) reap() {
	tick(s.cfg.PoolIdle/2, s.done, func() {
		now := time.Now().UnixNano()
		for _, u := range *s.upstreams.Load() {
			if u != nil {
				u.pool.reap(now)
			}
		}
		s.workers.reap(now - int64(s.cfg.PoolIdle))
	})
}

// tick calls f every period until done is closed.
func tick(period time.Duration, done <-chan struct{}, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		f()
	}
}

func (s *Server) closePools() {
	for _, u := range *s.upstreams.Load() {
		if u != nil {
			u.pool.closeAll()
		}
	}
}
