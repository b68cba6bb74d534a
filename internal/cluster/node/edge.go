package node

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/httpcache"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/store"
)

// EdgeConfig turns a node into a shared HTTP cache in front of an upstream
// ("cache mode", `shoal node --origin URL`): every request is answered from
// the node's store when RFC 9111 allows it (internal/base/httpcache makes
// every decision) and forwarded to Upstream otherwise. Zero fields take
// the documented defaults; a nil Upstream leaves cache mode off.
type EdgeConfig struct {
	// Upstream receives misses, revalidations and every method a cache
	// does not answer.
	Upstream Upstream
	// Cache holds the RFC's open choices (heuristic freshness, the
	// Surrogate-Control device name). Default httpcache.DefaultConfig().
	Cache httpcache.Config
	// Name is this cache's name in Cache-Status and Via. Default "shoal".
	Name string
	// Scheme is the scheme clients reached this node by, part of every
	// cache key. Default "http".
	Scheme string
	// DataDir holds the disk tier of stored responses (internal/base/store);
	// "" stores them in a temporary directory removed at Shutdown.
	DataDir string
	// MemoryBytes bounds the stored responses held in memory. Default
	// Config.CacheBytes.
	MemoryBytes int64
	// DiskBytes bounds the disk tier. Default store.DefaultDiskBytes.
	DiskBytes int64
	// OnEvict is told the store key of each entry evicted to make room
	// (the CDN directory unregisters it); nil: nobody is told.
	OnEvict func(key string)
	// UpstreamIdle bounds how long a fetch may wait for the upstream's
	// next byte (head or body) before it is abandoned, so that requests
	// collapsed on it are not held forever. Default DefaultUpstreamIdle.
	UpstreamIdle time.Duration
	// OnHit is told the store key of each response answered from the
	// store (the CDN tier counts requests per copy for replication); nil:
	// nobody is told. It runs on the request's goroutine: keep it short.
	OnHit func(key string)
	// OnStored is told the primary cache key of each response committed to
	// the store (the CDN tier registers the copy in its directory); nil:
	// nobody is told.
	OnStored func(key string)
}

// Defaults for EdgeConfig.
const (
	DefaultEdgeName   = "shoal"
	DefaultEdgeScheme = "http"
	// DefaultUpstreamIdle is EdgeConfig.UpstreamIdle's default: the
	// origin transport's wait for a response head, doubled.
	DefaultUpstreamIdle = 2 * OriginHeaderTimeout
)

// EdgeStats counts a cache-mode node's work, for /.shoal/status and the
// CDN tier's metrics. Hits were answered from the store without asking
// anyone; Misses fetched; Revalidated were confirmed by a 304; Stale
// answers were served stale (stale-while-revalidate, stale-if-error);
// Bypass went through uncached (methods a cache does not answer);
// Collapsed waited on another request's fetch; UpstreamBytes are the body
// bytes received from the upstream; Errors were answered 502 or 504.
type EdgeStats struct {
	Hits          int64 `json:"hits"`
	Misses        int64 `json:"misses"`
	Revalidated   int64 `json:"revalidated"`
	Stale         int64 `json:"stale"`
	Bypass        int64 `json:"bypass"`
	Collapsed     int64 `json:"collapsed"`
	Stored        int64 `json:"stored"`
	Invalidated   int64 `json:"invalidated"`
	UpstreamBytes int64 `json:"upstream_bytes"`
	Errors        int64 `json:"errors"`
}

// edge is a Server's cache-mode state.
type edge struct {
	cfg    EdgeConfig
	up     Upstream
	store  *store.Store
	tmpDir string // DataDir made for us, removed at close
	via    string // our Via member

	// plainGet and plainHead are httpcache's view of a GET and a HEAD
	// without caching fields (edgeFastHit's requests).
	plainGet, plainHead httpcache.Request
	// local holds the conns ServeLocal lends to a front's requests.
	local sync.Pool

	mu      sync.Mutex
	flights map[string]*flight // fetches in progress, by the key they will store
	decoded decodedCache       // hit entries, decoded (lookup)

	hits, misses, revalidated, stale, bypass, collapsed atomic.Int64
	stored, invalidated, upstreamBytes, errors          atomic.Int64
}

func newEdge(cfg EdgeConfig, cacheBytes int64, logger *slog.Logger) (*edge, error) {
	if cfg.Cache == (httpcache.Config{}) {
		cfg.Cache = httpcache.DefaultConfig()
	}
	if cfg.Name == "" {
		cfg.Name = DefaultEdgeName
	}
	if cfg.Scheme == "" {
		cfg.Scheme = DefaultEdgeScheme
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = cacheBytes
	}
	if cfg.UpstreamIdle <= 0 {
		cfg.UpstreamIdle = DefaultUpstreamIdle
	}
	e := &edge{cfg: cfg, up: cfg.Upstream, via: "1.1 " + cfg.Name, flights: map[string]*flight{},
		plainGet: httpcache.ParseRequest("GET", nil), plainHead: httpcache.ParseRequest("HEAD", nil)}
	dir := cfg.DataDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "shoal-edge-"); err != nil {
			return nil, fmt.Errorf("node: cache mode: %w", err)
		}
		e.tmpDir = dir
	}
	st, err := store.Open(store.Config{Dir: dir, MemoryBytes: cfg.MemoryBytes, DiskBytes: cfg.DiskBytes,
		OnEvict: cfg.OnEvict, Logger: logger})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("node: cache mode: %w", err)
	}
	e.store = st
	return e, nil
}

// close closes the store and removes a temporary data directory.
func (e *edge) close() {
	if e.store != nil {
		e.store.Close()
	}
	if e.tmpDir != "" {
		os.RemoveAll(e.tmpDir)
	}
}

// Stats returns the counters.
func (e *edge) Stats() EdgeStats {
	return EdgeStats{
		Hits: e.hits.Load(), Misses: e.misses.Load(), Revalidated: e.revalidated.Load(),
		Stale: e.stale.Load(), Bypass: e.bypass.Load(), Collapsed: e.collapsed.Load(),
		Stored: e.stored.Load(), Invalidated: e.invalidated.Load(),
		UpstreamBytes: e.upstreamBytes.Load(), Errors: e.errors.Load(),
	}
}

// EdgeStats returns the cache-mode counters (zero when cache mode is off).
func (s *Server) EdgeStats() EdgeStats {
	if s.edge == nil {
		return EdgeStats{}
	}
	return s.edge.Stats()
}

// cachedResp is a stored response as cache mode uses it: the decoded
// metadata and its header prepared for writing. A hit on an entry whose
// metadata is unchanged reuses the same cachedResp (decodedCache), so it
// is read-only once made.
type cachedResp struct {
	*httpcache.Stored
	hp headParts
}

func newCachedResp(st *httpcache.Stored) *cachedResp {
	return &cachedResp{Stored: st, hp: makeHeadParts(st.Header, false)}
}

// stored is the response's Stored, nil for none.
func (c *cachedResp) stored() *httpcache.Stored {
	if c == nil {
		return nil
	}
	return c.Stored
}

// lookup finds what is stored for a request: the entry at the primary key,
// or, when that is a Vary marker, the variant the request's header selects
// (httpcache.VariantKey). It returns the key the response would be stored
// under (the variant key when the URL is known to vary), and the stored
// response with its handle (nil and an invalid handle when nothing usable
// is stored; the caller releases a valid handle).
func (e *edge) lookup(primary string, h http.Header) (string, *cachedResp, store.Handle) {
	hd, ok := e.store.Get(primary)
	if !ok {
		return primary, nil, store.Handle{}
	}
	key := primary
	if names, isMarker := decodeMarker(hd.Meta()); isMarker {
		hd.Release()
		key = httpcache.VariantKey(primary, names, h)
		if hd, ok = e.store.Get(key); !ok {
			return key, nil, store.Handle{}
		}
	}
	cr, err := e.decoded.get(key, hd.Meta())
	if err != nil {
		hd.Release()
		e.store.Remove(key)
		return key, nil, store.Handle{}
	}
	return key, cr, hd
}

// decodedCache keeps the decoded form of recently hit entries, so that a
// hit does not decode its metadata and lay out its header again. An entry
// is valid while the store hands out the same metadata bytes: compared as
// bytes, which costs nothing while they are the same bytes in memory (the
// store keeps a memory-tier entry's metadata until it changes), and stays
// right when the store reused that memory. Bounded by decodedMax,
// dropping an arbitrary entry when full.
type decodedCache struct {
	mu sync.Mutex
	m  map[string]decodedEntry
}

type decodedEntry struct {
	key  string // the map's key, for find's callers
	meta []byte
	cr   *cachedResp
}

// decodedMax bounds the decoded entries kept: enough for a node's hot set.
const decodedMax = 4096

func (d *decodedCache) get(key string, meta []byte) (*cachedResp, error) {
	if len(meta) == 0 {
		return nil, httpcache.ErrBadStored
	}
	d.mu.Lock()
	de, ok := d.m[key]
	d.mu.Unlock()
	if ok && string(de.meta) == string(meta) { // the same memory: one pointer comparison
		return de.cr, nil
	}
	st, err := decodeEntry(meta)
	if err != nil {
		return nil, err
	}
	cr := newCachedResp(st)
	d.mu.Lock()
	if d.m == nil {
		d.m = make(map[string]decodedEntry)
	}
	if len(d.m) >= decodedMax {
		for k := range d.m {
			delete(d.m, k)
			break
		}
	}
	d.m[key] = decodedEntry{key: key, meta: meta, cr: cr}
	d.mu.Unlock()
	return cr, nil
}

// find returns the entry decoded for key, if any. key may be a view of a
// buffer (it is not kept); the entry's own key is a string that may be.
func (d *decodedCache) find(key string) (decodedEntry, bool) {
	d.mu.Lock()
	de, ok := d.m[key]
	d.mu.Unlock()
	return de, ok
}

// Entry metadata starts with a kind byte: a stored response, or a Vary
// marker naming the request fields the URL's responses vary on (its
// variants are stored under httpcache.VariantKey).
const (
	metaResponse = 'R'
	metaVary     = 'V'
)

func encodeEntry(st *httpcache.Stored) []byte { return st.Encode([]byte{metaResponse}) }

func decodeEntry(meta []byte) (*httpcache.Stored, error) {
	if len(meta) == 0 || meta[0] != metaResponse {
		return nil, httpcache.ErrBadStored
	}
	return httpcache.DecodeStored(meta[1:])
}

func encodeMarker(names []string) []byte {
	b := []byte{metaVary}
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, n...)
	}
	return b
}

func decodeMarker(meta []byte) ([]string, bool) {
	if len(meta) == 0 || meta[0] != metaVary {
		return nil, false
	}
	var names []string
	start := 1
	for i := 1; i <= len(meta); i++ {
		if i == len(meta) || meta[i] == ',' {
			if i > start {
				names = append(names, string(meta[start:i]))
			}
			start = i + 1
		}
	}
	return names, true
}

// invalidate removes every stored response of the primary keys: the entry
// at each, and all its variants.
func (e *edge) invalidate(keys []string) {
	for _, k := range keys {
		if e.store.Remove(k) {
			e.invalidated.Add(1)
		}
		var variants []string
		e.store.Walk(httpcache.VariantPrefix(k), func(key string, _ int64) bool {
			variants = append(variants, key)
			return true
		})
		for _, v := range variants {
			if e.store.Remove(v) {
				e.invalidated.Add(1)
			}
		}
	}
}

// now is the edge's clock, one place to read it.
func (e *edge) now() time.Time { return time.Now() }

// newCacheMode builds a Server in cache mode: no site, the edge's store in
// place of the file cache.
func newCacheMode(cfg Config) (*Server, error) {
	s := &Server{
		cfg:       cfg,
		parser:    httpwire.Parser{MaxHead: cfg.MaxHead, MaxHeaders: cfg.MaxHeaders},
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		done:      make(chan struct{}),
		stopSweep: make(chan struct{}),
	}
	var err error
	if s.edge, err = newEdge(cfg.Edge, cfg.CacheBytes, cfg.Logger); err != nil {
		return nil, err
	}
	// The edge's store is the node's one object store: its status,
	// digest and shutdown see the stored responses.
	s.objs, s.maxObject = s.edge.store, -1
	if sc := s.objs.Config(); sc.MemoryBytes > 0 {
		s.maxObject = sc.MaxObject
	}
	if cfg.AccessLog != nil {
		s.logBuf = bufio.NewWriterSize(cfg.AccessLog, 64<<10)
	}
	s.usage.init()
	go s.sweep()
	return s, nil
}
