// Package cluster is the cluster tier: one site served by a front and its
// nodes (SPEC §1–§4). A request's path through it, in folder order:
// front (the data plane: accept, parse, relay or hand off), control (the
// front's control plane: node table, health, load feedback), policy (which
// node serves a request, shared with the simulator), handoff (moving a TCP
// connection by SCM_RIGHTS or TCP_REPAIR), node (the caching web server), peer
// and placement (node-to-node fetch, which nodes store a file), publish (site
// versions to every node at once) and l4 (the raw-TCP front of seed 002).
//
// Packages under cluster import internal/base and each other, never the CDN
// tier, the tools or the wiring packages above them.
package cluster
