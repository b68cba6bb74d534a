package policy

import (
	"slices"
	"strings"
	"time"
)

// nominalSize stands in for an object's size in weblins' expected-load
// accounting until the size is known (a typical small web object).
const nominalSize = 8 << 10

// Weblins is seed 001's request distribution (SPEC §3). A layer-4 switch
// places each new connection on a *first member* by wrr or, with
// Config.FirstMember "lc", least connections (Request.Holder when
// the connection is already placed). Every document has an *owner*, the node
// whose disk holds it: on first sight a URL is placed, greedily, on the
// usable node with the least assigned expected load, where a node's expected
// load is Σ requests × size of the documents it owns (halved every Period so
// it tracks recent popularity); a URL whose owner left is placed again. Then:
//
//  1. the first member serves the request itself, from its own memory or
//     disk (Fetch −1), when it caches the file, or the file is in the
//     popular set (replicated on every node), or the owner is overloaded
//     (owner Active ≥ T, Config.OverloadConns = 130) — in the last case
//     fetching from the owner's memory (Fetch = owner) if the owner caches
//     it, else reading the disk, and keeping a copy;
//  2. otherwise a large file (size ≥ S, Config.HandoffSize = 100 KiB) is
//     handed off to the owner (Node = owner, Handoff when owner ≠ first),
//     which caches it;
//  3. otherwise (small) the first member serves it with Fetch = owner: the
//     owner reads it into its memory and ships it; the first member keeps no
//     copy, so the cluster's memory holds each file once.
//
// The popular set is rebuilt every Period from that period's request
// counts: the PopularN most requested files, or, with PopularBytes > 0, the
// most requested files until their sizes fill that budget; ties go to the
// smaller URL. Popular files live outside the mirrored cache budgets. Files
// above Config.NoCacheAbove (default S) are not cached. An unknown size
// (Request.Size −1 and none learned in Done) counts as small.
//
// The documents live in the URL table, bounded by Config.MaxURLs and
// MaxURLBytes with LRU eviction (see urlTable): an evicted document loses
// its owner, count and popular flag and is placed afresh if it comes back.
// A URL a node answered 404, 410 or 403 for (Request.Status in Done) is
// dropped at once, so a scan of missing URLs on the relay path leaves
// nothing behind.
//
// Build it with New("weblins", cfg); the zero value is not ready for use.
type Weblins struct {
	cfg      Config
	l4       Policy // first-member choice: wrr or lc
	v        view
	t        *urlTable
	docs     []wlDoc // by URL id
	assigned []float64
	popular  []bool  // by URL id
	popIDs   []int32 // ids with popular set, for clearing
	touched  []int32 // ids requested this period
	next     time.Duration
	started  bool
}

// wlDoc is weblins' per-document state beside the URL table row.
type wlDoc struct {
	owner   int
	count   int  // requests this period
	touched bool // id is in Weblins.touched
}

func newWeblins(cfg Config) *Weblins {
	noCache := cfg.NoCacheAbove
	if noCache == 0 {
		noCache = cfg.HandoffSize
	}
	p := &Weblins{cfg: cfg, l4: &WRR{}}
	if cfg.FirstMember == "lc" {
		p.l4 = &LC{}
	}
	p.t = newURLTable(&p.cfg, noCache)
	p.t.onDrop = p.drop
	return p
}

// drop forgets document id as its URL leaves the table. The id may stay in
// touched (rebuild skips it while its count is 0, and a new URL reusing the
// id takes the entry over); it leaves the popular set at once.
func (p *Weblins) drop(id int32) {
	if int(id) >= len(p.docs) {
		return
	}
	d := &p.docs[id]
	d.owner, d.count = -1, 0
	if p.popular[id] {
		p.popular[id] = false
		if i := slices.Index(p.popIDs, id); i >= 0 {
			p.popIDs = slices.Delete(p.popIDs, i, i+1)
		}
	}
}

// Name implements Policy.
func (p *Weblins) Name() string { return "weblins" }

// Traits implements Describer: content-aware at the first member a layer-4 switch placed
// the connection on (seed 001), which hands large files off to their owner.
func (p *Weblins) Traits() Traits {
	return Traits{Placement: AtHolder, Front: FrontL4, Active: true,
		Keys: []string{"period", "cache_mb", "node_cache", "no_cache_kb", "handoff_kb", "overload_conns", "popular_n", "max_urls", "max_url_mb"}}
}

func (p *Weblins) sync(c *Cluster) {
	if p.t.sync(c) {
		// The placement changed: owners are chosen again among the new
		// holders on their next request.
		for i := range p.docs {
			p.docs[i].owner = -1
		}
	}
	for len(p.assigned) < len(c.Nodes) {
		p.assigned = append(p.assigned, 0)
	}
}

// place gives d the usable node with the least assigned expected load,
// among the nodes that store url when the site is partitioned (so the
// owner reads its own disk; seed 001 spreads documents over the disks).
func (p *Weblins) place(c *Cluster, d *wlDoc, url string) bool {
	best := -1
	if c.Storage != nil {
		var buf [16]int
		for _, i := range c.Holders(buf[:0], url) {
			if i < len(c.Nodes) && c.Nodes[i].Usable() && (best < 0 || p.assigned[i] < p.assigned[best]) {
				best = i
			}
		}
		if best >= 0 {
			d.owner = best
			return true
		}
	}
	for i := range c.Nodes {
		if c.Nodes[i].Usable() && (best < 0 || p.assigned[i] < p.assigned[best]) {
			best = i
		}
	}
	d.owner = best
	return best >= 0
}

// weight is a document's expected-load contribution per request: its size,
// or nominalSize while unknown.
func weight(size int64) float64 {
	if size < 0 {
		return nominalSize
	}
	return float64(size)
}

// rebuild recomputes the popular set from this period's counts.
func (p *Weblins) rebuild() {
	for _, id := range p.popIDs {
		p.popular[id] = false
	}
	p.popIDs = p.popIDs[:0]
	slices.SortFunc(p.touched, func(a, b int32) int {
		if ca, cb := p.docs[a].count, p.docs[b].count; ca != cb {
			return cb - ca
		}
		return strings.Compare(p.t.rows[a].url, p.t.rows[b].url)
	})
	var bytes int64
	for _, id := range p.touched {
		if p.docs[id].count == 0 {
			continue // dropped from the table since it was requested
		}
		if p.cfg.PopularBytes > 0 {
			s := max(p.t.rows[id].size, 0)
			if bytes+s > p.cfg.PopularBytes {
				continue
			}
			bytes += s
		} else if len(p.popIDs) >= p.cfg.PopularN {
			break
		}
		p.popular[id] = true
		p.popIDs = append(p.popIDs, id)
	}
	for _, id := range p.touched {
		p.docs[id].count, p.docs[id].touched = 0, false
	}
	p.touched = p.touched[:0]
	for i := range p.assigned {
		p.assigned[i] /= 2
	}
}

// Pick implements Policy.
func (p *Weblins) Pick(c *Cluster, r *Request) Decision {
	if p.v.refresh(c) {
		p.sync(c)
	}
	if !p.started {
		p.started, p.next = true, r.Now+p.cfg.Period
	} else if r.Now >= p.next {
		p.rebuild()
		p.next = r.Now + p.cfg.Period
	}
	n := len(c.Nodes)
	first := r.Holder
	if first < 0 || first >= n || !c.Nodes[first].Usable() {
		if first = p.l4.Pick(c, r).Node; first < 0 {
			return None
		}
	}
	id, e := p.t.row(r.URL, n, c)
	for int(id) >= len(p.docs) {
		p.docs = append(p.docs, wlDoc{owner: -1})
		p.popular = append(p.popular, false)
	}
	if r.Size >= 0 {
		p.t.setSize(id, r.Size)
	}
	d := &p.docs[id]
	if d.owner < 0 || d.owner >= n || !c.Nodes[d.owner].Usable() {
		if !p.place(c, d, r.URL) {
			return None
		}
	}
	if !d.touched {
		p.touched = append(p.touched, id)
		d.touched = true
	}
	d.count++
	owner := d.owner
	p.assigned[owner] += weight(e.size)

	if p.popular[id] {
		return Decision{Node: first, Fetch: -1}
	}
	if p.t.cached(id, first) {
		p.t.hit(id, first, r.Now)
		return Decision{Node: first, Fetch: -1}
	}
	if first != owner && c.Nodes[owner].Active >= p.cfg.OverloadConns {
		fetch := -1
		if p.t.cached(id, owner) {
			fetch = owner
			p.t.hit(id, owner, r.Now)
		}
		p.t.insert(id, first, r.Now)
		return Decision{Node: first, Fetch: fetch}
	}
	p.t.insert(id, owner, r.Now)
	if e.size >= p.cfg.HandoffSize {
		return Decision{Node: owner, Handoff: owner != first, Fetch: -1}
	}
	if owner == first {
		return Decision{Node: first, Fetch: -1}
	}
	return Decision{Node: first, Fetch: owner}
}

// Done implements Policy: a size learned from the response is recorded; a
// URL the node could not serve (unservable(r.Status)) leaves the table.
func (p *Weblins) Done(c *Cluster, node int, r *Request) {
	if unservable(r.Status) {
		p.t.forget(r.URL)
		return
	}
	if id, ok := p.t.lookup(r.URL); ok && r.Size >= 0 {
		p.t.setSize(id, r.Size)
	}
}

// Owner returns url's owner node, or -1 if it was never requested.
func (p *Weblins) Owner(url string) int {
	if id, ok := p.t.lookup(url); ok {
		return p.docs[id].owner
	}
	return -1
}

// WeblinsTables is weblins' admin snapshot.
type WeblinsTables struct {
	// Docs is the number of documents (URLs) in the table, at most MaxURLs;
	// Evicted counts the URLs that left it to make room.
	Docs    int    `json:"docs"`
	Evicted uint64 `json:"evicted"`
	// Assigned is each node's expected load (requests × bytes, decayed).
	Assigned []float64 `json:"assigned"`
	// CachedBytes is each node's mirrored cache use.
	CachedBytes []int64 `json:"cached_bytes"`
	// Popular holds up to limit URLs of the replicated popular set.
	Popular []string `json:"popular,omitempty"`
}

// Tables implements Tabler.
func (p *Weblins) Tables(limit int) any {
	t := WeblinsTables{Docs: p.t.idx.len(), Evicted: p.t.idx.evicted, Assigned: slices.Clone(p.assigned)}
	for _, nc := range p.t.caches {
		t.CachedBytes = append(t.CachedBytes, nc.used)
	}
	for _, id := range p.popIDs {
		if len(t.Popular) >= limit {
			break
		}
		t.Popular = append(t.Popular, p.t.rows[id].url)
	}
	slices.Sort(t.Popular)
	return t
}
