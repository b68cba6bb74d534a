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
// cache_hit node with the fewest connections (ties: the holder, else the
// first after it); (2) if there is none, or it is
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
// connections. Entries idle for Config.ConnTimeout are swept. Sizes come
// from Request.Size in Pick when known, else from what Done reports; an
// unknown size is accounted as 0 bytes until learned.
//
// Both tables are bounded. The URL table holds at most Config.MaxURLs rows
// (and MaxURLBytes of URL text), evicting the least recently requested URL
// (see urlTable); a URL a node answered 404, 410 or 403 for (Request.Status
// in Done) leaves it at once, so a scan of missing URLs on the relay path
// leaves nothing behind. The connection table holds one entry per open
// client connection, so the front's connection limit bounds it; entries
// whose close was never reported go after ConnTimeout.
//
// Build it with New("tbccrd", cfg); the zero value is not ready for use.
type TBCCRD struct {
	loadLimit int
	cfg       Config
	wrr       WRR
	v         view
	conns     map[uint64]tbConn
	connCount []int
	t         *urlTable
	self      int // node holding the current request's connection, -1
	nextSweep time.Duration
	tags      *tagLog // the changes of the tag table the nodes share; nil until TagUpdates
}

type tbConn struct {
	node int
	last time.Duration
}

func newTBCCRD(cfg Config) *TBCCRD {
	noCache := cfg.NoCacheAbove
	if noCache == 0 {
		noCache = 500 << 10
	}
	p := &TBCCRD{loadLimit: cfg.LoadLimit, cfg: cfg, conns: map[uint64]tbConn{}}
	p.t = newURLTable(&p.cfg, noCache)
	return p
}

// Name implements Policy.
func (p *TBCCRD) Name() string { return "tbccrd" }

// Traits implements Describer: content-aware at the holder, behind the tag front that
// forwards packets and tags requests (seed 000 §2.2); holders hand off.
func (p *TBCCRD) Traits() Traits {
	return Traits{Placement: AtHolder, Front: FrontTag, Active: true,
		Keys: []string{"load_limit", "cache_mb", "node_cache", "no_cache_kb", "max_urls", "max_url_mb"}}
}

// sync grows per-node state to the cluster size and empties the mirrors of
// nodes that went down or were removed: their memory is gone.
func (p *TBCCRD) sync(c *Cluster) {
	p.t.sync(c)
	for len(p.connCount) < len(c.Nodes) {
		p.connCount = append(p.connCount, 0)
	}
}

// leastLoaded returns the usable node holding row e's URL in cache (disk:
// on disk) with the least load, scanning from node from so that the first
// after it wins ties, or -1 when no usable node holds it. With roomy, only
// nodes whose cache mirror has room for the URL without evicting count.
func (p *TBCCRD) leastLoaded(c *Cluster, r *Request, e *urlRow, from int, disk, roomy bool) int {
	n := len(c.Nodes)
	best := -1
	for k := range n {
		i := (from + k) % n
		if i < len(e.cells) && (disk && e.cells[i].disk || !disk && e.cells[i].cache) && c.Nodes[i].Usable() &&
			(!roomy || p.t.room(i, e.size)) && (best < 0 || p.load(c, r, i) < p.load(c, r, best)) {
			best = i
		}
	}
	return best
}

// missNode is the disk holder step (2) sends a URL no usable node has in
// memory to: the least loaded one (seed 000 §2.2.2), except that when the
// nodes' caches have admission (their mirrors are Admitters, as shoal's
// GDSF stores are), the least loaded among those with room for the URL
// comes first. A full node with admission turns most newcomers away, and
// its connections stay on it on equal load, so misses kept landing on
// full nodes that re-read them from disk while another node's cache was a
// quarter empty (measured: docs/benchmarks.md).
func (p *TBCCRD) missNode(c *Cluster, r *Request, e *urlRow, from int) int {
	if p.t.admits() {
		if d := p.leastLoaded(c, r, e, from, true, true); d >= 0 {
			return d
		}
	}
	return p.leastLoaded(c, r, e, from, true, false)
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
	id, e := p.t.row(r.URL, n, c)
	if r.Size >= 0 {
		p.t.setSize(id, r.Size)
	}
	// (1) least-connection cache holder. Both scans start at the holder,
	// so among equally loaded candidates the connection stays where it is
	// (no handoff) or goes to the first one after it: with the lowest index
	// winning ties, every new URL went to node 0 whenever the nodes showed
	// equal counts, as they do at low concurrency.
	best := p.leastLoaded(c, r, e, holder, false, false)
	if best >= 0 && p.load(c, r, best) < p.loadLimit {
		p.t.hit(id, best, r.Now)
	} else {
		// (2) least-connection disk holder, which now caches the URL
		// (missNode: one with room first when the nodes admit).
		d := p.missNode(c, r, e, holder)
		switch {
		case d >= 0:
			best = d
			p.t.insert(id, d, r.Now)
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

// Done implements Policy: a size learned from the response (r.Size >= 0) is
// recorded in the URL table; a URL the node could not serve
// (unservable(r.Status)) leaves it, cache flags and all.
func (p *TBCCRD) Done(c *Cluster, node int, r *Request) {
	if unservable(r.Status) {
		p.t.forget(r.URL)
		return
	}
	if r.Size < 0 {
		return
	}
	if id, ok := p.t.lookup(r.URL); ok {
		p.t.setSize(id, r.Size)
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
	// URLs is the number of rows in the URL distribution table, at most
	// MaxURLs; Evicted counts the rows that left it to make room.
	URLs    int    `json:"urls"`
	Evicted uint64 `json:"evicted"`
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
	t := TBCCRDTables{Conns: len(p.conns), ConnsPerNode: append([]int{}, p.connCount...), URLs: p.t.idx.len(), Evicted: p.t.idx.evicted}
	for _, nc := range p.t.caches {
		t.CachedBytes = append(t.CachedBytes, nc.used)
		t.CachedURLs = append(t.CachedURLs, nc.objects)
	}
	for i, e := range p.t.rows {
		if len(t.Rows) >= limit {
			break
		}
		if id, ok := p.t.idx.lookup(e.url); !ok || int(id) != i {
			continue // a free row
		}
		row := TBCCRDRow{URL: e.url, Size: e.size, Disk: []int{}, Cache: []int{}}
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
