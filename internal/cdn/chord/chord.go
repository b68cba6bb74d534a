// Package chord is the Chord ring (Stoica et al., SIGCOMM 2001) that seed
// 003 §1 uses to find which PoPs hold a piece of content in O(log N) hops:
// identifiers are the first 64 bits of SHA-256, each node keeps a finger
// table, a successor list and a predecessor, and repairs them with
// stabilise, fix-fingers and check-predecessor. The PoP that owns a key keeps
// a Directory of the PoPs holding that content (SPEC §5).
//
// Like internal/cdn/mbpp it is a pure state machine: messages and ticks in (the
// time is passed in), messages out; lookups are iterative, so the node that
// asks sees every hop, counts it and routes round a failed one.
package chord

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// ID is a position on the 64-bit identifier circle.
type ID uint64

// Bits is the size of the identifier space, and so of the finger table.
const Bits = 64

// Hash maps a name (a PoP's name, or a content key: site + path) to its ID:
// the first 8 bytes of SHA-256, big-endian.
func Hash(s string) ID {
	h := sha256.Sum256([]byte(s))
	return ID(binary.BigEndian.Uint64(h[:8]))
}

// ContentKey is the key of a piece of content: the hash of its URL, site
// and path.
func ContentKey(site, path string) ID { return Hash(site + path) }

// between reports x ∈ (a, b) on the circle; (a, a) is the whole circle but a.
func between(a, x, b ID) bool {
	if a < b {
		return a < x && x < b
	}
	return x > a || x < b
}

// betweenIncl reports x ∈ (a, b].
func betweenIncl(a, x, b ID) bool { return x == b || between(a, x, b) }

// Peer is a node as others know it.
type Peer struct {
	ID   ID
	Addr string
}

// Config holds the constants of a node; DefaultConfig gives the values.
type Config struct {
	Self Peer
	// Successors is the length of the successor list: the ring survives
	// the failure of Successors−1 consecutive nodes (Chord §E.3). ≥ 3.
	Successors int
	// Stabilise, FixFingers and CheckPredecessor are the periods of the
	// three repair tasks of Chord §4.
	Stabilise, FixFingers, CheckPredecessor time.Duration
	// Timeout is how long a request waits for its answer before the peer
	// is taken as failed.
	Timeout time.Duration
	// MaxHops ends a lookup that does not converge.
	MaxHops int
}

// DefaultConfig returns the defaults for self.
func DefaultConfig(self Peer) Config {
	return Config{Self: self, Successors: 4, Stabilise: 500 * time.Millisecond, FixFingers: 250 * time.Millisecond,
		CheckPredecessor: time.Second, Timeout: time.Second, MaxHops: 2 * Bits}
}

// Validate reports the first value that makes no sense.
func (c Config) Validate() error {
	switch {
	case c.Successors < 3:
		return fmt.Errorf("chord: successor list of %d, want ≥ 3", c.Successors)
	case c.Stabilise <= 0 || c.FixFingers <= 0 || c.CheckPredecessor <= 0 || c.Timeout <= 0:
		return fmt.Errorf("chord: periods and timeout must be > 0")
	case c.MaxHops < 1:
		return fmt.Errorf("chord: max hops must be ≥ 1")
	}
	return nil
}
