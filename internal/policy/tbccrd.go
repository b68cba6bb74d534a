package policy

import (
	"time"
)

// TBCCRD is tag-based cache-cooperative request distribution (seed 000 §2.2,
// SPEC §3). The front keeps two tables:
//
//   - the connection table: client connection (Request.Conn) → node holding
//     it and last use, giving each node's count of open connections, the
//     seed's measure of load;
//   - the URL distribution table: per URL and node, disk_hit (the node has
//     the URL on disk; Config.DiskHolders, default every node), cache_hit
//     (the node's memory cache holds it), the URL's size and last access.
//
// A new connection (Holder −1 and Conn unknown) is first placed by wrr (the
// seed's SYN path). Each URL request is then tagged (§2.2.2): (1) the usable
// cache_hit node with the fewest connections; (2) if there is none, or it is
// at Config.LoadLimit connections, the usable disk_hit node with the fewest
// connections, whose cache_hit is set — the front mirrors each node's cache
// and, when Σ url_size exceeds the node's MAX_CACHE_SIZE (Config.CacheBytes),
// evicts by the node's replacement order (Config.NewReplacer, LRU by default)
// and clears those cache_hit flags; (3) the tag is the chosen node, its last
// access is updated, and Decision.Handoff is set when the tag differs from
// the node holding the connection, which then moves there (so a keep-alive
// connection may move several times). Objects above Config.NoCacheAbove
// (500 KiB) are never marked cached. Requests with Conn == 0 carry no
// connection state; for them in-flight requests (Node.Active) stand in for
// connections. Entries idle for Config.ConnTimeout are swept. Sizes: Request.Size when known in Pick, else what Done
// reports; an unknown size is accounted as 0 bytes until learned.
type TBCCRD struct {
	loadLimit   int
	noCache     int64
	cfg         Config
	wrr         WRR
	v           view
	conns       map[uint64]tbConn
	connCount   []int
	urls        map[string]*tbURL
	mirrors     []*mirror
	evictedNode int // node whose mirror is evicting (for the callback)
	onEvict     func(string)
	self        int // node holding the current request's connection, -1
	nextSweep   time.Duration
}

type tbConn struct {
	node int
	last time.Duration
}

// tbURL is one row of the URL distribution table.
type tbURL struct {
	size  int64 // -1 until known
	cells []tbCell
}

// tbCell is the (URL, node) entry of the URL distribution table.
type tbCell struct {
	disk, cache bool
	last        time.Duration
}

func newTBCCRD(cfg Config) *TBCCRD {
	p := &TBCCRD{loadLimit: cfg.LoadLimit, noCache: cfg.NoCacheAbove, cfg: cfg,
		conns: map[uint64]tbConn{}, urls: map[string]*tbURL{}}
	if p.noCache == 0 {
		p.noCache = 500 << 10
	}
	p.onEvict = func(u string) {
		if e := p.urls[u]; e != nil && p.evictedNode < len(e.cells) {
			e.cells[p.evictedNode].cache = false
		}
	}
	return p
}

// Name implements Policy.
func (p *TBCCRD) Name() string { return "tbccrd" }

// sync grows per-node state to the cluster size and empties the mirrors of
// nodes that went down or were removed: their memory is gone.
func (p *TBCCRD) sync(c *Cluster) {
	for len(p.mirrors) < len(c.Nodes) {
		i := len(p.mirrors)
		p.mirrors = append(p.mirrors, newMirror(p.cfg.cacheBytes(i), p.cfg.NewReplacer(i)))
		p.connCount = append(p.connCount, 0)
	}
	for i := range c.Nodes {
		if n := &c.Nodes[i]; !n.Up || n.Removed {
			p.evictedNode = i
			p.mirrors[i].clear(p.onEvict)
		}
	}
}

// row returns url's table row, creating it with the disk flags on first
// sight, and grows it when nodes were added.
func (p *TBCCRD) row(url string, n int) *tbURL {
	e := p.urls[url]
	if e == nil {
		e = &tbURL{size: -1}
		p.urls[url] = e
	}
	if len(e.cells) < n {
		old := len(e.cells)
		e.cells = append(e.cells, make([]tbCell, n-old)...)
		if p.cfg.DiskHolders == nil {
			for i := old; i < n; i++ {
				e.cells[i].disk = true
			}
		} else {
			for _, i := range p.cfg.DiskHolders(url) {
				if i >= old && i < n {
					e.cells[i].disk = true
				}
			}
		}
	}
	return e
}

// load is node i's open-connection count, not counting the request's own
// connection (a connection does not compete with itself, so on a tie it
// stays where it is and saves a handoff).
func (p *TBCCRD) load(c *Cluster, r *Request, i int) int {
	if r.Conn == 0 {
		return c.Nodes[i].Active
	}
	if i == p.self {
		return p.connCount[i] - 1
	}
	return p.connCount[i]
}

// sweep drops connection entries idle for longer than ConnTimeout.
func (p *TBCCRD) sweep(now time.Duration) {
	if now < p.nextSweep {
		return
	}
	p.nextSweep = now + p.cfg.ConnTimeout/2
	for id, ce := range p.conns {
		if now-ce.last > p.cfg.ConnTimeout {
			p.CloseConn(id)
		}
	}
}

// Pick implements Policy.
func (p *TBCCRD) Pick(c *Cluster, r *Request) Decision {
	if p.v.refresh(c) {
		p.sync(c)
	}
	p.sweep(r.Now)
	n := len(c.Nodes)
	holder := r.Holder
	p.self = -1
	if r.Conn != 0 {
		if ce, ok := p.conns[r.Conn]; ok {
			p.self = ce.node
			if holder < 0 {
				holder = ce.node
			}
		}
	}
	if holder < 0 || holder >= n || !c.Nodes[holder].Usable() {
		holder = p.wrr.Pick(c, r).Node
		if holder < 0 {
			return None
		}
	}
	e := p.row(r.URL, n)
	if r.Size >= 0 {
		p.setSize(r.URL, e, r.Size, r.Now)
	}
	// (1) least-connection cache holder.
	best := -1
	for i := range e.cells {
		if e.cells[i].cache && c.Nodes[i].Usable() &&
			(best < 0 || p.load(c, r, i) < p.load(c, r, best)) {
			best = i
		}
	}
	if best >= 0 && p.load(c, r, best) < p.loadLimit {
		p.mirrors[best].hit(r.URL, r.Now)
	} else {
		// (2) least-connection disk holder, which now caches the URL.
		d := -1
		for i := range e.cells {
			if e.cells[i].disk && c.Nodes[i].Usable() &&
				(d < 0 || p.load(c, r, i) < p.load(c, r, d)) {
				d = i
			}
		}
		switch {
		case d >= 0:
			best = d
			if e.size <= p.noCache {
				p.evictedNode = d
				e.cells[d].cache = p.mirrors[d].insert(r.URL, e.size, r.Now, p.onEvict)
			}
		case best < 0:
			return None // only unusable nodes have it
		}
		// else: no usable disk holder, stay on the overloaded cache holder.
	}
	// (3) tag and tables.
	e.cells[best].last = r.Now
	if r.Conn != 0 {
		if p.self >= 0 && p.self < len(p.connCount) {
			p.connCount[p.self]--
		}
		p.conns[r.Conn] = tbConn{node: best, last: r.Now}
		p.connCount[best]++
	}
	return Decision{Node: best, Handoff: best != holder, Fetch: -1}
}

// setSize records url's size and re-accounts it in every mirror holding it:
// evicting others if it grew, dropping it if it is now above the no-cache
// threshold.
func (p *TBCCRD) setSize(url string, e *tbURL, size int64, now time.Duration) {
	if e.size == size {
		return
	}
	e.size = size
	for i := range e.cells {
		if !e.cells[i].cache {
			continue
		}
		p.evictedNode = i
		if size > p.noCache {
			p.mirrors[i].remove(url)
			e.cells[i].cache = false
			continue
		}
		e.cells[i].cache = p.mirrors[i].insert(url, size, now, p.onEvict)
	}
}

// Done implements Policy: a size learned from the response (r.Size >= 0) is
// recorded in the URL table.
func (p *TBCCRD) Done(c *Cluster, node int, r *Request) {
	if r.Size < 0 {
		return
	}
	if e := p.urls[r.URL]; e != nil {
		p.setSize(r.URL, e, r.Size, r.Now)
	}
}

// CloseConn implements ConnCloser: the connection's entry leaves the table
// and its node's connection count drops (the seed's fin/rst path).
func (p *TBCCRD) CloseConn(conn uint64) {
	if ce, ok := p.conns[conn]; ok {
		delete(p.conns, conn)
		if ce.node < len(p.connCount) && p.connCount[ce.node] > 0 {
			p.connCount[ce.node]--
		}
	}
}

// TBCCRDTables is tbccrd's admin snapshot.
type TBCCRDTables struct {
	// Conns is the number of open connections in the connection table, and
	// ConnsPerNode their split by node (the seed's load measure).
	Conns        int   `json:"conns"`
	ConnsPerNode []int `json:"conns_per_node"`
	// URLs is the number of rows in the URL distribution table.
	URLs int `json:"urls"`
	// CachedBytes and CachedURLs describe each node's mirrored cache.
	CachedBytes []int64 `json:"cached_bytes"`
	CachedURLs  []int   `json:"cached_urls"`
	// Rows holds up to limit rows of the URL table.
	Rows []TBCCRDRow `json:"rows,omitempty"`
}

// TBCCRDRow is one URL's row: its size and the nodes whose disk_hit and
// cache_hit flags are set.
type TBCCRDRow struct {
	URL   string `json:"url"`
	Size  int64  `json:"size"`
	Disk  []int  `json:"disk"`
	Cache []int  `json:"cache"`
}

// Tables implements Tabler.
func (p *TBCCRD) Tables(limit int) any {
	t := TBCCRDTables{Conns: len(p.conns), ConnsPerNode: append([]int{}, p.connCount...), URLs: len(p.urls)}
	for _, m := range p.mirrors {
		t.CachedBytes = append(t.CachedBytes, m.used)
		t.CachedURLs = append(t.CachedURLs, len(m.size))
	}
	for u, e := range p.urls {
		if len(t.Rows) >= limit {
			break
		}
		row := TBCCRDRow{URL: u, Size: e.size, Disk: []int{}, Cache: []int{}}
		for i, cell := range e.cells {
			if cell.disk {
				row.Disk = append(row.Disk, i)
			}
			if cell.cache {
				row.Cache = append(row.Cache, i)
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
