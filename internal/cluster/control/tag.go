package control

import "shoal/internal/cluster/policy"

// The shared tag table (policy.Tagger; seed 000 §2.2.2 done by the nodes):
// under a policy that shares one, passfd nodes route a connection's later
// requests by the table themselves and the front learns afterwards, in
// batches, what they did. These calls are the control plane's side of it:
// the table's changes out, the nodes' notes in, each under the cluster lock
// like Pick.

// TagNote is one request a node routed by the shared table.
type TagNote struct {
	// URL is the request's content key.
	URL string
	// Conn is the connection's id, 0 when the front no longer tracks the
	// connection (the note came after its end or a newer move): the URL's
	// row is updated, the connection table is not.
	Conn uint64
	// Node served the request.
	Node int
	// Move: the connection moved to Node for this request, so its hold
	// (Hold) moves with it.
	Move bool
}

// Tagger reports whether the policy shares a tag table.
func (c *Cluster) Tagger() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := policy.TaggerOf(c.pol)
	return ok
}

// TagUpdates returns the shared table's changes since the last call
// (policy.Tagger.TagUpdates), reusing dst; a policy that shares none gives
// an empty update.
func (c *Cluster) TagUpdates(dst policy.TagUpdate) policy.TagUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := policy.TaggerOf(c.pol)
	if !ok {
		// Replaced by a policy that shares none (SIGHUP): the nodes drop
		// their tables and ask the front for every request.
		dst.Reset, dst.Tags, dst.Full = true, dst.Tags[:0], dst.Full[:0]
		return dst
	}
	return tg.TagUpdates(&c.view, dst)
}

// Tagged applies the nodes' notes: each request goes into the policy's
// tables as if Pick had chosen its node (policy.Tagger.Tagged), counts as
// dispatched to that node (Backend.Requests), and a moved connection's hold
// follows it, so the nodes' load counts stay true.
func (c *Cluster) Tagged(notes []TagNote) {
	if len(notes) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tg, ok := policy.TaggerOf(c.pol)
	if !ok {
		return
	}
	now := c.clock()
	for _, n := range notes {
		if n.Node < 0 || n.Node >= len(c.backends) || c.view.Nodes[n.Node].Removed {
			continue
		}
		r := policy.Request{URL: n.URL, Size: -1, Conn: n.Conn, Holder: -1, Now: now}
		if s, ok := c.sizes[n.URL]; ok {
			r.Size = s
		}
		tg.Tagged(&c.view, &r, n.Node)
		c.backends[n.Node].Requests.Add(1)
		if !n.Move || n.Conn == 0 {
			continue
		}
		if c.held == nil {
			c.held = map[uint64]holdEntry{}
		}
		if old, ok := c.held[n.Conn]; ok {
			c.unhold(old.node)
		}
		c.held[n.Conn] = holdEntry{node: n.Node, at: now}
		c.view.Start(n.Node)
		c.backends[n.Node].Held.Add(1)
	}
}

// TagAsked tells the policy a node asked about url (policy.Tagger.TagAsked).
func (c *Cluster) TagAsked(url string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tg, ok := policy.TaggerOf(c.pol); ok {
		tg.TagAsked(url)
	}
}
