package policy

import "time"

// urlTable is the front's per-URL state shared by tbccrd and weblins: a dense
// id per URL and, per (URL, node), the cell of seed 000's URL distribution
// table (§2.2.1: disk_hit, cache_hit, last access; the URL's size is per
// row). It also mirrors each node's memory cache — byte budget
// (MAX_CACHE_SIZE) and replacement order — so cache_hit flags fall exactly
// when the node would evict. Unknown sizes (< 0) are accounted as 0 bytes
// until learned; objects above noCache are never cached. URL strings are
// kept as map keys and must be immutable.
//
// The rows are bounded (Config.MaxURLs, Config.MaxURLBytes) by a urlIndex:
// the least recently requested URL leaves to make room, and with it its
// cache_hit flags, so the mirror forgets a copy the node may still hold
// (the next request for that URL goes to a disk holder, which caches it
// again: one request's locality, not correctness). An evicted row's id and
// cell slice are reused by the next new URL, so a scan allocates nothing
// per URL beyond the map's own key once the table is full.
type urlTable struct {
	cfg     *Config
	noCache int64
	idx     *urlIndex
	rows    []urlRow
	caches  []nodeCache
	// onDrop, if set, clears the owner's own per-id state (weblins' docs)
	// when a row leaves; it runs after the row's cache flags are cleared.
	onDrop func(id int32)
	// storage is the Cluster.Storage the disk flags were last set from.
	storage *Storage
	// onCache, if set, is told the URL of every row whose cache_hit flag
	// changes on some node (tbccrd's shared tag table, tbccrd_tag.go); it
	// runs before a dropped row forgets its URL.
	onCache func(url string)
}

type urlRow struct {
	url   string
	size  int64
	cells []urlCell
}

type urlCell struct {
	disk, cache bool
	last        time.Duration
}

// nodeCache is the mirror of one node's memory cache.
type nodeCache struct {
	limit, used int64
	objects     int
	repl        Replacer
}

func newURLTable(cfg *Config, noCache int64) *urlTable {
	t := &urlTable{cfg: cfg, noCache: noCache, idx: newURLIndex(cfg.MaxURLs, cfg.MaxURLBytes)}
	t.idx.onEvict = t.drop
	return t
}

// drop clears row id as it leaves the index: it is uncached on every node
// (so the mirrors' byte counts and replacers forget it) and emptied for
// reuse, keeping its cell slice's memory.
func (t *urlTable) drop(id int32) {
	e := &t.rows[id]
	for i := range e.cells {
		t.remove(id, i)
	}
	if t.onDrop != nil {
		t.onDrop(id)
	}
	e.url, e.size, e.cells = "", -1, e.cells[:0]
}

// forget drops url's row, if any (the URL proved unservable: see
// unservable).
func (t *urlTable) forget(url string) {
	if id, ok := t.idx.lookup(url); ok {
		t.idx.remove(id)
	}
}

// grow extends per-node state to n nodes.
func (t *urlTable) grow(n int) {
	for len(t.caches) < n {
		i := len(t.caches)
		t.caches = append(t.caches, nodeCache{limit: t.cfg.cacheBytes(i), repl: t.cfg.NewReplacer(i)})
	}
}

// sync grows the table to the cluster's size and empties the mirrors of
// nodes that went down or were removed: their memory is gone. tbccrd and
// weblins call it before each decision.
func (t *urlTable) sync(c *Cluster) bool {
	t.grow(len(c.Nodes))
	for i := range c.Nodes {
		if n := &c.Nodes[i]; !n.Up || n.Removed {
			t.clear(i)
		}
	}
	if c.Storage == t.storage {
		return false
	}
	// The placement changed (a node joined or left, or partitioning
	// started): every row's disk flags follow the new holders.
	t.storage = c.Storage
	if t.cfg.DiskHolders == nil {
		var buf [16]int
		for id := range t.rows {
			e := &t.rows[id]
			if e.url == "" {
				continue
			}
			for i := range e.cells {
				e.cells[i].disk = c.Storage == nil
			}
			if c.Storage != nil {
				for _, i := range c.Holders(buf[:0], e.url) {
					if i < len(e.cells) {
						e.cells[i].disk = true
					}
				}
			}
		}
	}
	return true
}

// row returns url's id and row, creating it on first sight with the disk
// flags from Config.DiskHolders, else the cluster view's Storage (default:
// every node), and growing its cells to n nodes.
func (t *urlTable) row(url string, n int, c *Cluster) (int32, *urlRow) {
	id, added := t.idx.get(url)
	if int(id) == len(t.rows) {
		t.rows = append(t.rows, urlRow{size: -1})
	}
	e := &t.rows[id]
	if added {
		e.url = url
	}
	if len(e.cells) < n {
		old := len(e.cells)
		if cap(e.cells) >= n {
			e.cells = e.cells[:n]
			clear(e.cells[old:])
		} else {
			e.cells = append(e.cells, make([]urlCell, n-old)...)
		}
		switch {
		case t.cfg.DiskHolders == nil && c != nil && c.Storage != nil:
			// Partitioned storage: the nodes the cluster view says hold it.
			for i := old; i < n; i++ {
				e.cells[i].disk = c.Stores(i, url)
			}
		case t.cfg.DiskHolders == nil:
			for i := old; i < n; i++ {
				e.cells[i].disk = true
			}
		default:
			for _, i := range t.cfg.DiskHolders(url) {
				if i >= old && i < n {
					e.cells[i].disk = true
				}
			}
		}
	}
	return id, e
}

// lookup returns url's id, or false, without touching the recency order.
func (t *urlTable) lookup(url string) (int32, bool) {
	return t.idx.lookup(url)
}

// cached reports whether node's cache holds id.
func (t *urlTable) cached(id int32, node int) bool {
	c := t.rows[id].cells
	return node < len(c) && c[node].cache
}

// charge is what an object of size bytes costs a node's budget
// (Config.NodeFootprint); an unknown size (negative) costs nothing.
func (t *urlTable) charge(size int64) int64 {
	if size < 0 {
		return 0
	}
	if f := t.cfg.NodeFootprint; f != nil {
		return f(size)
	}
	return size
}

// room reports whether node's cache mirror takes an object of size bytes
// (unknown: < 0) without evicting.
func (t *urlTable) room(node int, size int64) bool {
	if node >= len(t.caches) {
		return false
	}
	nc := &t.caches[node]
	return size <= t.noCache && nc.used+t.charge(size) <= nc.limit
}

// admits reports whether the mirrors are of caches with admission
// (Admitter replacers).
func (t *urlTable) admits() bool {
	if len(t.caches) == 0 {
		return false
	}
	_, ok := t.caches[0].repl.(Admitter)
	return ok
}

// insert caches id on node (or refreshes it), then evicts in replacement
// order while the node's Σ size exceeds its budget, clearing the victims'
// cache_hit flags. It reports whether id is cached afterwards (not if it is
// above the no-cache threshold or the budget, or was itself the victim).
func (t *urlTable) insert(id int32, node int, now time.Duration) bool {
	e := &t.rows[id]
	size := t.charge(e.size)
	nc := &t.caches[node]
	if e.size > t.noCache || size > nc.limit {
		t.remove(id, node)
		return false
	}
	if e.cells[node].cache {
		nc.repl.Hit(id, now)
		return true
	}
	e.cells[node].cache = true
	if t.onCache != nil {
		t.onCache(e.url)
	}
	nc.used += size
	nc.objects++
	nc.repl.Add(id, size, now)
	if !t.admitted(id, node) {
		return false
	}
	t.evict(node)
	return e.cells[node].cache
}

// Admitter is implemented by a Replacer that may turn an object away
// (NodeCacheMirrors' mirrors of nodes whose caches have admission, as
// shoal's stores do): Holds reports whether id is cached after an Add or
// a Resize. Such a replacer may also evict to make room and then turn the
// newcomer away, so its Victim names only objects it already evicted.
type Admitter interface {
	Holds(id int32) bool
}

// admitted settles node's mirror after an Add or Resize of id: an
// Admitter's victims leave the table even if the budget holds, and id
// leaves it when the replacer turned it away. It reports whether id is
// still cached on node.
func (t *urlTable) admitted(id int32, node int) bool {
	nc := &t.caches[node]
	a, ok := nc.repl.(Admitter)
	if !ok {
		return true
	}
	for {
		v, ok := nc.repl.Victim()
		if !ok {
			break
		}
		if !t.remove(v, node) {
			nc.repl.Remove(v)
		}
	}
	if !a.Holds(id) {
		t.remove(id, node)
		return false
	}
	return true
}

// evict drops objects from node in replacement order until its budget holds.
func (t *urlTable) evict(node int) {
	nc := &t.caches[node]
	for nc.used > nc.limit {
		v, ok := nc.repl.Victim()
		if !ok {
			return
		}
		if !t.remove(v, node) {
			nc.repl.Remove(v) // replacer out of step with the flags: drop it
		}
	}
}

// hit records an access to id cached on node.
func (t *urlTable) hit(id int32, node int, now time.Duration) {
	t.caches[node].repl.Hit(id, now)
}

// remove uncaches id from node and reports whether it was cached.
func (t *urlTable) remove(id int32, node int) bool {
	e := &t.rows[id]
	if node >= len(e.cells) || !e.cells[node].cache {
		return false
	}
	e.cells[node].cache = false
	if t.onCache != nil {
		t.onCache(e.url)
	}
	nc := &t.caches[node]
	nc.used -= t.charge(e.size)
	nc.objects--
	nc.repl.Remove(id)
	return true
}

// setSize records id's size and re-accounts it on every node caching it:
// dropping it when it is now above the no-cache threshold or a node's
// budget, evicting others when it grew.
func (t *urlTable) setSize(id int32, size int64) {
	e := &t.rows[id]
	if e.size == size {
		return
	}
	old := t.charge(e.size)
	e.size = size
	for i := range e.cells {
		if !e.cells[i].cache {
			continue
		}
		nc := &t.caches[i]
		nc.used += t.charge(size) - old
		if size > t.noCache || t.charge(size) > nc.limit {
			t.remove(id, i)
			continue
		}
		if rs, ok := nc.repl.(Resizer); ok {
			rs.Resize(id, t.charge(size))
			if !t.admitted(id, i) {
				continue
			}
		}
		t.evict(i)
	}
}

// clear empties node's cache (the node went down or left: its memory is
// gone).
func (t *urlTable) clear(node int) {
	nc := &t.caches[node]
	for nc.objects > 0 {
		v, ok := nc.repl.Victim()
		if !ok {
			break
		}
		if !t.remove(v, node) {
			nc.repl.Remove(v)
		}
	}
}
