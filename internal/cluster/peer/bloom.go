package peer

import (
	"encoding/binary"
	"errors"
	"math"
)

// Bloom is the cache digest a node sends its peers (Summary Cache: Fan,
// Cao, Almeida and Broder, "Summary Cache: A Scalable Wide-Area Web Cache
// Sharing Protocol", IEEE/ACM ToN 8(3), 2000, §V): a Bloom filter of the
// keys in the node's memory cache. A peer asks it whether a key is cached
// there; "no" is certain, "yes" is wrong with probability FalsePositive.
//
// The filter has m = 2^b bits and k hash functions made from one 64-bit
// FNV-1a hash split in halves h1, h2 (Kirsch and Mitzenmacher, "Less
// hashing, same performance", ESA 2006): bit i = (h1 + i·h2) mod m, with h2
// odd. The same key sets the same bits on every node, so digests compare
// across the cluster.
type Bloom struct {
	words []uint64
	mask  uint32 // m − 1
	k     uint8
	n     int // keys added
}

// Digest sizing: BitsPerKey bits per cached key (rounded up to a power of
// two, so between 16 and 32) with BloomK hashes give a false-positive rate
// of at most (1 − e^(−4/16))^4 ≈ 0.24 % (Summary Cache recommends a load
// factor of 8 to 16 with 4 hashes). MinBits and MaxBits bound the filter:
// 1 Kibit (128 bytes) when the cache is nearly empty, 4 Mibit (512 KiB, half
// a peer frame) at most.
const (
	BitsPerKey = 16
	BloomK     = 4
	MinBits    = 1 << 10
	MaxBits    = 1 << 22
)

// NewBloom returns an empty filter sized for n keys.
func NewBloom(n int) *Bloom {
	m := uint64(MinBits)
	for m < uint64(n)*BitsPerKey && m < MaxBits {
		m <<= 1
	}
	return &Bloom{words: make([]uint64, m/64), mask: uint32(m - 1), k: BloomK}
}

// fnv64a is FNV-1a over s, without converting it to bytes.
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Add inserts key.
func (b *Bloom) Add(key string) {
	h := fnv64a(key)
	h1, h2 := uint32(h), uint32(h>>32)|1
	for i := uint32(0); i < uint32(b.k); i++ {
		bit := (h1 + i*h2) & b.mask
		b.words[bit/64] |= 1 << (bit % 64)
	}
	b.n++
}

// Has reports whether key may have been added.
func (b *Bloom) Has(key string) bool {
	h := fnv64a(key)
	h1, h2 := uint32(h), uint32(h>>32)|1
	for i := uint32(0); i < uint32(b.k); i++ {
		bit := (h1 + i*h2) & b.mask
		if b.words[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// Bits is m, the filter's size in bits.
func (b *Bloom) Bits() int { return int(b.mask) + 1 }

// Keys is the number of keys added.
func (b *Bloom) Keys() int { return b.n }

// FalsePositive is the expected false-positive rate for the keys added:
// (1 − e^(−k·n/m))^k.
func (b *Bloom) FalsePositive() float64 {
	return math.Pow(1-math.Exp(-float64(b.k)*float64(b.n)/float64(b.Bits())), float64(b.k))
}

// errDigest is returned for a digest frame that does not decode.
var errDigest = errors.New("peer: malformed digest")

// appendTo appends the wire form: k (1 byte), keys (4), bits m (4), words.
func (b *Bloom) appendTo(dst []byte) []byte {
	dst = append(dst, b.k)
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.n))
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.Bits()))
	for _, w := range b.words {
		dst = binary.BigEndian.AppendUint64(dst, w)
	}
	return dst
}

// parseBloom decodes appendTo's form; m must be a power of two within
// [MinBits, MaxBits] and k at most 16, so a peer cannot make Has loop long.
func parseBloom(p []byte) (*Bloom, error) {
	if len(p) < 9 {
		return nil, errDigest
	}
	k, n, m := p[0], binary.BigEndian.Uint32(p[1:5]), binary.BigEndian.Uint32(p[5:9])
	if k == 0 || k > 16 || m < MinBits || m > MaxBits || m&(m-1) != 0 || len(p) != 9+int(m/8) {
		return nil, errDigest
	}
	b := &Bloom{words: make([]uint64, m/64), mask: m - 1, k: k, n: int(n)}
	for i := range b.words {
		b.words[i] = binary.BigEndian.Uint64(p[9+8*i:])
	}
	return b, nil
}
