package pop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"shoal/internal/base/accept"
	"shoal/internal/base/httpwire"
	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/mbpp"
	"shoal/internal/cdn/replica"
	"shoal/internal/cluster/front"
)

// protoCDN frames carry the content messages between PoPs (JSON: small
// control messages, already authenticated by peerwire).
const protoCDN byte = 3

// redirectMark is the query parameter a redirected request carries: a PoP
// never redirects such a request again.
const redirectMark = "shoal_r"

// maxObject bounds what a PoP copies from a peer or the origin.
const maxObject = 64 << 20

// The Peer header tells a PoP why another PoP asks it for content: "local"
// serve only what you hold (a holder), "shield" fetch from the origin if you
// must (the key's home acting as shield).
const peerHeader = "X-Shoal-Peer"

type cdnMsg struct {
	Op      string   `json:"op"` // query, holders, register, unregister, purge, purged, push
	Req     uint64   `json:"req,omitempty"`
	Key     uint64   `json:"key,omitempty"`
	URL     string   `json:"url,omitempty"`
	Prefix  bool     `json:"prefix,omitempty"`
	Holder  string   `json:"holder,omitempty"`
	Holders []string `json:"holders,omitempty"`
	Edge    string   `json:"edge,omitempty"`
	From    string   `json:"from,omitempty"`
}

type object struct {
	body  []byte
	ctype string
}

// ContentStats counts the content tier's work (GET /content, /metrics).
type ContentStats struct {
	Hits, Misses, Fetches, RemoteFetches, ShieldFetches, OriginFetches atomic.Uint64
	PushesSent, PushesReceived, Purges, PurgedObjects, Evictions       atomic.Uint64
	PeerServed, Redirects                                              atomic.Uint64
}

// content is a PoP's content manager (seed 003 §3.1): the objects it holds,
// their request counts (internal/cdn/replica), the directory of the keys this PoP
// is home for, and the edge HTTP server clients and peers fetch from.
type content struct {
	p      *PoP
	cfg    replica.Config
	origin string
	edge   string // this PoP's edge base URL
	client *http.Client
	sf     singleflight.Group

	mu    sync.Mutex
	store *replica.Store
	objs  map[string]object
	dir   *chord.Directory
	homes map[string]uint64 // URL → the home it is registered at

	rmu     sync.Mutex
	seq     uint64
	waiting map[uint64]chan cdnMsg

	stats ContentStats
	ln    net.Listener
	srv   *http.Server
}

func (p *PoP) startContent(cfg Config) error {
	st, err := replica.NewStore(cfg.CDN, time.Now())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Edge)
	if err != nil {
		return fmt.Errorf("pop %s: edge: %w", cfg.Name, err)
	}
	c := &content{p: p, cfg: cfg.CDN, origin: strings.TrimSuffix(cfg.Origin, "/"), edge: "http://" + ln.Addr().String(),
		client: &http.Client{Timeout: 10 * time.Second}, store: st, objs: map[string]object{},
		dir: chord.NewDirectory(1<<20, 64), homes: map[string]uint64{}, waiting: map[uint64]chan cdnMsg{}, ln: ln}
	if c.origin == "" && p.Cluster != nil {
		c.origin = strings.TrimSuffix(p.Cluster.URL, "/")
	}
	lim := cfg.EdgeLimits
	if lim == (accept.Limits{}) {
		lim = DefaultEdgeLimits(front.DescriptorLimit())
	}
	bl := accept.Bound(ln, lim)
	c.srv = bl.HTTPServer(http.HandlerFunc(c.serve))
	p.content = c
	p.EdgeURL = c.edge
	go c.srv.Serve(bl)
	go c.roller(p.ctx)
	return nil
}

// holderID is how a holder names itself in the directory: its ring ID (for
// its MBPP score) and its edge URL.
func (c *content) holderID() string { return fmt.Sprintf("%016x|%s", c.p.ID, c.edge) }

func parseHolder(h string) (uint64, string, bool) {
	id, edge, ok := strings.Cut(h, "|")
	v, err := strconv.ParseUint(id, 16, 64)
	return v, edge, ok && err == nil && strings.HasPrefix(edge, "http://")
}

func (c *content) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	// One spelling of each path, with no dot-segment and no encoded slash,
	// is the cache key and what the origin and peers are asked for.
	url, err := httpwire.ForwardPath(r.URL.EscapedPath())
	if err != nil {
		http.Error(w, "bad path: encoded slash or backslash, control character or bad escape", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	hit := c.store.Request(url)
	o := c.objs[url]
	c.mu.Unlock()
	role := r.Header.Get(peerHeader)
	if hit {
		if role != "" {
			c.stats.PeerServed.Add(1)
		}
		c.stats.Hits.Add(1)
		write(w, o, "HIT")
		return
	}
	if role == "local" {
		http.Error(w, "not held here", http.StatusNotFound)
		return
	}
	c.stats.Misses.Add(1)
	// Seed 003's redirect: a client is sent to a better PoP holding the
	// content, once (the marker stops a second redirect, so no loop), and
	// this PoP fetches a copy for next time (passive replication).
	if role == "" && c.p.cfg.Redirect && r.URL.Query().Get(redirectMark) == "" {
		if edge, ok := c.betterHolder(r.Context(), url); ok {
			c.stats.Redirects.Add(1)
			go c.sf.Do(url, func() (any, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return c.fetch(ctx, url, false)
			})
			http.Redirect(w, r, edge+url+"?"+redirectMark+"=1", http.StatusFound)
			return
		}
	}
	v, err, _ := c.sf.Do(url, func() (any, error) { return c.fetch(r.Context(), url, role == "shield") })
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	write(w, v.(object), "MISS")
}

func write(w http.ResponseWriter, o object, how string) {
	if o.ctype != "" {
		w.Header().Set("Content-Type", o.ctype)
	}
	w.Header().Set("X-Shoal-Cache", how)
	w.Header().Set("Content-Length", strconv.Itoa(len(o.body)))
	w.Write(o.body)
}

// fetch gets url for a miss: from the best-scoring PoP the directory lists,
// else through the key's home PoP (shield), else from the origin; the copy
// is kept and registered (passive replication, seed 003 §3.1). A shield
// request goes to the origin directly.
func (c *content) fetch(ctx context.Context, url string, shield bool) (object, error) {
	c.stats.Fetches.Add(1)
	key := chord.ContentKey("", url)
	home, homeEdge, holders := uint64(0), "", []string(nil)
	if !shield {
		if owner, err := c.p.lookup(ctx, chord.ID(key)); err == nil {
			home = uint64(owner.ID)
			if home == c.p.ID {
				c.mu.Lock()
				holders = c.dir.Holders(time.Now(), key)
				c.mu.Unlock()
				homeEdge = c.edge
			} else if m, err := c.request(ctx, home, owner.Addr, cdnMsg{Op: "query", Key: uint64(key)}); err == nil {
				holders, homeEdge = m.Holders, m.Edge
			}
		}
	}
	// Best-scoring holder first (cdn.Rank over this PoP's MBPP view).
	var cs []replica.Candidate
	edges := map[uint64]string{}
	now := time.Now()
	c.p.mu.Lock()
	for _, h := range holders {
		id, edge, ok := parseHolder(h)
		if !ok || id == c.p.ID {
			continue
		}
		v, _ := c.p.mb.Peer(mbpp.ID(id), now)
		cs = append(cs, replica.Candidate{ID: id, Alive: v.Alive, Score: v.Score})
		edges[id] = edge
	}
	c.p.mu.Unlock()
	for _, cand := range replica.Rank(cs) {
		if o, err := c.get(ctx, edges[cand.ID]+url, "local"); err == nil {
			c.stats.RemoteFetches.Add(1)
			c.keep(url, o, home)
			return o, nil
		}
	}
	if !shield && home != 0 && home != c.p.ID && homeEdge != "" {
		if o, err := c.get(ctx, homeEdge+url, "shield"); err == nil {
			c.stats.ShieldFetches.Add(1)
			c.keep(url, o, home)
			return o, nil
		}
	}
	o, err := c.get(ctx, c.origin+url, "")
	if err != nil {
		return object{}, err
	}
	c.stats.OriginFetches.Add(1)
	if home == 0 && shield {
		home = c.p.ID // the shield is the key's home
	}
	c.keep(url, o, home)
	return o, nil
}

// betterHolder returns the edge of the best-scoring live PoP holding url
// when its score beats this PoP's own (which has the local bonus).
func (c *content) betterHolder(ctx context.Context, url string) (string, bool) {
	key := chord.ContentKey("", url)
	owner, err := c.p.lookup(ctx, key)
	if err != nil {
		return "", false
	}
	var holders []string
	if uint64(owner.ID) == c.p.ID {
		c.mu.Lock()
		holders = c.dir.Holders(time.Now(), key)
		c.mu.Unlock()
	} else if m, err := c.request(ctx, uint64(owner.ID), owner.Addr, cdnMsg{Op: "query", Key: uint64(key)}); err == nil {
		holders = m.Holders
	}
	now := time.Now()
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	self, _ := c.p.mb.Peer(mbpp.ID(c.p.ID), now)
	best, bestEdge := self.Score, ""
	for _, h := range holders {
		id, edge, ok := parseHolder(h)
		if !ok || id == c.p.ID {
			continue
		}
		if v, ok := c.p.mb.Peer(mbpp.ID(id), now); ok && v.Alive && v.Score > best {
			best, bestEdge = v.Score, edge
		}
	}
	return bestEdge, bestEdge != ""
}

func (c *content) get(ctx context.Context, url, role string) (object, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return object{}, err
	}
	if role != "" {
		req.Header.Set(peerHeader, role)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return object{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return object{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxObject+1))
	if err != nil {
		return object{}, fmt.Errorf("GET %s: %w", url, err)
	}
	if len(b) > maxObject {
		return object{}, fmt.Errorf("GET %s: larger than %d bytes", url, maxObject)
	}
	return object{body: b, ctype: resp.Header.Get("Content-Type")}, nil
}

// keep stores a copy and registers it at the key's home.
func (c *content) keep(url string, o object, home uint64) {
	c.mu.Lock()
	isNew := c.store.Add(time.Now(), url, int64(len(o.body)), true)
	c.objs[url] = o
	if home != 0 {
		c.homes[url] = home
	}
	c.mu.Unlock()
	if isNew && home != 0 {
		c.register(url, home, "register")
	}
}

func (c *content) register(url string, home uint64, op string) {
	key := uint64(chord.ContentKey("", url))
	if home == c.p.ID {
		c.mu.Lock()
		if op == "register" {
			c.dir.Add(time.Now(), chord.ID(key), c.holderID(), c.cfg.DirTTL)
		} else {
			c.dir.Remove(chord.ID(key), c.holderID())
		}
		c.mu.Unlock()
		return
	}
	c.p.sendCDN(home, "", cdnMsg{Op: op, Key: key, Holder: c.holderID()})
}

// request sends m to PoP id and waits for the answer with m's number.
func (c *content) request(ctx context.Context, id uint64, addr string, m cdnMsg) (cdnMsg, error) {
	ch := make(chan cdnMsg, 1)
	c.rmu.Lock()
	c.seq++
	m.Req = c.seq
	c.waiting[m.Req] = ch
	c.rmu.Unlock()
	defer func() {
		c.rmu.Lock()
		delete(c.waiting, m.Req)
		c.rmu.Unlock()
	}()
	c.p.sendCDN(id, addr, m)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return cdnMsg{}, fmt.Errorf("pop %x: %s: %w", id, m.Op, ctx.Err())
	}
}

// onMsg handles a content message from PoP from.
func (c *content) onMsg(from uint64, m cdnMsg) {
	now := time.Now()
	switch m.Op {
	case "query":
		c.mu.Lock()
		hs := c.dir.Holders(now, chord.ID(m.Key))
		c.mu.Unlock()
		c.p.sendCDN(from, "", cdnMsg{Op: "holders", Req: m.Req, Holders: hs, Edge: c.edge})
	case "register", "unregister":
		if id, _, ok := parseHolder(m.Holder); !ok || id != from {
			return // a PoP registers only itself
		}
		c.mu.Lock()
		if m.Op == "register" {
			c.dir.Add(now, chord.ID(m.Key), m.Holder, c.cfg.DirTTL)
		} else {
			c.dir.Remove(chord.ID(m.Key), m.Holder)
		}
		c.mu.Unlock()
	case "purge":
		c.purgeLocal(m.URL, m.Prefix)
		c.p.sendCDN(from, "", cdnMsg{Op: "purged", Req: m.Req, From: c.p.cfg.Name})
	case "push":
		if id, edge, ok := parseHolder(m.Holder); ok && id == from {
			c.mu.Lock()
			held := c.store.Has(m.URL)
			c.mu.Unlock()
			if !held {
				c.stats.PushesReceived.Add(1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					if o, err := c.get(ctx, edge+m.URL, "local"); err == nil {
						home := uint64(0)
						if owner, err := c.p.lookup(ctx, chord.ID(chord.ContentKey("", m.URL))); err == nil {
							home = uint64(owner.ID)
						}
						c.mu.Lock()
						c.store.Add(time.Now(), m.URL, int64(len(o.body)), false)
						c.objs[m.URL] = o
						if home != 0 {
							c.homes[m.URL] = home
						}
						c.mu.Unlock()
						if home != 0 {
							c.register(m.URL, home, "register")
						}
					}
				}()
			}
		}
	case "holders", "purged":
		c.rmu.Lock()
		ch := c.waiting[m.Req]
		c.rmu.Unlock()
		if ch != nil {
			select {
			case ch <- m:
			default:
			}
		}
	}
}

// purgeLocal removes url (or every URL under it when prefix) from this PoP
// and from the directory it keeps; it returns how many objects went.
func (c *content) purgeLocal(url string, prefix bool) int {
	var gone []string
	c.mu.Lock()
	if prefix {
		gone = c.store.RemovePrefix(url)
	} else if c.store.Remove(url) {
		gone = []string{url}
	}
	homes := c.dropLocked(gone)
	c.mu.Unlock()
	c.unregister(homes)
	c.stats.Purges.Add(1)
	c.stats.PurgedObjects.Add(uint64(len(gone)))
	return len(gone)
}

// dropLocked forgets the objects and home records of urls, which the store
// has just removed (purged or evicted), and returns their homes (0: none)
// for unregister once c.mu (held by the caller) is released.
func (c *content) dropLocked(urls []string) map[string]uint64 {
	homes := map[string]uint64{}
	for _, u := range urls {
		delete(c.objs, u)
		homes[u] = c.homes[u]
		delete(c.homes, u)
	}
	return homes
}

// unregister tells each URL's home PoP that this PoP no longer holds it.
func (c *content) unregister(homes map[string]uint64) {
	for u, h := range homes {
		if h != 0 {
			c.register(u, h, "unregister")
		}
	}
}

// PurgeResult is the answer of POST /purge: which PoPs confirmed.
type PurgeResult struct {
	URL       string   `json:"url"`
	Prefix    bool     `json:"prefix"`
	Local     int      `json:"removed_here"`
	Confirmed []string `json:"confirmed"`
	Missing   []string `json:"missing"`
	Seconds   float64  `json:"seconds"`
}

// Purge removes url (or a prefix) at every PoP alive in the view and waits
// for each to confirm (at most 5 s).
func (p *PoP) Purge(ctx context.Context, url string, prefix bool) (PurgeResult, error) {
	c := p.content
	if c == nil {
		return PurgeResult{}, errors.New("pop: the content tier is off (no --edge)")
	}
	start := time.Now()
	res := PurgeResult{URL: url, Prefix: prefix, Local: c.purgeLocal(url, prefix), Confirmed: []string{p.cfg.Name}}
	p.mu.Lock()
	view := p.mb.View(start)
	p.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, v := range view {
		if v.Self || !v.Alive {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := c.request(ctx, uint64(v.ID), v.Addr, cdnMsg{Op: "purge", URL: url, Prefix: prefix})
			mu.Lock()
			if err == nil {
				res.Confirmed = append(res.Confirmed, v.Name)
			} else {
				res.Missing = append(res.Missing, v.Name)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

func (p *PoP) servePurge(w http.ResponseWriter, r *http.Request) {
	url, prefix := r.URL.Query().Get("url"), false
	if url == "" {
		url, prefix = r.URL.Query().Get("prefix"), true
	}
	if !strings.HasPrefix(url, "/") {
		http.Error(w, "give ?url=/path or ?prefix=/dir/", http.StatusBadRequest)
		return
	}
	res, err := p.Purge(r.Context(), url, prefix)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, res)
}

// roller ends each window: evicts (and unregisters) content asked fewer
// than M times and tells every live PoP of the hot content, which each
// fetches from here (hot push, seed 003 §3.1).
func (c *content) roller(ctx context.Context) {
	t := time.NewTicker(c.cfg.Window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		evicted, hot := c.store.Roll(time.Now())
		homes := c.dropLocked(evicted)
		c.mu.Unlock()
		c.stats.Evictions.Add(uint64(len(evicted)))
		c.unregister(homes)
		if len(hot) == 0 {
			continue
		}
		c.p.mu.Lock()
		view := c.p.mb.View(time.Now())
		c.p.mu.Unlock()
		for _, v := range view {
			if v.Self || !v.Alive {
				continue
			}
			for _, u := range hot {
				c.stats.PushesSent.Add(1)
				c.p.sendCDN(uint64(v.ID), v.Addr, cdnMsg{Op: "push", URL: u, Holder: c.holderID()})
			}
		}
	}
}

func (p *PoP) sendCDN(id uint64, addr string, m cdnMsg) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	p.links.send(id, addr, append([]byte{protoCDN}, b...))
}

func (p *PoP) onCDN(from uint64, body []byte) {
	if p.content == nil {
		return
	}
	var m cdnMsg
	if err := json.Unmarshal(body, &m); err != nil {
		p.log.Warn("bad content frame", "from", fmt.Sprintf("%x", from), "err", err)
		return
	}
	p.content.onMsg(from, m)
}

// lookup finds the owner of key with Chord and waits for the answer.
func (p *PoP) lookup(ctx context.Context, key chord.ID) (chord.Peer, error) {
	ch := make(chan chord.Result, 1)
	p.mu.Lock()
	if p.ch == nil {
		p.mu.Unlock()
		return chord.Peer{}, errors.New("pop: not in the Chord ring yet")
	}
	id, out := p.ch.Lookup(time.Now(), key)
	p.lookups[id] = ch
	p.deliverLocked()
	p.mu.Unlock()
	p.sendChord(out)
	p.poke()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	defer func() {
		p.mu.Lock()
		delete(p.lookups, id)
		p.mu.Unlock()
	}()
	select {
	case r := <-ch:
		if r.Err != nil {
			return chord.Peer{}, r.Err
		}
		return r.Owner, nil
	case <-ctx.Done():
		return chord.Peer{}, fmt.Errorf("chord lookup: %w", ctx.Err())
	}
}

// deliverLocked hands finished lookups to their waiters; p.mu is held.
func (p *PoP) deliverLocked() {
	if p.ch == nil {
		return
	}
	for _, r := range p.ch.TakeResults() {
		if ch := p.lookups[r.Lookup]; ch != nil {
			ch <- r
		}
	}
}

func (p *PoP) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// ContentStatsView is GET /content.
type ContentStatsView struct {
	Edge    string            `json:"edge"`
	Origin  string            `json:"origin"`
	Objects int               `json:"objects"`
	DirKeys int               `json:"directory_keys"`
	Counts  map[string]uint64 `json:"counts"`
}

// ContentStats returns the content tier's counters.
func (p *PoP) ContentStats() ContentStatsView {
	c := p.content
	if c == nil {
		return ContentStatsView{}
	}
	c.mu.Lock()
	v := ContentStatsView{Edge: c.edge, Origin: c.origin, Objects: c.store.Len(), DirKeys: c.dir.Len()}
	c.mu.Unlock()
	s := &c.stats
	v.Counts = map[string]uint64{"hits": s.Hits.Load(), "misses": s.Misses.Load(), "fetches": s.Fetches.Load(),
		"collapsed": s.Misses.Load() - min(s.Misses.Load(), s.Fetches.Load()), "remote_fetches": s.RemoteFetches.Load(),
		"shield_fetches": s.ShieldFetches.Load(), "origin_fetches": s.OriginFetches.Load(), "pushes_sent": s.PushesSent.Load(),
		"pushes_received": s.PushesReceived.Load(), "purges": s.Purges.Load(), "purged_objects": s.PurgedObjects.Load(),
		"evictions": s.Evictions.Load(), "peer_served": s.PeerServed.Load(), "redirects": s.Redirects.Load()}
	return v
}

func (p *PoP) serveContent(w http.ResponseWriter, r *http.Request) { writeJSON(w, p.ContentStats()) }
