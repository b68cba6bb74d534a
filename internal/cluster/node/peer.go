package node

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
	"shoal/internal/cluster/peer"
)

// Peer fetch (seed 001; internal/cluster/peer). The front's decision may name
// another node whose memory holds the object (policy.Decision.Fetch); it
// reaches this node as FetchHeader on relay, from a front in
// Config.TrustedFronts only, and as the handoff message's fetch field on
// passfd (handoff.FDHeader.Fetch), which only a front on this host can
// send. On a cache miss with such a hint the node gets the object from that
// peer's memory instead of its disk, streaming it to the client as it
// arrives when the answer is a plain 200, and keeps no copy (seed 001: the
// first member does not cache what it fetched from the owner, so the
// cluster's memory holds each file once; the simulator does the same). A
// failed fetch falls back to the local disk.

// FetchHeader is the request header by which a front tells a node to fetch
// the object from another node's memory: the node's index in the front's
// list (Config.Peer.Peers). The front removes any copy a client sent.
const FetchHeader = "Shoal-Fetch"

// appendEcho appends the front's token (httpwire.SeqHeader) of the request
// headers hs, when there is one holding a token as fronts write it: the
// front then knows the answer is that request's without peeking at its
// pooled connection first (front/echo.go). Echoing a short hex token back
// to whoever sent it reveals and enables nothing, so every sender gets it.
func appendEcho(out []byte, hs []httpwire.Header) []byte {
	v := httpwire.LastSeq(hs)
	if _, ok := httpwire.ParseSeq(v); !ok {
		return out
	}
	out = append(out, httpwire.SeqHeader+": "...)
	out = append(out, v...)
	return append(out, crlf...)
}

// peerEnabled reports whether cfg turns peer cooperation on: the cluster
// key is set. The peers may come later, from a published version
// (peer.MembersName): a node joining a running partitioned cluster starts
// with the key alone.
func peerEnabled(cfg *Config) bool { return len(cfg.Peer.Key) > 0 }

// startPeer creates the node's peer host and starts its digest exchange.
func (s *Server) startPeer() error {
	pc := s.cfg.Peer
	if pc.Logger == nil {
		pc.Logger = s.cfg.Logger
	}
	h, err := peer.New(pc, s)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	s.peer = h
	h.Start()
	return nil
}

// PeerStats returns the peer counters; zero when peer fetch is off.
func (s *Server) PeerStats() peer.Stats {
	if s.peer == nil {
		return peer.Stats{}
	}
	return s.peer.Stats()
}

// CacheKeys implements peer.Local: every key in the memory tier of the
// object store.
func (s *Server) CacheKeys(add func(key string)) { s.objs.MemoryKeys(add) }

// PeerObject implements peer.Local for what PeerFile leaves to it, which
// is nothing: PeerFile lends every body the node can send. It reads the
// body whole, for a peer host that would ask anyway.
func (s *Server) PeerObject(r peer.Request) ([]byte, bool, error) {
	rc, size, err := s.PeerFile(r)
	if err != nil {
		return nil, false, err
	}
	defer rc.Close()
	body := make([]byte, size)
	if _, err := io.ReadFull(rc, body); err != nil {
		return nil, false, fmt.Errorf("node: read %s for a peer: %w", r.URL, err)
	}
	m, _ := rc.(interface{ FromMemory() bool })
	return body, m != nil && m.FromMemory(), nil
}

// PeerFile implements peer.Local: a peer asks for r. The body comes from
// the object store, or else from the disk, and is then offered to the
// store (this node is the object's owner in Weblins' terms); the peer host
// reads it in chunks without the node ever holding it on the Go heap. The
// reader tells whether the body was in memory (FromMemory).
func (s *Server) PeerFile(r peer.Request) (io.ReadCloser, int64, error) {
	if s.edge != nil {
		return s.edge.peerFile(r) // cache mode: a stored response (edge_peer.go)
	}
	site, tbl, e, sel, vary, err := s.peerSelect(r)
	if err != nil {
		return nil, 0, err
	}
	key := peerCacheKey(site.name, e.URL, r.Coding)
	if h, o := s.cached(key, sel, vary); o != nil {
		return &handleReader{h: h, mem: true}, sel.Size, nil
	}
	if sel.Remote {
		// Not in memory and not on this disk: never fetch on a peer's
		// behalf (no chains, no loops); the asker tries a holder.
		return nil, 0, peer.ErrNotFound
	}
	var o *object
	if sel.Size <= s.maxObject {
		o = buildObject(s.cfg.ServerName, sel, site.rules.contentType(e), r.Coding, vary, sel.Size)
		o.rule = site.rules.rule(e.URL)
	}
	h, err := s.link(tbl, sel, key, o)
	if err != nil {
		return nil, 0, err
	}
	return &handleReader{h: h}, sel.Size, nil
}

// peerSelect finds the representation a peer's request names: the site,
// its table, the file's entry, the selected variant and whether the file
// has variants. ErrNotFound when there is none, ErrVersion when its ETag
// is not the asker's.
func (s *Server) peerSelect(r peer.Request) (st *vsite, tbl *content.Table, e, sel *content.Entry, vary bool, err error) {
	st = s.single
	if s.sites != nil {
		st = s.sites[r.Site]
	}
	if st == nil {
		return nil, nil, nil, nil, false, peer.ErrNotFound
	}
	tbl = st.store.Snapshot()
	e = tbl.Exact(r.URL)
	if e == nil || e.IsDir {
		return nil, nil, nil, nil, false, peer.ErrNotFound
	}
	sel = e
	if set := st.variantsOf(tbl)[e]; set != nil && !s.cfg.NoPrecompressed {
		vary = true
		if r.Coding != "" {
			sel = nil
			for i, v := range variants {
				if v.coding == r.Coding {
					sel = set[i]
				}
			}
		}
	} else if r.Coding != "" {
		sel = nil
	}
	if sel == nil {
		return nil, nil, nil, nil, false, peer.ErrNotFound
	}
	if sel.ETag != r.ETag {
		return nil, nil, nil, nil, false, peer.ErrVersion
	}
	return st, tbl, e, sel, vary, nil
}

// peerCacheKey is conn.cacheKey's form, built for a peer's request.
func peerCacheKey(site, url, coding string) string {
	if coding == "" && site == "" {
		return url
	}
	k := ""
	if coding != "" {
		k = coding + ":"
	}
	return k + site + url
}

// upgradePeer answers a node's request for the peer protocol on this
// node's port: 101, then the connection leaves the HTTP server for
// peer.Host.ServeConn (serve's deferred end), which refuses a peer without
// the cluster key. Bytes sent before the 101 are a protocol error.
func (c *conn) upgradePeer(now time.Time) bool {
	if c.r != c.w {
		c.simple(400, "", now, true, false, "bytes after the upgrade request")
		return false
	}
	c.out = append(c.out, peer.UpgradeResponse...)
	c.peerUp = true
	return false
}

// servePeer runs the peer protocol on an upgraded connection.
func (c *conn) servePeer() {
	c.state.Store(stClosed) // the sweeper and Shutdown leave it to the peer host
	c.s.peer.ServeConn(c.nc)
}

// fetchHint is the node the front's decision names for the current
// request, or -1: the handoff's field, or FetchHeader from a trusted front.
func (c *conn) fetchHint() int {
	p := c.s.peer
	if p == nil {
		return -1
	}
	i := c.hint
	if i < 0 && c.front {
		i = headerHint(c.req.Headers)
	}
	if !p.Usable(i) {
		return -1
	}
	return i
}

// headerHint parses the last FetchHeader, -1 when there is none or it is
// not a small decimal.
func headerHint(hs []httpwire.Header) int {
	v := []byte(nil)
	for _, h := range hs {
		if len(h.Name) == len(FetchHeader) && httpwire.EqualFold(h.Name, FetchHeader) {
			v = h.Value
		}
	}
	if len(v) == 0 || len(v) > 5 {
		return -1
	}
	n := 0
	for _, ch := range v {
		if ch < '0' || ch > '9' {
			return -1
		}
		n = n*10 + int(ch-'0')
	}
	return n
}

// fromPeer serves a cache miss from a peer: the one the decision names
// (the hint wins when that peer has the object in memory), then, for a
// file this node does not store (a partitioned site, content.Entry.Remote),
// each of its holders in placement order until one answers. done means the
// response was sent (streamed; keep is then serveFile's result). Otherwise
// o and body are the fetched object for serveFile to answer from (a HEAD, a range, a
// precondition), or nil: no candidate, or every fetch failed before any
// byte went out; serveFile then reads the disk, or answers 502 for a
// Remote file. A hinted fetch of a file this node stores is not cached
// (seed 001); a Remote file goes to the cache as the replacement policy
// decides, since this node has no disk copy to fall back on. mem reports
// that o came from the peer's memory (it did not read its disk), for
// Status.Served.
func (c *conn) fromPeer(tbl *content.Table, e, sel *content.Entry, key, ctype, coding string, vary bool,
	rule *headerRule, now time.Time, closeAfter, head bool) (o *object, body []byte, mem, done, keep bool) {
	if c.s.peer == nil {
		return nil, nil, false, false, false
	}
	var candBuf [8]int
	cs := candBuf[:0]
	if i := c.fetchHint(); i >= 0 {
		cs = append(cs, i)
	}
	if sel.Remote {
		cs = c.s.holderPeers(cs, sel)
	}
	if len(cs) == 0 {
		return nil, nil, false, false, false
	}
	req := &c.req
	r := peer.Request{Site: c.site.name, URL: e.URL, Coding: coding, ETag: sel.ETag, Size: sel.Size, Key: key}
	plain := !head && req.Range == nil && sel.Size > 0 && precondition(req, &c.cond, sel.ETag, sel.ModTime, now) == 0
	if !plain {
		body, mem, err := c.s.fetchAny(cs, r, nil)
		if err != nil {
			return nil, nil, false, false, false
		}
		o = buildObject(c.s.cfg.ServerName, sel, ctype, coding, vary, int64(len(body)))
		o.rule = rule
		c.s.keepRemote(sel, key, o, body)
		return o, body, mem, false, false
	}
	done, keep = c.relayFetch(tbl, sel, cs, r, ctype, coding, vary, rule, now, closeAfter)
	return nil, nil, false, done, keep
}

// relayFetch answers a plain 200 from the first of cs that has r: the head
// goes out with the first chunk, each chunk as it arrives. done false
// means nothing went out (the caller reads the disk); otherwise keep is
// serveFile's result.
func (c *conn) relayFetch(tbl *content.Table, sel *content.Entry, cs []int, r peer.Request, ctype, coding string, vary bool,
	rule *headerRule, now time.Time, closeAfter bool) (done, keep bool) {
	key := r.Key
	mark, seg, nbufs := len(c.out), c.segStart, len(c.bufs)
	c.out = httpwire.AppendStatusLine(c.out, 200)
	c.out = httpwire.AppendHeader(c.out, "Content-Type", ctype)
	c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", sel.Size)
	c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, string(httpwire.AppendHTTPDate(nil, sel.ModTime)), coding, vary)
	c.out = httpwire.AppendHeader(c.out, "Accept-Ranges", "bytes")
	c.out = appendRule(c.out, rule, now)
	c.finish(now, closeAfter)
	var sent int64
	var werr error
	started := false
	sink := func(chunk []byte) {
		if werr != nil {
			return
		}
		if !started {
			started = true
			if werr = c.flush(); werr != nil {
				return
			}
		}
		n, err := c.nc.Write(chunk)
		c.nbytes += int64(n)
		sent += int64(n)
		werr = err
		c.since.Store(time.Now().UnixNano()) // progress, for WriteTimeout
	}
	var body []byte
	var mem bool
	var err error
	k := 0
	for ; k < len(cs); k++ {
		if body, mem, _, err = c.s.peer.Fetch(cs[k], r, sink); err == nil || started {
			break
		}
		c.s.cfg.Logger.Debug("peer fetch", "url", sel.URL, "peer", cs[k], "err", err)
	}
	if err != nil && !started {
		// Nothing went out: take the head back; the caller reads the disk.
		c.out, c.segStart = c.out[:mark], seg
		clear(c.bufs[nbufs:])
		c.bufs = c.bufs[:nbufs]
		return false, false
	}
	c.logRequest(now, 200, sel.Size)
	c.served.ObjectBytes += sel.Size
	if err != nil {
		// Part of the body went out: the rest from the disk, or from the
		// next holder.
		c.s.cfg.Logger.Warn("peer fetch failed midway; finishing from another copy", "url", sel.URL, "peer", cs[k], "sent", sent, "err", err)
		var rerr error
		if sel.Remote {
			body, _, rerr = c.s.fetchAny(cs[k+1:], r, nil)
		} else {
			body, rerr = readSmall(tbl, sel)
		}
		if rerr != nil || werr != nil {
			return true, false
		}
	} else if mem {
		c.served.MemoryBytes += sel.Size
	}
	if sel.Remote {
		o := buildObject(c.s.cfg.ServerName, sel, ctype, coding, vary, int64(len(body)))
		o.rule = rule
		c.s.keepRemote(sel, key, o, body)
	}
	if werr != nil {
		return true, false
	}
	if !started {
		// Another request's fetch brought the bytes (collapsed).
		c.appendBody(body)
		return true, !closeAfter
	}
	if sent < int64(len(body)) {
		n, err := c.nc.Write(body[sent:])
		c.nbytes += int64(n)
		if err != nil {
			return true, false
		}
	}
	return true, !closeAfter
}

// holderPeers appends to cs the peer indices of sel's holders (placement
// IDs are the peers' addresses), best first, skipping this node, unknown
// IDs and indices already in cs.
func (s *Server) holderPeers(cs []int, sel *content.Entry) []int {
	for _, id := range sel.Holders {
		i, ok := s.peer.Index(id)
		if ok && s.peer.Usable(i) && !slices.Contains(cs, i) {
			cs = append(cs, i)
		}
	}
	return cs
}

// fetchAny fetches r from the first of cs that has it; mem reports that
// the peer answered from its memory.
func (s *Server) fetchAny(cs []int, r peer.Request, sink func([]byte)) (body []byte, mem bool, err error) {
	err = fmt.Errorf("node: %s: no peer to fetch from", r.URL)
	for _, i := range cs {
		if body, mem, _, err = s.peer.Fetch(i, r, sink); err == nil {
			return body, mem, nil
		}
		s.cfg.Logger.Debug("peer fetch", "url", r.URL, "peer", i, "err", err)
	}
	return nil, false, err
}

// keepRemote offers a fetched body of a file this node does not store to
// the object store's memory tier (whose replacement policy decides); other
// fetched bodies are not kept (seed 001).
func (s *Server) keepRemote(sel *content.Entry, key string, o *object, body []byte) {
	if !sel.Remote || int64(len(body)) > s.maxObject {
		return
	}
	s.objs.Hold(strings.Clone(key), body, nil, o)
}

// noHolder answers for a file of a partitioned site that no holder could
// send: 502, the node being a gateway to the holders for it.
func (c *conn) noHolder(sel *content.Entry, now time.Time, closeAfter, head bool) bool {
	c.s.cfg.Logger.Warn("no holder answered", "url", sel.URL, "holders", sel.Holders)
	c.simple(502, "", now, closeAfter, head, "no node storing this file answered")
	return !closeAfter
}
