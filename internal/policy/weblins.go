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
// places each new connection on a *first member* by wrr (Request.Holder when
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
type Weblins struct {
	cfg      Config
	noCache  int64
	wrr      WRR
	v        view
	docs     map[string]*wlDoc
	assigned []float64
	mirrors  []*mirror
	popular  map[string]struct{}
	touched  []*wlDoc
	next     time.Duration
	started  bool
}

type wlDoc struct {
	url   string
	owner int
	size  int64
	count int
}

func newWeblins(cfg Config) *Weblins {
	p := &Weblins{cfg: cfg, noCache: cfg.NoCacheAbove, docs: map[string]*wlDoc{}, popular: map[string]struct{}{}}
	if p.noCache == 0 {
		p.noCache = cfg.HandoffSize
	}
	return p
}

// Name implements Policy.
func (p *Weblins) Name() string { return "weblins" }

func (p *Weblins) sync(c *Cluster) {
	for len(p.mirrors) < len(c.Nodes) {
		i := len(p.mirrors)
		p.mirrors = append(p.mirrors, newMirror(p.cfg.cacheBytes(i), p.cfg.NewReplacer(i)))
		p.assigned = append(p.assigned, 0)
	}
	for i := range c.Nodes {
		if n := &c.Nodes[i]; !n.Up || n.Removed {
			p.mirrors[i].clear(func(string) {})
		}
	}
}

// place gives d the usable node with the least assigned expected load.
func (p *Weblins) place(c *Cluster, d *wlDoc) bool {
	best := -1
	for i := range c.Nodes {
		if c.Nodes[i].Usable() && (best < 0 || p.assigned[i] < p.assigned[best]) {
			best = i
		}
	}
	d.owner = best
	return best >= 0
}

func (p *Weblins) weight(d *wlDoc) float64 {
	if d.size < 0 {
		return nominalSize
	}
	return float64(d.size)
}

// rebuild recomputes the popular set from this period's counts.
func (p *Weblins) rebuild() {
	clear(p.popular)
	slices.SortFunc(p.touched, func(a, b *wlDoc) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return strings.Compare(a.url, b.url)
	})
	var bytes int64
	for _, d := range p.touched {
		if p.cfg.PopularBytes > 0 {
			s := max(d.size, 0)
			if bytes+s > p.cfg.PopularBytes {
				continue
			}
			bytes += s
		} else if len(p.popular) >= p.cfg.PopularN {
			break
		}
		p.popular[d.url] = struct{}{}
	}
	for _, d := range p.touched {
		d.count = 0
	}
	p.touched = p.touched[:0]
	for i := range p.assigned {
		p.assigned[i] /= 2
	}
}

func (p *Weblins) cache(node int, d *wlDoc, now time.Duration) {
	if d.size <= p.noCache {
		p.mirrors[node].insert(d.url, d.size, now, func(string) {})
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
		if first = p.wrr.Pick(c, r).Node; first < 0 {
			return None
		}
	}
	d := p.docs[r.URL]
	if d == nil {
		d = &wlDoc{url: r.URL, size: -1, owner: -1}
		p.docs[r.URL] = d
	}
	if r.Size >= 0 {
		d.size = r.Size
	}
	if d.owner < 0 || d.owner >= n || !c.Nodes[d.owner].Usable() {
		if !p.place(c, d) {
			return None
		}
	}
	if d.count == 0 {
		p.touched = append(p.touched, d)
	}
	d.count++
	owner := d.owner
	p.assigned[owner] += p.weight(d)

	if _, pop := p.popular[d.url]; pop {
		return Decision{Node: first, Fetch: -1}
	}
	if p.mirrors[first].has(d.url) {
		p.mirrors[first].hit(d.url, r.Now)
		return Decision{Node: first, Fetch: -1}
	}
	if first != owner && c.Nodes[owner].Active >= p.cfg.OverloadConns {
		fetch := -1
		if p.mirrors[owner].has(d.url) {
			fetch = owner
			p.mirrors[owner].hit(d.url, r.Now)
		}
		p.cache(first, d, r.Now)
		return Decision{Node: first, Fetch: fetch}
	}
	p.cache(owner, d, r.Now)
	if d.size >= p.cfg.HandoffSize {
		return Decision{Node: owner, Handoff: owner != first, Fetch: -1}
	}
	if owner == first {
		return Decision{Node: first, Fetch: -1}
	}
	return Decision{Node: first, Fetch: owner}
}

// Done implements Policy: a size learned from the response is recorded.
func (p *Weblins) Done(c *Cluster, node int, r *Request) {
	if d := p.docs[r.URL]; d != nil && r.Size >= 0 {
		d.size = r.Size
	}
}

// Owner returns url's owner node, or -1 if it was never requested.
func (p *Weblins) Owner(url string) int {
	if d := p.docs[url]; d != nil {
		return d.owner
	}
	return -1
}

// WeblinsTables is weblins' admin snapshot.
type WeblinsTables struct {
	// Docs is the number of placed documents.
	Docs int `json:"docs"`
	// Assigned is each node's expected load (requests × bytes, decayed).
	Assigned []float64 `json:"assigned"`
	// CachedBytes is each node's mirrored cache use.
	CachedBytes []int64 `json:"cached_bytes"`
	// Popular holds up to limit URLs of the replicated popular set.
	Popular []string `json:"popular,omitempty"`
}

// Tables implements Tabler.
func (p *Weblins) Tables(limit int) any {
	t := WeblinsTables{Docs: len(p.docs), Assigned: slices.Clone(p.assigned)}
	for _, m := range p.mirrors {
		t.CachedBytes = append(t.CachedBytes, m.used)
	}
	for u := range p.popular {
		if len(t.Popular) >= limit {
			break
		}
		t.Popular = append(t.Popular, u)
	}
	slices.Sort(t.Popular)
	return t
}
