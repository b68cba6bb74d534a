// Package placement decides which nodes store a file when the site is
// partitioned over the nodes' disks (seed
// 001 spreads the documents over the nodes' disks): each content key lives
// on R nodes, chosen by weighted rendezvous hashing (highest random weight,
// Thaler and Ravishankar 1998; the weighted form of Schindelhauer and
// Schomaker 2005). Every node n gets, for key k, the score
//
//	score(n, k) = -w(n) / ln(u(n, k))
//
// where w(n) is the node's weight (its disk size) and u(n, k) in (0, 1) comes
// from a 64-bit hash of the node's id and the key; the R highest scores hold
// the key. A node's expected share of keys is proportional to its weight,
// and adding or removing one node moves only the keys that node gains or
// loses: every other node's score for every key is unchanged, so their
// relative order is too. That is what keeps a join's or a leave's moved
// bytes at the node's own share.
//
// The package is pure: no state, no clock, no randomness beyond the hash,
// so the publisher, the nodes, the front and the simulator all compute the
// same holders from the same membership.
package placement

import (
	"math"
	"slices"
)

// Node is one storage node as placement sees it.
type Node struct {
	// ID names the node stably (the node's address in `shoal up`): the
	// hash input, so a node keeps its keys for as long as it keeps its ID.
	ID string
	// Weight is the node's capacity (disk size in any unit, the same unit
	// for all nodes). A node of weight 0 or less holds nothing.
	Weight float64
}

// Replicas clamps r to the number of nodes that can hold data: r <= 0 or
// r > the usable count means all of them (every node a full copy, shoal's
// behaviour before partitioning).
func Replicas(r int, nodes []Node) int {
	n := 0
	for _, nd := range nodes {
		if nd.Weight > 0 {
			n++
		}
	}
	if r <= 0 || r > n {
		return n
	}
	return r
}

// Hash is the 64-bit hash of (id, key): FNV-1a over id, a zero byte and
// key, then the splitmix64 finaliser so that nearby inputs give
// independent-looking outputs. Exported for tests and the docs' hand
// computation.
func Hash(id, key string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime
	}
	h *= prime // the zero separator byte: h ^= 0; h *= prime
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime
	}
	return Mix64(h)
}

// Mix64 is the splitmix64 finaliser (Steele, Lea and Flood, 2014): each
// input bit flips about half the output bits. policy's hash ring uses it too,
// so the two spread keys alike.
func Mix64(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// Score is node n's weighted rendezvous score for key: -w/ln(u), u the top
// 53 bits of Hash mapped into the open interval (0, 1). 0 for a node of
// no weight.
func Score(n Node, key string) float64 {
	if n.Weight <= 0 {
		return 0
	}
	u := (float64(Hash(n.ID, key)>>11) + 0.5) / (1 << 53)
	return -n.Weight / math.Log(u)
}

// Holders appends to dst the indices (into nodes) of the r nodes that hold
// key, best first, and returns it; r is clamped by Replicas. Ties (equal
// scores, which needs equal hashes) go to the lower index.
func Holders(dst []int, nodes []Node, key string, r int) []int {
	r = Replicas(r, nodes)
	if r == 0 {
		return dst
	}
	base := len(dst)
	var scores [16]float64
	sc := scores[:0]
	if r > len(scores) {
		sc = make([]float64, 0, r)
	}
	for i, n := range nodes {
		s := Score(n, key)
		if s <= 0 {
			continue
		}
		// Insert into the top-r list kept sorted by score, descending.
		j := len(sc)
		for j > 0 && s > sc[j-1] {
			j--
		}
		if j >= r {
			continue
		}
		if len(sc) < r {
			sc = append(sc, 0)
			dst = append(dst, 0)
		}
		copy(sc[j+1:], sc[j:len(sc)-1])
		copy(dst[base+j+1:], dst[base+j:len(dst)-1])
		sc[j], dst[base+j] = s, i
	}
	return dst
}

// Holds reports whether node i is among key's r holders.
func Holds(nodes []Node, key string, r, i int) bool {
	var buf [16]int
	return slices.Contains(Holders(buf[:0], nodes, key, r), i)
}

// Move is the effect of a membership change on the stored copies.
type Move struct {
	// Moved is the bytes copied to nodes that did not hold them before
	// (each new copy counted once); Files how many copies that is.
	Moved int64
	Files int
	// Dropped is the bytes nodes may delete (copies no longer theirs).
	Dropped int64
	// Lost is the bytes of keys with no surviving holder (no copy can be
	// made from the cluster; the publisher must send them again).
	Lost int64
}

// File is one content key and its size.
type File struct {
	Key  string
	Size int64
}

// Diff computes what changing the membership from before to after moves,
// with r replicas in both. Nodes are matched by ID, so the two lists may
// order them differently; a node in before and not in after has left (or
// died) and cannot be a source.
func Diff(files []File, before, after []Node, r int) Move {
	alive := make(map[string]bool, len(after))
	for _, n := range after {
		alive[n.ID] = true
	}
	var m Move
	var hb, ha []int
	for _, f := range files {
		hb = Holders(hb[:0], before, f.Key, r)
		ha = Holders(ha[:0], after, f.Key, r)
		had := make(map[string]bool, len(hb))
		surviving := false
		for _, i := range hb {
			had[before[i].ID] = true
			surviving = surviving || alive[before[i].ID]
		}
		if !surviving {
			m.Lost += f.Size
			continue
		}
		now := make(map[string]bool, len(ha))
		for _, i := range ha {
			now[after[i].ID] = true
			if !had[after[i].ID] {
				m.Moved += f.Size
				m.Files++
			}
		}
		for id := range had {
			if alive[id] && !now[id] {
				m.Dropped += f.Size
			}
		}
	}
	return m
}

// Share is the bytes of files node id holds under nodes with r replicas:
// the ideal a joining node's moved bytes are measured against.
func Share(files []File, nodes []Node, r int, id string) int64 {
	var total int64
	var h []int
	for _, f := range files {
		h = Holders(h[:0], nodes, f.Key, r)
		for _, i := range h {
			if nodes[i].ID == id {
				total += f.Size
			}
		}
	}
	return total
}
