package peer

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"shoal/internal/base/cache"
)

// TestBloomBits: the bits a key sets, worked by hand. FNV-1a("a") =
// 0xaf63dc4c8601ec8c, so h1 = 0x8601ec8c (≡ 140 mod 1024) and h2 =
// 0xaf63dc4c|1 = 0xaf63dc4d (≡ 77 mod 1024): bits 140, 217, 294, 371 of a
// 1024-bit filter, and no other.
func TestBloomBits(t *testing.T) {
	b := NewBloom(1)
	if b.Bits() != 1024 {
		t.Fatalf("bits %d, want 1024", b.Bits())
	}
	b.Add("a")
	want := map[int]bool{140: true, 217: true, 294: true, 371: true}
	for i := range b.Bits() {
		if set := b.words[i/64]&(1<<(i%64)) != 0; set != want[i] {
			t.Errorf("bit %d set=%v, want %v", i, set, want[i])
		}
	}
	if !b.Has("a") || b.Has("b") {
		t.Errorf("Has(a)=%v Has(b)=%v", b.Has("a"), b.Has("b"))
	}
}

// TestBloomSize: the digest's size and expected false-positive rate for
// the key counts of the tested caches — 16 to 32 bits per key, 4 hashes:
// (1 − e^(−4n/m))^4.
func TestBloomSize(t *testing.T) {
	for _, tc := range []struct {
		keys, bits int
		fpr        float64 // hand-computed
	}{
		{0, 1024, 0},
		{64, 1024, 0.0023938}, // n/m = 1/16: (1−e^−0.25)^4
		{65, 2048, 0.0002230}, // just past 16 bits per key: 2^11 bits
		{1000, 16384, 0.0022020},
		{6000, 131072, 0.0007838},
		{1 << 20, MaxBits, 0.1597}, // capped at 512 KiB, 4 bits per key: (1−e^−1)^4
	} {
		b := NewBloom(tc.keys)
		for i := range tc.keys {
			b.Add(fmt.Sprint("/k", i))
		}
		if b.Bits() != tc.bits || math.Abs(b.FalsePositive()-tc.fpr) > 1e-4*max(1, tc.fpr*10) {
			t.Errorf("%d keys: %d bits (want %d), FPR %.7f (want %.7f)", tc.keys, b.Bits(), tc.bits, b.FalsePositive(), tc.fpr)
		}
	}
}

// TestBloomMeasuredFPR: at 1,000 keys the measured false-positive rate on
// 100,000 other keys stays under twice the expected 0.22 %, and no added
// key is ever missed.
func TestBloomMeasuredFPR(t *testing.T) {
	b := NewBloom(1000)
	for i := range 1000 {
		b.Add(fmt.Sprint("/in/", i))
	}
	for i := range 1000 {
		if !b.Has(fmt.Sprint("/in/", i)) {
			t.Fatalf("added key %d missing", i)
		}
	}
	fp := 0
	for i := range 100000 {
		if b.Has(fmt.Sprint("/out/", i)) {
			fp++
		}
	}
	if rate := float64(fp) / 100000; rate > 2*b.FalsePositive() {
		t.Errorf("measured FPR %.5f, expected %.5f", rate, b.FalsePositive())
	}
}

// TestBloomWire: a digest survives the wire; malformed ones are refused.
func TestBloomWire(t *testing.T) {
	b := NewBloom(100)
	b.Add("/x")
	w := b.appendTo(nil)
	got, err := parseBloom(w)
	if err != nil || !got.Has("/x") || got.Keys() != 1 || got.Bits() != b.Bits() {
		t.Fatalf("round trip: %v", err)
	}
	bad := [][]byte{nil, w[:8], w[:len(w)-1], append(append([]byte{}, w...), 0)}
	k0 := append([]byte{}, w...)
	k0[0] = 0
	odd := append([]byte{}, w...)
	odd[8]++ // m not a power of two
	for i, p := range append(bad, k0, odd) {
		if _, err := parseBloom(p); !errors.Is(err, errDigest) {
			t.Errorf("case %d: err %v", i, err)
		}
	}
}

// TestClusterGDSFEvictsDuplicatesFirst: three 100-byte objects fill a
// 300-byte cgdsf cache and a fourth arrives. With a peer digest holding
// "/dup", its cost is the peer cost (C/10 = 0.1, H = 0.001 against 0.01 for
// the others), so "/dup" goes although it is the most recent; without a
// digest cgdsf is GDSF and the oldest of the tied entries, "/one", goes.
func TestClusterGDSFEvictsDuplicatesFirst(t *testing.T) {
	for _, tc := range []struct {
		digest []string
		victim string
	}{
		{[]string{"/dup"}, "/dup"},
		{nil, "/one"},
	} {
		local := &fakeLocal{}
		cli, owner := pair(t, local, testKey, testKey)
		cli.local = &fakeLocal{keys: tc.digest}
		cli.DigestRound()
		var evicted []string
		c, err := cache.New(cache.Config[int]{Policy: cache.CGDSF, Capacity: 300, CachedElsewhere: owner.CachedElsewhere,
			OnEvict: func(k string, _ int, _ int64) { evicted = append(evicted, k) }})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"/one", "/two", "/dup", "/new"} {
			c.Add(k, 0, 100)
		}
		if len(evicted) != 1 || evicted[0] != tc.victim {
			t.Errorf("digest %v: evicted %v, want [%s]", tc.digest, evicted, tc.victim)
		}
	}
}
