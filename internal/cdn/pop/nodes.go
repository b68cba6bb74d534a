package pop

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	"shoal/internal/cdn/replica"
)

// StoredEntry is one response a node holds, as a purge sees it: its cache
// key (the node's: scheme://host[:port]/path?query, then the Vary
// variant after a NUL), its surrogate keys and when it was stored.
type StoredEntry struct {
	Key    string
	Tags   []string
	Stored time.Time
}

// EdgeNode is one node in cache mode as its PoP reaches it: the walk and
// the removals a purge needs, and whether a key is still held (an
// eviction on one node leaves the PoP's copy listed while another node
// holds it).
type EdgeNode interface {
	EdgeWalk(f func(StoredEntry) bool)
	EdgeRemove(key string) bool
	EdgeMarkStale(key string) bool
	EdgeHas(key string) bool
}

// PoPKey is the PoP key (Key) of a node's cache key: without the scheme,
// the port and the Vary variant, so that every variant, every node and
// every PoP agree on it.
func PoPKey(cacheKey string) string {
	k := cacheKey
	if i := strings.IndexByte(k, 0); i >= 0 {
		k = k[:i]
	}
	if i := strings.Index(k, "://"); i >= 0 {
		k = k[i+3:]
	}
	host, uri := splitKey(k)
	return Key(host, uri)
}

// nodeCache is the Cache of a PoP whose nodes run in its process: it
// carries purges and drops out on every node and sums the hits the nodes
// report (OnHit). A hit costs one sharded counter increment under the
// node's own cache key (no allocation once the key is counted); the PoP
// keys are worked out once a window, in TakeHits.
type nodeCache struct {
	nodes  []EdgeNode
	shards [16]hitShard
	seed   maphash.Seed
}

type hitShard struct {
	mu sync.Mutex
	n  map[string]int
}

func newNodeCache(nodes []EdgeNode) *nodeCache {
	c := &nodeCache{nodes: nodes, seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].n = map[string]int{}
	}
	return c
}

// OnHit counts a hit on a node's cache key.
func (c *nodeCache) OnHit(cacheKey string) {
	s := &c.shards[maphash.String(c.seed, cacheKey)%uint64(len(c.shards))]
	s.mu.Lock()
	s.n[cacheKey]++
	s.mu.Unlock()
}

// TakeHits returns the hits counted since the last call, by hashed PoP key.
func (c *nodeCache) TakeHits() map[uint64]int {
	out := map[uint64]int{}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n := s.n
		s.n = map[string]int{}
		s.mu.Unlock()
		for k, v := range n {
			out[HashKey(PoPKey(k))] += v
		}
	}
	return out
}

// Apply walks every node and removes, or marks stale, what p matches.
func (c *nodeCache) Apply(p replica.Purge, margin time.Duration) []string {
	before := p.At.Add(margin)
	touched := map[string]bool{}
	for _, n := range c.nodes {
		var hit []string
		n.EdgeWalk(func(e StoredEntry) bool {
			pk := PoPKey(e.Key)
			host, uri := splitKey(pk)
			if e.Stored.Before(before) && p.Matches(host, uri, e.Tags) {
				hit = append(hit, e.Key)
				touched[pk] = true
			}
			return true
		})
		for _, k := range hit {
			if p.Soft {
				n.EdgeMarkStale(k)
			} else {
				n.EdgeRemove(k)
			}
		}
	}
	out := make([]string, 0, len(touched))
	for k := range touched {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Drop removes every stored response of the hashed PoP keys.
func (c *nodeCache) Drop(keys []uint64) {
	set := make(map[uint64]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	for _, n := range c.nodes {
		var hit []string
		n.EdgeWalk(func(e StoredEntry) bool {
			if set[HashKey(PoPKey(e.Key))] {
				hit = append(hit, e.Key)
			}
			return true
		})
		for _, k := range hit {
			n.EdgeRemove(k)
		}
	}
}

// Names returns the PoP keys of the hashed keys that a node holds.
func (c *nodeCache) Names(keys []uint64) map[uint64]string {
	want := make(map[uint64]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	out := map[uint64]string{}
	for _, n := range c.nodes {
		n.EdgeWalk(func(e StoredEntry) bool {
			pk := PoPKey(e.Key)
			if h := HashKey(pk); want[h] {
				out[h] = pk
			}
			return len(out) < len(want)
		})
	}
	return out
}

// heldAnywhere reports whether a node still holds cacheKey.
func (c *nodeCache) heldAnywhere(cacheKey string) bool {
	for _, n := range c.nodes {
		if n.EdgeHas(cacheKey) {
			return true
		}
	}
	return false
}
