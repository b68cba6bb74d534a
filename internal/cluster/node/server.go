package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/accept"
	"shoal/internal/base/cache"
	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/store"
	"shoal/internal/base/vhost"
	"shoal/internal/cluster/peer"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("node: server closed")

// Server is one node's HTTP/1.1 server. Create it with New; it is safe for
// concurrent use, and one Server may Serve several listeners.
type Server struct {
	cfg   Config
	store *content.Store
	// objs is the object store (internal/base/store): the bodies of the
	// representations served, in memory as its policy decides. maxObject
	// is the largest body its memory tier admits, -1 when it has none.
	objs      *store.Store
	maxObject int64
	parser    httpwire.Parser
	dates     httpwire.DateCache

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	draining  atomic.Bool
	done      chan struct{} // closed when the sweeper stops
	stopSweep chan struct{}
	stopOnce  sync.Once

	// counters (summed per batch by connections)
	active    atomic.Int64
	requests  atomic.Int64
	bytesSent atomic.Int64
	// objectBytes and memoryBytes are Status.Served: file body bytes
	// answered, and those of them that came from a memory.
	objectBytes, memoryBytes atomic.Int64
	// inService counts connections answering requests now; busy the
	// nanoseconds they spent doing so (the node's own load, status.go).
	inService atomic.Int64
	busy      atomic.Int64
	boundary  atomic.Uint64     // multipart/byteranges boundaries (ranges.go)
	sites     map[string]*vsite // with VHosts: the sites by name (vhosts.go)
	single    *vsite            // without VHosts: the one site
	vmap      *vhost.Map        // with VHosts: host -> site
	refused   atomic.Int64      // connections refused at MaxConns
	shed      atomic.Int64      // idle connections closed to make room

	shedCand []idleConn // makeRoom's scratch, under mu
	// freeConns recycles ended conns with their buffers, outBufs lends
	// grown output buffers to the conns answering a batch and inBufs
	// full-size read buffers to those reading a large one (conn.go).
	freeConns freeList[*conn]
	outBufs   freeList[[]byte]
	inBufs    freeList[[]byte]

	logMu  sync.Mutex
	logBuf *bufio.Writer // nil when the access log is off

	usage usageSampler
	// sizeIdx caches the size index served at /.shoal/sizes (sizes.go).
	sizeIdx sizeIndexCache
	pub     publishState // two-phase publish (publish.go)
	peer    *peer.Host   // peer fetch and cache digests, nil when off (peer.go)
	edge    *edge        // cache mode (Config.Edge), nil when off (edge.go)
}

// New checks cfg, scans the site root and builds the cache.
func New(cfg Config) (*Server, error) {
	cfg.withDefaults()
	if cfg.Edge.Upstream != nil {
		return newCacheMode(cfg)
	}
	if cfg.Root == "" {
		return nil, errors.New("node: Config.Root is required")
	}
	sites, single, vmap, err := openSites(&cfg)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	var cstore *content.Store
	switch {
	case single != nil:
		cstore = single.store
	case sites[vhost.Default] != nil:
		cstore = sites[vhost.Default].store
	default:
		for _, st := range sites {
			cstore = st.store
			break
		}
	}
	s := &Server{
		cfg:       cfg,
		store:     cstore,
		parser:    httpwire.Parser{MaxHead: cfg.MaxHead, MaxHeaders: cfg.MaxHeaders},
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		done:      make(chan struct{}),
		stopSweep: make(chan struct{}),
		sites:     sites,
		single:    single,
		vmap:      vmap,
	}
	elsewhere := cfg.CachedElsewhere
	if elsewhere == nil && peerEnabled(&cfg) && cfg.CachePolicy == cache.CGDSF {
		elsewhere = func(key string) bool { return s.peer.CachedElsewhere(key) }
	}
	objs, err := store.Open(store.Config{
		Dir: cfg.DataDir, DiskBytes: cfg.DataBytes,
		MemoryBytes: cfg.CacheBytes, InlineBytes: cfg.Memory.Inline, Policy: cfg.CachePolicy, MaxObject: cfg.MaxObject,
		CachedElsewhere: elsewhere, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	s.objs, s.maxObject = objs, -1
	if sc := objs.Config(); sc.MemoryBytes > 0 {
		s.maxObject = sc.MaxObject
	}
	if cfg.AccessLog != nil {
		s.logBuf = bufio.NewWriterSize(cfg.AccessLog, 64<<10)
	}
	if peerEnabled(&cfg) {
		if err := s.startPeer(); err != nil {
			return nil, err
		}
	}
	s.usage.init()
	go s.sweep()
	return s, nil
}

// Objects returns the node's object store: the one index of the bodies it
// serves, site files and stored responses alike.
func (s *Server) Objects() *store.Store { return s.objs }

// Store returns the content store the server answers from (for Publish);
// with VHosts, the _default site's (or some site's when there is none).
func (s *Server) Store() *content.Store { return s.store }

// Serve accepts connections on ln until Shutdown, serving each on its own
// goroutine. It returns ErrServerClosed after Shutdown, or the accept error
// that stopped it (the listener closed by someone else); other accept
// errors are retried (internal/base/accept).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()

	err := accept.Loop(ln, func(nc net.Conn) {
		c := newConn(s, nc)
		if s.track(c) != nil {
			nc.Close() // over the limit (counted), or shutting down
			return
		}
		go c.serve()
	}, func(err error, wait time.Duration) {
		s.cfg.Logger.Warn("accept error; retrying", "err", err, "backoff", wait)
	})
	if s.draining.Load() {
		return ErrServerClosed
	}
	return fmt.Errorf("node: accept: %w", err)
}

// track registers c, closing the connections idle the longest to make room
// at Config.MaxConns; it refuses c (errConnLimit) when none is idle, and
// after Shutdown (ErrServerClosed).
func (s *Server) track(c *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return ErrServerClosed
	}
	if m := s.cfg.MaxConns; m > 0 && len(s.conns) >= m && s.makeRoom(max(m/16, 1)) == 0 {
		s.refused.Add(1)
		return errConnLimit
	}
	s.conns[c] = struct{}{}
	s.active.Add(1)
	return nil
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.active.Add(-1)
}

// Shutdown stops accepting, closes idle connections (and those holding only
// part of a request head), lets in-flight responses finish (their
// connections close after the batch being answered), and
// returns when no connection is left or ctx ends; then remaining
// connections are closed and ctx.Err() is returned. The access log is
// flushed either way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		s.mu.Lock()
		n := len(s.conns)
		for c := range s.conns {
			c.closeIfIdle()
		}
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
			s.mu.Lock()
			for c := range s.conns {
				c.forceClose()
			}
			s.mu.Unlock()
		case <-tick.C:
			continue
		}
		break
	}
	if s.peer != nil {
		s.peer.Close()
	}
	if s.edge != nil {
		s.edge.close()
	}
	s.objs.Close()
	s.stopOnce.Do(func() { close(s.stopSweep) })
	<-s.done
	s.flushLog()
	return err
}

// sweep enforces the read, idle and write timeouts and flushes the access
// log once a second. One coarse loop over all connections replaces a timer
// per connection per request.
func (s *Server) sweep() {
	defer close(s.done)
	interval := min(s.cfg.ReadTimeout, s.cfg.IdleTimeout, s.cfg.WriteTimeout) / 4
	interval = min(max(interval, 5*time.Millisecond), 250*time.Millisecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	lastFlush := time.Now()
	for {
		select {
		case <-s.stopSweep:
			return
		case now := <-t.C:
			ns := now.UnixNano()
			s.mu.Lock()
			for c := range s.conns {
				c.checkTimeout(ns)
			}
			s.mu.Unlock()
			if now.Sub(lastFlush) >= time.Second {
				s.flushLog()
				lastFlush = now
			}
		}
	}
}

func (s *Server) writeLog(b []byte) {
	s.logMu.Lock()
	s.logBuf.Write(b)
	s.logMu.Unlock()
}

// FlushLog writes the buffered access-log lines out now (they go out every
// second anyway): before a log rotation reopens the file, so the lines of
// the period that ended land in the file renamed for it.
func (s *Server) FlushLog() { s.flushLog() }

func (s *Server) flushLog() {
	if s.logBuf == nil {
		return
	}
	s.logMu.Lock()
	if err := s.logBuf.Flush(); err != nil {
		s.cfg.Logger.Error("access log flush", "err", err)
	}
	s.logMu.Unlock()
}
