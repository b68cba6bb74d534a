package pop

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/mbpp"
	"shoal/internal/cdn/replica"
)

// upstream is the node's Upstream (internal/cluster/node): where a node in
// cache mode sends what its store cannot answer. The chain below is one,
// and so is the origin it ends at.
type upstream interface {
	Fetch(ctx context.Context, req *http.Request) (*http.Response, error)
}

// peerHeader tells a PoP why another PoP asks it: "shield" means the
// asker is missing content whose home is this PoP, which fetches it from
// the origin (and keeps the copy) rather than asking further. Holders are
// asked with the standard Cache-Control: only-if-cached instead (RFC 9111
// §5.2.1.7: answer from the store or 504), which a node in cache mode
// honours without a shoal header.
const peerHeader = "X-Shoal-Peer"

// redirectMark is the query parameter a redirected request carries: a PoP
// never redirects such a request again.
const redirectMark = "shoal_r"

// Key is the PoP key of a request: its site and its path with query. The
// site is the Host, lower case, without port (every PoP of a CDN answers
// the same name); a Host that is an address or localhost names no site
// ("": the default origin's), since a client that reaches a PoP by its
// address would otherwise share nothing with the clients of the next PoP.
// Vary variants share the key; the nodes keep them apart.
func Key(host, uri string) string { return siteOf(host) + uri }

// siteOf is the site part of a PoP key for a Host.
func siteOf(host string) string {
	host = strings.ToLower(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return ""
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	return host
}

// splitKey is Key's inverse.
func splitKey(key string) (host, uri string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i:]
	}
	return key, "/"
}

// chain is the miss chain of a PoP, the Upstream of its nodes (seed 003
// §1 and §3): a miss goes to the best-scoring PoP holding the key (Chord
// directory, MBPP score), then to the key's home PoP as shield, then to
// the origin, in replica's plan order; other methods go to the origin.
type chain struct {
	m        *manager
	origin   upstream
	rt       http.RoundTripper // to other PoPs' gateways
	redirect bool
}

func newChain(m *manager, origin upstream, redirect bool) *chain {
	return &chain{m: m, origin: origin, redirect: redirect, rt: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		DisableCompression:    true,
	}}
}

// Fetch answers a node's miss.
func (c *chain) Fetch(ctx context.Context, req *http.Request) (*http.Response, error) {
	st := c.m.stats
	role := req.Header.Get(peerHeader)
	if role != "" {
		req = req.Clone(ctx)
		req.Header.Del(peerHeader)
	}
	if strings.HasPrefix(req.URL.Path, "/.shoal/") {
		// The cluster's own paths (a node's status, sizes) are asked of
		// the nodes by their front; they never go to other PoPs or an
		// origin.
		return notHere(req), nil
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return c.fromOrigin(ctx, req)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	uri, marked := unmark(req.URL)
	key := Key(host, uri)
	st.Fetches.Add(1)
	if role == "shield" {
		st.ShieldServed.Add(1)
		c.m.fetchedHome(key, c.m.r.selfID())
		return c.fromOrigin(ctx, req)
	}
	if marked {
		// Sent here by another PoP's redirect: this PoP's copy is under
		// the unmarked URL.
		if resp, ok := c.ask(ctx, req, c.m.gw(), uri, ""); ok {
			return resp, nil
		}
	}
	start := time.Now()
	rt := c.m.route(ctx, key)
	routed := time.Since(start)
	c.m.fetchedHome(key, rt.home)
	if c.redirect && !marked && role == "" {
		if gw, ok := rt.better(); ok {
			st.Redirects.Add(1)
			go c.m.warm(key)
			return redirectTo(req, gw+uri+sep(uri)+redirectMark+"=1"), nil
		}
	}
	for _, s := range rt.steps {
		switch s.Source {
		case replica.Remote:
			if resp, ok := c.ask(ctx, req, rt.gateways[s.PoP], uri, ""); ok {
				st.RemoteFetches.Add(1)
				c.logMiss(key, rt, s, routed, start)
				return resp, nil
			}
		case replica.Shield:
			if resp, ok := c.ask(ctx, req, rt.gateways[s.PoP], uri, "shield"); ok {
				st.ShieldFetches.Add(1)
				c.logMiss(key, rt, s, routed, start)
				return resp, nil
			}
		case replica.Origin:
			c.logMiss(key, rt, s, routed, start)
			return c.fromOrigin(ctx, req)
		}
	}
	return c.fromOrigin(ctx, req)
}

// logMiss logs at debug level how a miss went: its key's home, the plan,
// the step that answered, and the time spent routing (Chord lookup and
// directory query) and in all (to the answer's headers, or to the origin
// fetch's start): what a slow miss spent its time on.
func (c *chain) logMiss(key string, rt route, served replica.Step, routed time.Duration, start time.Time) {
	if !c.m.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	c.m.log.Debug("miss routed", "key", key, "home", fmt.Sprintf("%016x", rt.home), "steps", len(rt.steps),
		"source", served.Source, "from", fmt.Sprintf("%016x", served.PoP), "route_ms", float64(routed)/1e6,
		"total_ms", float64(time.Since(start))/1e6)
}

// fromOrigin is the last hop, counted: fetches and the bytes they bring.
func (c *chain) fromOrigin(ctx context.Context, req *http.Request) (*http.Response, error) {
	if c.origin == nil {
		return nil, errNoOrigin
	}
	c.m.stats.OriginFetches.Add(1)
	start := time.Now()
	resp, err := c.origin.Fetch(ctx, req)
	if err != nil {
		c.m.stats.OriginErrors.Add(1)
		return nil, err
	}
	c.m.noteOrigin(time.Since(start))
	resp.Body = &counted{ReadCloser: resp.Body, n: &c.m.stats.OriginBytes}
	return resp, nil
}

// ask sends req (path and query uri) to another PoP's gateway: as a
// holder (role "": only-if-cached) or as the key's home (role "shield").
// ok is false, and the response closed, when it did not give a usable
// copy: no answer, 504 from a holder that no longer has it, a 5xx from the
// shield, or a copy made before a purge this PoP applied (a tombstone:
// that PoP has not applied it yet).
func (c *chain) ask(ctx context.Context, req *http.Request, gateway, uri, role string) (*http.Response, bool) {
	if gateway == "" {
		return nil, false
	}
	u, err := url.Parse(gateway + uri)
	if err != nil {
		return nil, false
	}
	out := req.Clone(ctx)
	out.URL, out.RequestURI, out.Body, out.ContentLength = u, "", nil, 0
	out.Host = hostFor(req.Host, u.Host)
	if role == "" {
		cc := out.Header.Get("Cache-Control")
		out.Header.Set("Cache-Control", strings.TrimPrefix(cc+", only-if-cached", ", "))
	} else {
		out.Header.Set(peerHeader, role)
	}
	resp, err := c.rt.RoundTrip(out)
	if err != nil {
		c.m.stats.PeerErrors.Add(1)
		return nil, false
	}
	bad := resp.StatusCode == http.StatusGatewayTimeout && role == "" || resp.StatusCode >= 500 && role != ""
	// A copy the other PoP fetched from the origin for this very request
	// (X-Cache: MISS) is newer than any purge; an older one is checked.
	if !bad && resp.Header.Get("X-Cache") != "MISS" {
		made := madeAt(resp.Header, time.Now())
		if hard, soft := c.m.tombstone(Key(req.Host, uri), replica.Tags(resp.Header.Get("Surrogate-Key")), made); hard || soft {
			c.m.stats.Tombstoned.Add(1)
			bad = true
		}
	}
	if bad {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, false
	}
	if role == "" {
		// The holder's answer to only-if-cached is the stored response:
		// the asker's client did not ask for only-if-cached.
		resp.Request = req
	}
	resp.Body = &counted{ReadCloser: resp.Body, n: &c.m.stats.PeerBytes}
	return resp, true
}

// hostFor is the Host to send another PoP whose gateway is at authority:
// the client's, unless it names no site (an address: Key), in which case
// the other PoP's own address, under which its nodes keep what its own
// clients asked for by address.
func hostFor(host, authority string) string {
	if siteOf(host) == "" {
		return authority
	}
	return host
}

// madeAt is when a response was made at the origin: now minus its Age
// when it has one (the other PoP's own reckoning, free of skew between
// clocks; whole seconds, so up to a second late, which the purge margin
// covers), else its Date, else now.
func madeAt(h http.Header, now time.Time) time.Time {
	if a := h.Get("Age"); a != "" {
		if s, err := strconv.ParseUint(a, 10, 32); err == nil {
			return now.Add(-time.Duration(s) * time.Second)
		}
	}
	if t, err := http.ParseTime(h.Get("Date")); err == nil {
		return t
	}
	return now
}

// unmark returns the request's path and query without the redirect marker
// and whether it had one.
func unmark(u *url.URL) (string, bool) {
	uri := u.RequestURI()
	if !strings.Contains(u.RawQuery, redirectMark+"=") {
		return uri, false
	}
	q := u.Query()
	if q.Get(redirectMark) == "" {
		return uri, false
	}
	q.Del(redirectMark)
	v := *u
	v.RawQuery = q.Encode()
	return v.RequestURI(), true
}

func sep(uri string) string {
	if strings.Contains(uri, "?") {
		return "&"
	}
	return "?"
}

// redirectTo is a 302 to loc, which the node passes to the client (no
// freshness, so no cache stores it).
func redirectTo(req *http.Request, loc string) *http.Response {
	h := http.Header{"Location": {loc}, "Content-Length": {"0"}, "Cache-Control": {"no-store"}}
	return &http.Response{StatusCode: http.StatusFound, Status: "302 Found", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, Request: req}
}

// notHere is the 404 for a cluster path that reached the miss chain.
func notHere(req *http.Request) *http.Response {
	h := http.Header{"Content-Length": {"0"}, "Cache-Control": {"no-store"}}
	return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, Request: req}
}

// counted counts the bytes read through it.
type counted struct {
	io.ReadCloser
	n *atomic.Uint64
}

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.n.Add(uint64(n))
	return n, err
}

// route is where a miss of one key may be fetched: replica's plan with
// each PoP's gateway, the key's home, and what the redirect decision needs.
type route struct {
	steps    []replica.Step
	gateways map[uint64]string
	home     uint64
	self     replica.Candidate
	holders  []replica.Candidate
}

// better is the gateway of a holder whose score beats this PoP's own
// (replica.Better), for seed 003's redirect.
func (r route) better() (string, bool) {
	h, ok := replica.Better(r.self, r.holders)
	if !ok {
		return "", false
	}
	return r.gateways[h.ID], r.gateways[h.ID] != ""
}

// queryTimeout bounds the wait for a home's answer to a directory query;
// past it the miss goes on without holders or shield.
const queryTimeout = 3 * time.Second

// askHome asks the key's home which PoPs hold ck, and returns them with
// the home's gateway ("" when it runs no content tier: then it is no
// shield) and its smoothed time to the origin (0: unknown), the plan's
// HomeOrigin: without it the shield's detour bound
// (replica.Config.ShieldStretch) never applied to a live PoP. A home that
// does not answer costs the miss queryTimeout: that is counted and logged
// (once a minute per home), so a slow miss has its reason in the log.
func (m *manager) askHome(ctx context.Context, home chord.Peer, ck chord.ID) ([]string, string, time.Duration) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	start := time.Now()
	a, err := m.request(qctx, uint64(home.ID), home.Addr, msg{Op: opQuery, Key: uint64(ck)})
	if err == nil {
		return a.Holders, a.Gateway, time.Duration(a.OriginNs)
	}
	m.stats.HomeQueryFailures.Add(1)
	if m.warnDue(uint64(home.ID), start) {
		m.log.Warn("the key's home did not answer the directory query: misses of its keys wait for it, then go on without holders or shield",
			"home", fmt.Sprintf("%016x", uint64(home.ID)), "addr", home.Addr, "waited", time.Since(start).Round(time.Millisecond), "err", err)
	}
	return nil, "", 0
}

// warnDue reports whether a warning about PoP id may be logged now: once a
// minute per PoP, so a home that stays silent does not flood the log.
func (m *manager) warnDue(id uint64, now time.Time) bool {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if m.warned == nil {
		m.warned = map[uint64]time.Time{}
	}
	if last, ok := m.warned[id]; ok && now.Sub(last) < time.Minute {
		return false
	}
	m.warned[id] = now
	return true
}

// route looks key's home up (Chord), asks it for the holders (or reads
// its own directory when it is the home) and plans the miss over this
// PoP's MBPP view.
func (m *manager) route(ctx context.Context, key string) route {
	self := m.r.selfID()
	rt := route{gateways: map[uint64]string{}}
	ck := chord.ContentKey("", key)
	var holders []string
	homeGW, homeOrigin := "", time.Duration(0)
	owner, err := m.r.lookup(ctx, ck)
	m.mu.Lock()
	gone := err == nil && m.gone[uint64(owner.ID)]
	m.mu.Unlock()
	// A home that has left the view (Chord, in repair, may still name
	// it) is not asked: it would cost the miss queryTimeout for nothing.
	if err == nil && !gone {
		rt.home = uint64(owner.ID)
		if rt.home == self {
			m.mu.Lock()
			holders = m.dir.Holders(time.Now(), ck)
			m.mu.Unlock()
		} else {
			holders, homeGW, homeOrigin = m.askHome(ctx, owner, ck)
		}
	}
	now := time.Now()
	view := map[uint64]mbpp.PeerView{}
	for _, v := range m.r.view(now) {
		view[uint64(v.ID)] = v
	}
	cand := func(id uint64) replica.Candidate {
		v := view[id]
		return replica.Candidate{ID: id, Alive: v.Alive, Score: v.Score, RTT: v.RTT}
	}
	miss := replica.Miss{Self: self, SelfOrigin: time.Duration(m.originRTT.Load())}
	rt.self = cand(self)
	for _, h := range holders {
		id, gw, ok := parseHolder(h)
		if !ok || id == self {
			continue
		}
		rt.gateways[id] = gw
		rt.holders = append(rt.holders, cand(id))
	}
	miss.Holders = rt.holders
	if rt.home != 0 && (rt.home == self || homeGW != "") {
		miss.Home = cand(rt.home)
		miss.SelfHome = view[rt.home].RTT
		miss.HomeOrigin = homeOrigin
		if homeGW != "" {
			rt.gateways[rt.home] = homeGW
		}
	}
	rt.steps = m.cfg.Plan(miss)
	return rt
}
