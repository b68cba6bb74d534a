package control

import (
	"cmp"
	"slices"
	"time"
)

// Connections handed off to a node (passfd, hybrid, repair) leave the front,
// but not the node: for the load-aware policies (lc, wlc, p2c, chbl, lard,
// lardr) a node holding 100 handed-off connections is as busy as one with 100
// relayed requests in flight. Hold keeps such a connection counted in the
// node's Active until the node says it ended — a hand-back (FDReturn),
// seed 002's FIN-HANDOFF (FDEnded, repair's FIN message) or the node's
// control channel breaking — and Release takes it off. Without it the count
// dropped to zero at the send, every node looked idle and ties went to node
// 0 (lc once sent 26,935 of 26,935 requests to node 0 under passfd).
//
// The end notices are best effort (a node's FDEnded can be lost with its
// socket full), so the node's own count in its status report bounds the
// holds too (reconcileHeld): a connection held since before the previous
// report must be open at the node, so holds of that age beyond the node's
// active_connections are stale and released, oldest first.

// holdEntry is one held connection: its node and when the hold began.
type holdEntry struct {
	node int
	at   time.Duration
}

// Hold counts connection conn, just handed to b, against b until Release. A
// conn already held (a connection handed on again without its release being
// seen) is moved, not counted twice. conn 0 is not tracked.
func (c *Cluster) Hold(b *Backend, conn uint64) {
	if b == nil || conn == 0 {
		return
	}
	c.mu.Lock()
	if c.held == nil {
		c.held = map[uint64]holdEntry{}
	}
	if old, ok := c.held[conn]; ok {
		c.unhold(old.node)
	}
	if b.Index >= 0 && b.Index < len(c.backends) {
		c.held[conn] = holdEntry{node: b.Index, at: c.clock()}
		c.view.Start(b.Index)
		b.Held.Add(1)
	}
	c.mu.Unlock()
}

// Release reports that connection conn ended at, or came back from, the
// node holding it, and reports whether it was held.
func (c *Cluster) Release(conn uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.held[conn]
	if !ok {
		return false
	}
	delete(c.held, conn)
	c.unhold(e.node)
	return true
}

// ReleaseNode releases every connection held by node i (its handoff socket
// or control channel broke: the kernel closed them) and returns how many.
func (c *Cluster) ReleaseNode(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for conn, e := range c.held {
		if e.node == i {
			delete(c.held, conn)
			c.unhold(i)
			n++
		}
	}
	return n
}

// unhold undoes one Hold on node i. Called with c.mu held.
func (c *Cluster) unhold(i int) {
	c.view.Finish(i)
	c.backends[i].Held.Add(-1)
}

// reconcileHeld bounds node i's holds by its own report: of the holds
// taken before since (the cluster clock, Options.Clock), at most active
// (the node's active_connections) can still be open; the excess, oldest
// first, is released. It returns how many were released.
func (c *Cluster) reconcileHeld(i int, active int64, since time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	type old struct {
		conn uint64
		at   time.Duration
	}
	var olds []old
	for conn, e := range c.held {
		if e.node == i && e.at < since {
			olds = append(olds, old{conn, e.at})
		}
	}
	excess := len(olds) - int(max(active, 0))
	if excess <= 0 {
		return 0
	}
	slices.SortFunc(olds, func(a, b old) int { return cmp.Compare(a.at, b.at) })
	for _, o := range olds[:excess] {
		delete(c.held, o.conn)
		c.unhold(i)
	}
	return excess
}
