// Package cdn is the CDN tier of seed 003 (SPEC §5): points of presence that
// join many clusters with no centre. mbpp (the token ring's global performance
// view) and chord (the ring and content directory) are pure state machines
// driven by a passed-in clock; replica decides which copies a PoP keeps and
// where a miss goes; cdndns routes clients to a PoP; pop wires one PoP
// together; cdnsim runs the same code on a virtual clock; wan is the userspace
// WAN switch for labs.
//
// Packages under cdn import internal/base and each other; pop also reaches the
// cluster tier through the wiring that starts a PoP's front and nodes.
package cdn
