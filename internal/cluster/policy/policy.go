// Package policy holds shoal's request-distribution policies: the one piece of
// code that both the live front-end (internal/cluster/front) and the trace-driven
// simulator (internal/tools/sim) run, so a policy that wins in simulation is the very
// code that serves traffic (SPEC §3).
//
// A policy sees the cluster through a *Cluster (nodes with weights, health and
// load counters that the caller maintains) and a Request, and answers with a
// Decision. Policies keep no wall clock and no global random source: time comes
// in Request.Now (real monotonic time in the front, virtual time in the
// simulator) and any randomness from a seeded source given at construction, so
// every policy is deterministic and its tests can spell out exact sequences.
//
// Policies are not safe for concurrent use; the front serialises calls to one
// policy with a mutex (a decision costs tens of nanoseconds, a few hundred
// for the table-keeping tbccrd and weblins; see BenchmarkPick) and the
// simulator is single-threaded.
//
// Build one with New(name, Config); Names lists them (SPEC §3):
//
//	rr, wrr    round robin; LVS weighted round robin exactly as seed 004 §4
//	gwrr       group WRR: WRR over groups, WRR inside the group (seed 004 §3)
//	lc, wlc    LVS least connections, weighted (Active/Weight)
//	dfwrr      WRR with dynamic feedback w += A·cbrt(0.95 − load) (seed 004 §3)
//	urlhash    URL hash mod usable nodes
//	chbl       consistent hashing with bounded loads, ε = 0.25
//	p2c        power of two choices on Active, seeded
//	lard       locality-aware request distribution (Pai et al. 1998)
//	lardr      LARD with replication (server sets that grow and shrink)
//	tbccrd     tag-based cache-cooperative distribution (seed 000 §2.2)
//	weblins    first member, popular set, owner handoff/fetch (seed 001)
//
// Load-aware policies read Node.Active (lc, wlc, p2c, chbl, lard, lardr,
// tbccrd's load limit, weblins' owner overload; Traits.Active); dfwrr reads
// Node.Load. Under those the live front counts a connection handed off to a
// node in its Active until the node reports its end, and derives Load from
// the node's own report
// (docs/policies.md, internal/cluster/control's nodeLoad), so both mean what the
// simulator means by them.
//
// Each policy declares its Traits (Describer): whether it reads the URL and
// where (Placement), the front it runs behind and so what the simulator
// charges it (Front), and the [tuning] keys it reads (Knobs). The front, the
// simulator and the configuration template read them from there, so adding a
// policy touches only this package: a file with the type and a line in the
// constructors table (or Registry.Add outside it; selfdescribing_test.go
// adds one in a single file).
//
// Policies with tables (lard, lardr, tbccrd, weblins) implement Tabler for the
// admin API; tbccrd implements ConnCloser. Sizes a policy learns from a
// response go back through Done with Request.Size set. Their per-URL tables
// are keyed by client input, so each is bounded (Config.MaxURLs and
// MaxURLBytes, least recently requested URL evicted first), and a URL a node
// answered 404, 410 or 403 for (Request.Status in Done) leaves at once.
package policy

import (
	"time"

	"shoal/internal/cluster/placement"
)

// Node is the policy's view of one back-end. The caller owns the slice and
// updates the counters; policies only read them (except through Start/Finish).
type Node struct {
	// Name identifies the node in logs and tables (its URL in the front).
	Name string
	// Weight is the configured, or feedback-adjusted, capacity weight. 0 drains
	// the node: it gets no new requests but in-flight ones finish. A
	// configured weight is at most MaxWeight.
	Weight int
	// Group names the node's capacity class for gwrr.
	Group string
	// Up is the health state; a node that is not Up is never chosen.
	Up bool
	// Removed marks a slot whose node was taken out of the cluster. Slots are
	// never reused or compacted, so a node index is stable for a policy's tables.
	Removed bool
	// Active is the number of requests in flight on the node, as counted by the
	// caller through Cluster.Start and Cluster.Finish.
	Active int
	// Load is the node's last self-reported utilisation in [0,1] (CPU over
	// its cores, or its own busy time when nodes share a process), fed by
	// the front's health checks or the simulator; dfwrr steers by it.
	Load float64
}

// MaxWeight bounds a configured node weight, HAProxy's bound for a server
// weight. The weighted policies sum weights and scale them (dfwrr by up to
// MaxWeightScale, gwrr over a group) in machine integers: an unbounded
// weight such as math.MaxInt64 overflowed those sums and made every
// request 503. Ratios up to 256:1 cover any real difference in capacity.
const MaxWeight = 256

// Usable reports whether the node may receive a new request.
func (n *Node) Usable() bool { return n.Up && !n.Removed && n.Weight > 0 }

// Cluster is the shared view a policy decides over.
type Cluster struct {
	Nodes []Node
	// Version is bumped by the caller whenever membership, weight or health
	// changes, so policies can cache derived values (gcd, max weight, rings).
	Version uint64
	// Storage, when not nil, says which nodes store which file on disk
	// (partitioned storage): the holders of a URL are the
	// Replicas highest weighted-rendezvous scores (internal/cluster/placement).
	// nil means every node stores every file. Weblins' owner, LARD and
	// LARD-R's choice of a new server and tbccrd's disk_hit flags prefer
	// holders, which serve from their disk instead of fetching from a peer.
	Storage *Storage
}

// Storage is the cluster's storage placement as policies see it.
type Storage struct {
	// Nodes are the placement identities, index-aligned with
	// Cluster.Nodes (a removed slot has weight 0 and holds nothing).
	Nodes []placement.Node
	// Replicas is R; 0 or at least the node count means every node.
	Replicas int
}

// Holders appends the indices of the nodes that store key to dst; all
// nodes without a Storage.
func (c *Cluster) Holders(dst []int, key string) []int {
	p := c.Storage
	if p == nil || !partial(p) {
		for i := range c.Nodes {
			dst = append(dst, i)
		}
		return dst
	}
	return placement.Holders(dst, p.Nodes, key, p.Replicas)
}

// Stores reports whether node i stores key on its disk.
func (c *Cluster) Stores(i int, key string) bool {
	p := c.Storage
	if p == nil || !partial(p) {
		return true
	}
	return placement.Holds(p.Nodes, key, p.Replicas, i)
}

// partial reports whether p leaves some node without some file.
func partial(p *Storage) bool {
	return p.Replicas > 0 && placement.Replicas(p.Replicas, p.Nodes) < len(p.Nodes)
}

// Start records that a request was dispatched to node i. An index outside
// Nodes (such as None's -1) is ignored rather than trusted.
func (c *Cluster) Start(i int) {
	if i >= 0 && i < len(c.Nodes) {
		c.Nodes[i].Active++
	}
}

// Finish records that a request on node i completed.
func (c *Cluster) Finish(i int) {
	if i >= 0 && i < len(c.Nodes) && c.Nodes[i].Active > 0 {
		c.Nodes[i].Active--
	}
}

// Request is what a policy knows about one HTTP request.
type Request struct {
	// URL is the request path (the content key).
	URL string
	// Size is the object's size in bytes when known, else -1.
	Size int64
	// Conn identifies the client connection (tbccrd's connection table, keyed
	// by client address and port in the front). 0 means "no connection state".
	Conn uint64
	// Holder is the node currently holding the client connection, -1 for a
	// connection that has not been placed yet.
	Holder int
	// Now is monotonic time from the caller: real in the front, virtual in sim.
	Now time.Duration
	// Status is the node's response status, set by the caller before Done
	// when it saw the response (the front's relay path); 0 when unknown
	// (passfd and repair hand the connection over and never see it; the
	// simulator). Policies with per-URL tables drop a URL the node
	// answered 404, 410 or 403 for, so URLs no node can serve are not kept.
	Status int
}

// Decision is a policy's answer.
type Decision struct {
	// Node is the chosen node's index in Cluster.Nodes, or -1 when no node can
	// take the request (the front answers 503).
	Node int
	// Handoff asks for the client connection to be moved to Node (tbccrd's tag
	// differing from the holder; weblins' large-file handoff). Paths that cannot
	// hand off relay instead.
	Handoff bool
	// Fetch, when >= 0, tells the serving node to fetch the object from that
	// node's memory rather than its own disk (weblins' cooperative fetch).
	Fetch int
}

// None is the decision for "no node available".
var None = Decision{Node: -1, Fetch: -1}

// Policy chooses a node for each request.
type Policy interface {
	// Name is the policy's short name as used on the command line.
	Name() string
	// Pick chooses a node for r. It must not call Start; the caller does after
	// it has actually dispatched the request.
	Pick(c *Cluster, r *Request) Decision
	// Done tells the policy that a request it placed on node finished, so
	// policies that keep tables (lard, tbccrd) can update them.
	Done(c *Cluster, node int, r *Request)
}

// ConnCloser is implemented by policies that keep per-connection state
// (tbccrd's connection table); the caller reports closed connections.
type ConnCloser interface {
	CloseConn(conn uint64)
}
