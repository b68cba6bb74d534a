package policy

// Tagger is implemented by a policy whose decisions the nodes can apply
// themselves from a table the front shares with them: tbccrd, whose front
// in seed 000 (§2.2.2) tags every URL request with the node that caches the
// URL, and whose nodes then hand the connection to that node among
// themselves. In shoal's same-host passfd path the front cannot see the
// requests that follow on a connection it passed, so it shares the part of
// its URL table whose answer does not depend on the connection (Tag) and
// the nodes route those requests by it, telling the front afterwards
// (Tagged) so its tables stay those Pick would have kept; for every other
// request the node asks the front, which picks as usual (TagAsked).
type Tagger interface {
	Policy
	// TagUpdates returns what changed in the shared table since the last
	// call, reusing dst's slices. The first call starts the change log (a
	// policy nobody asks keeps none) and returns Reset.
	TagUpdates(c *Cluster, dst TagUpdate) TagUpdate
	// Tagged records that a node served r on node by the shared table,
	// without asking: the policy's tables become what they would be had
	// Pick answered node for r (the URL's cache flag and recency on node,
	// the connection's entry), including when the shared entry was stale.
	Tagged(c *Cluster, r *Request, node int)
	// TagAsked records that a node asked about url (its table had no
	// usable entry), so the next TagUpdates carries url's current entry:
	// each node asks about a URL once, not once per request.
	TagAsked(url string)
}

// Tag is one entry of the shared table: requests for URL go to Node, or,
// with Node -1, to the front (the answer depends on the connection or on
// loads the nodes do not see).
type Tag struct {
	URL  string
	Node int
	// Holders, for an entry with Node -1, is the set of usable nodes that
	// cache the URL (bit i: node i; nodes 0–31 only, else 0): a node that
	// knows every node's connection count (TagUpdate.Loads) can take
	// step (1) of seed 000 §2.2.2 itself, the least loaded holder below
	// the load limit. 0: ask the front.
	Holders uint32
}

// TagUpdate is a batch of changes to the shared table.
type TagUpdate struct {
	// Reset: the nodes drop every entry before applying Tags (a node
	// became usable or unusable, or the change log overflowed).
	Reset bool
	// Tags are the entries that changed, each URL once.
	Tags []Tag
	// Full is, per node, whether it holds LoadLimit connections or more:
	// its entries must not be used while it is full (seed 000 §2.2.2 step
	// 2 then picks a disk holder, which depends on loads).
	Full []bool
	// Loads is, per node, its open connections as the policy counts them,
	// and LoadLimit the policy's limit: with Holders, what step (1) needs.
	Loads     []int
	LoadLimit int
}

// maxTagLog bounds the URLs waiting in a change log; beyond it the log
// turns into a Reset.
const maxTagLog = 1 << 16

// tagLog collects the URLs whose shared entry may have changed.
type tagLog struct {
	dirty  map[string]struct{}
	reset  bool
	usable []bool // by node, when last drained: a change is a Reset
}

// usableChanged records which of c's nodes are usable and reports whether
// that differs from the last call (health checks bump Cluster.Version on
// every report, so the version alone would reset the nodes' tables each
// time).
func (l *tagLog) usableChanged(c *Cluster) bool {
	changed := len(l.usable) != len(c.Nodes)
	if changed {
		l.usable = make([]bool, len(c.Nodes))
	}
	for i := range c.Nodes {
		if u := c.Nodes[i].Usable(); u != l.usable[i] {
			l.usable[i], changed = u, true
		}
	}
	return changed
}

// mark records that url's entry may have changed.
func (l *tagLog) mark(url string) {
	if l.reset || url == "" {
		return
	}
	if len(l.dirty) >= maxTagLog {
		l.reset = true
		clear(l.dirty)
		return
	}
	l.dirty[url] = struct{}{}
}

// TagUpdates implements Tagger. An entry names a node when that node is the
// only usable one whose cache_hit flag is set for the URL: step (1) of
// seed 000 §2.2.2 then picks it for every connection, as long as it is
// below the load limit, which Full tells. With several cache holders the
// least loaded one wins and the entry is -1 (ask the front).
func (p *TBCCRD) TagUpdates(c *Cluster, dst TagUpdate) TagUpdate {
	dst.Reset, dst.Tags, dst.Full, dst.Loads = false, dst.Tags[:0], dst.Full[:0], dst.Loads[:0]
	dst.LoadLimit = p.loadLimit
	if p.tags == nil {
		p.tags = &tagLog{dirty: map[string]struct{}{}, reset: true}
		p.t.onCache = p.tags.mark
	}
	l := p.tags
	if l.usableChanged(c) {
		l.reset = true
	}
	if l.reset {
		l.reset = false
		clear(l.dirty)
		dst.Reset = true
	}
	for u := range l.dirty {
		g := Tag{URL: u, Node: -1}
		if id, ok := p.t.lookup(u); ok {
			g.Node = p.tagOf(c, id)
			if g.Node < 0 {
				g.Holders = p.holdersOf(c, id)
			}
		}
		dst.Tags = append(dst.Tags, g)
	}
	clear(l.dirty)
	for i := range c.Nodes {
		n := 0
		if i < len(p.connCount) {
			n = p.connCount[i]
		}
		dst.Full = append(dst.Full, n >= p.loadLimit)
		dst.Loads = append(dst.Loads, n)
	}
	return dst
}

// holdersOf is row id's usable cache holders as a bit set (Tag.Holders),
// 0 when there are none or one has an index above 31.
func (p *TBCCRD) holdersOf(c *Cluster, id int32) uint32 {
	var m uint32
	for i, cell := range p.t.rows[id].cells {
		if cell.cache && i < len(c.Nodes) && c.Nodes[i].Usable() {
			if i >= 32 {
				return 0
			}
			m |= 1 << i
		}
	}
	return m
}

// tagOf is row id's shared entry: its only usable cache holder, else -1.
func (p *TBCCRD) tagOf(c *Cluster, id int32) int {
	one := -1
	for i, cell := range p.t.rows[id].cells {
		if cell.cache && i < len(c.Nodes) && c.Nodes[i].Usable() {
			if one >= 0 {
				return -1
			}
			one = i
		}
	}
	return one
}

// Tagged implements Tagger: Pick's step (3) for a tag the node applied,
// and step (2)'s caching when the node served a URL the mirror did not
// have there (an entry that changed while the node used it: the node's
// cache now holds the URL, so the mirror must too).
func (p *TBCCRD) Tagged(c *Cluster, r *Request, node int) {
	if p.v.refresh(c) {
		p.sync(c)
	}
	p.sweep(r.Now)
	if node < 0 || node >= len(c.Nodes) || r.URL == "" {
		return
	}
	id, e := p.t.row(r.URL, len(c.Nodes), c)
	if r.Size >= 0 {
		p.t.setSize(id, r.Size)
	}
	if p.t.cached(id, node) {
		p.t.hit(id, node, r.Now)
	} else {
		p.t.insert(id, node, r.Now)
	}
	e.cells[node].last = r.Now
	if r.Conn == 0 {
		return
	}
	if ce, ok := p.conns[r.Conn]; ok && ce.node < len(p.connCount) && p.connCount[ce.node] > 0 {
		p.connCount[ce.node]--
	}
	p.conns[r.Conn] = tbConn{node: node, last: r.Now}
	p.connCount[node]++
}

// TagAsked implements Tagger.
func (p *TBCCRD) TagAsked(url string) {
	if p.tags != nil {
		p.tags.mark(url)
	}
}

var _ Tagger = (*TBCCRD)(nil)

// TaggerOf returns p as a Tagger: p itself, or the current policy of a
// Switch (call it under the cluster's lock, as Switch.Current wants).
func TaggerOf(p Policy) (Tagger, bool) {
	if s, ok := p.(*Switch); ok {
		p = s.Current()
	}
	t, ok := p.(Tagger)
	return t, ok
}
