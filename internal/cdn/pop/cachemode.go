package pop

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"shoal/internal/admin"
	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/mbpp"
	"shoal/internal/cluster/node"
	"shoal/internal/up"
)

// This file joins a PoP's content manager to its nodes (cache mode): the
// nodes store the responses and fetch their misses through the PoP's miss
// chain; the manager follows what they hold through their hooks.

// The PoP is the manager's ring: Chord for homes, MBPP for the view, the
// peer links for messages.

func (p *PoP) selfID() uint64 { return p.ID }

func (p *PoP) owns(key chord.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ch != nil && p.ch.Owns(key)
}

func (p *PoP) predecessor() (chord.Peer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		return chord.Peer{}, false
	}
	return p.ch.Predecessor()
}

func (p *PoP) send(id uint64, addr string, m msg) {
	b, err := encodeMsg(m)
	if err != nil {
		p.log.Warn("content message", "err", err)
		return
	}
	p.links.send(id, addr, b)
}

func (p *PoP) view(now time.Time) []mbpp.PeerView {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mb.View(now)
}

// cacheMode is a PoP's content tier on its nodes.
type cacheMode struct {
	m     *manager
	chain *chain
	cache *nodeCache
}

// prepareCacheMode builds the content manager and the miss chain and
// returns the nodes' cache-mode configuration: base's (edgeNodes), with
// the chain in front of base's upstream (the origins), the hooks that keep
// the manager's table, and the PoP's name in Cache-Status.
func (p *PoP) prepareCacheMode(cfg Config, base func(i int) node.EdgeConfig) (func(i int) node.EdgeConfig, error) {
	nc := newNodeCache(nil)
	m, err := newManager(p, cfg.CDN, cfg.Name, "", nc, p.log, time.Now())
	if err != nil {
		return nil, err
	}
	cm := &cacheMode{m: m, chain: newChain(m, base(0).Upstream, cfg.Redirect), cache: nc}
	m.warm = cm.warm
	p.cm = cm
	return func(i int) node.EdgeConfig {
		ec := base(i)
		// Named after the PoP: Cache-Status then shows which PoP
		// answered along the chain (a hit at another PoP, then a miss here).
		ec.Upstream, ec.Name = cm.chain, cfg.Name
		// A copy leaves the directory when its primary entry (the
		// response, or the Vary marker of its variants) is gone from
		// every node; a variant alone going changes nothing.
		ec.OnEvict = func(key string) {
			if !strings.Contains(key, "\x00") && !nc.heldAnywhere(key) {
				m.Evicted(PoPKey(key))
			}
		}
		ec.OnStored = func(key string) { m.Stored(PoPKey(key)) }
		ec.OnHit = nc.OnHit
		return ec
	}, nil
}

// startCacheMode finishes what prepareCacheMode began once the cluster
// runs: the gateway is known, the nodes are there, the manager's clock
// starts.
func (p *PoP) startCacheMode(cl *up.Cluster) {
	cm := p.cm
	cm.m.setGateway(cl.URL)
	for _, n := range cl.Nodes() {
		cm.cache.nodes = append(cm.cache.nodes, edgeNode{n})
	}
	go cm.m.run(p.ctx)
}

// warm fetches key through this PoP's own gateway, so that a node stores
// it (a pushed copy, or the copy a redirected client will not fetch).
func (cm *cacheMode) warm(key string) {
	host, uri := splitKey(key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cm.m.gw()+uri, nil)
	if err != nil {
		return
	}
	if u, err := url.Parse(cm.m.gw()); err == nil {
		req.Host = hostFor(host, u.Host) // no site: this PoP's own address, as its clients name it
	}
	req.Header.Set(peerHeader, "warm") // never redirected
	resp, err := cm.chain.rt.RoundTrip(req)
	if err != nil {
		return
	}
	resp.Body.Close()
}

// edgeNode adapts a node to EdgeNode.
type edgeNode struct{ s *node.Server }

func (n edgeNode) EdgeWalk(f func(StoredEntry) bool) {
	n.s.EdgeWalk(func(e node.EdgeEntry) bool { return f(StoredEntry{Key: e.Key, Tags: e.Tags, Stored: e.Stored}) })
}
func (n edgeNode) EdgeRemove(key string) bool    { return n.s.EdgeRemove(key) }
func (n edgeNode) EdgeMarkStale(key string) bool { return n.s.EdgeMarkStale(key) }
func (n edgeNode) EdgeHas(key string) bool       { return n.s.EdgeHas(key) }

// cdnCounts are the PoP's content figures: the nodes' cache counters
// summed (hits, misses, revalidated, stale, misses answered by another
// node: peer_hits) and the manager's and chain's.
func (p *PoP) cdnCounts() map[string]uint64 {
	c := p.cm.m.stats.Map()
	for _, n := range p.cm.cache.nodes {
		st := n.(edgeNode).s.EdgeStats()
		c["hits"] += uint64(st.Hits)
		c["misses"] += uint64(st.Misses)
		c["revalidated"] += uint64(st.Revalidated)
		c["stale"] += uint64(st.Stale)
		c["collapsed"] += uint64(st.Collapsed)
		c["peer_hits"] += uint64(st.PeerHits)
		c["bypass"] += uint64(st.Bypass)
		c["errors"] += uint64(st.Errors)
	}
	p.cm.m.mu.Lock()
	c["objects"], c["directory_keys"], c["purge_log"] = uint64(p.cm.m.store.Len()), uint64(p.cm.m.dir.Len()), uint64(p.cm.m.purges.Len())
	p.cm.m.mu.Unlock()
	return c
}

// cdnSnapshot is the dashboard's CDN part.
func (p *PoP) cdnSnapshot() admin.CDN {
	s := admin.CDN{PoP: p.cfg.Name, Counts: p.cdnCounts()}
	for _, v := range p.view(time.Now()) {
		s.PoPs = append(s.PoPs, admin.CDNPoP{Name: v.Name, Alive: v.Alive, Self: v.Self, Score: v.Score, RTTms: v.RTTms})
	}
	return s
}
