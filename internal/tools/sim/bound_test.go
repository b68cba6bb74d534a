package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"shoal/internal/cluster/policy"
)

// nasaFingerprint runs lard, lardr, tbccrd and weblins on the NASA trace
// (2 MiB per node, 1/4/8 nodes, LRU and cluster-GDSF nodes, 16 requests per
// node in the system, the window the reference was taken with) with policy
// config pc and spells out every count and the virtual elapsed time.
func nasaFingerprint(tb testing.TB, pc policy.Config) string {
	acc := nasaAccesses(tb)
	var b strings.Builder
	for _, cache := range []string{"lru", "cgdsf"} {
		sw := Sweep{Base: Config{CacheBytes: 2 << 20, Seed: 1, Cache: cache, PolicyConfig: pc, PerNode: 16,
			GDSFCost: GDSFDisk, DigestPeriod: -1}, // the model the reference was taken with
			Policies: []string{"lard", "lardr", "tbccrd", "weblins"}, Nodes: []int{1, 4, 8},
			Open: func() (Source, error) { return NewSliceSource(acc), nil }}
		res, err := sw.Run(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range res {
			fmt.Fprintf(&b, "%s %s/%d req=%d mem=%d peer=%d disk=%d hand=%d rej=%d t=%d\n", cache, r.Policy, r.Nodes,
				r.Requests, r.MemHits, r.PeerHits, r.DiskReads, r.Handoffs, r.Rejected, r.Elapsed)
		}
	}
	return b.String()
}

// nasaUnbounded is nasaFingerprint as the policies gave it before their
// per-URL tables were bounded (main at f001268, tables unbounded).
const nasaUnbounded = `lru lard/1 req=33343 mem=21413 peer=0 disk=11930 hand=33343 rej=0 t=488117616000
lru lard/4 req=33343 mem=26867 peer=0 disk=6476 hand=33343 rej=0 t=78004072000
lru lard/8 req=33343 mem=28851 peer=0 disk=4492 hand=33343 rej=0 t=30289842000
lru lardr/1 req=33343 mem=21413 peer=0 disk=11930 hand=33343 rej=0 t=488117616000
lru lardr/4 req=33343 mem=26867 peer=0 disk=6476 hand=33343 rej=0 t=78004072000
lru lardr/8 req=33343 mem=28851 peer=0 disk=4492 hand=33343 rej=0 t=30289842000
lru tbccrd/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 t=488117400000
lru tbccrd/4 req=33343 mem=26855 peer=0 disk=6488 hand=24841 rej=0 t=77342770000
lru tbccrd/8 req=33343 mem=28878 peer=0 disk=4465 hand=28713 rej=0 t=29883170000
lru weblins/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 t=488117390000
lru weblins/4 req=33343 mem=19957 peer=5566 disk=7820 hand=910 rej=0 t=94111965000
lru weblins/8 req=33343 mem=18341 peer=9140 disk=5862 hand=1046 rej=0 t=40101295000
cgdsf lard/1 req=33343 mem=27163 peer=0 disk=6180 hand=33343 rej=0 t=324376736000
cgdsf lard/4 req=33343 mem=29677 peer=0 disk=3666 hand=33343 rej=0 t=57217184000
cgdsf lard/8 req=33343 mem=30602 peer=0 disk=2741 hand=33343 rej=0 t=23952272000
cgdsf lardr/1 req=33343 mem=27163 peer=0 disk=6180 hand=33343 rej=0 t=324376736000
cgdsf lardr/4 req=33343 mem=29677 peer=0 disk=3666 hand=33343 rej=0 t=57217184000
cgdsf lardr/8 req=33343 mem=30602 peer=0 disk=2741 hand=33343 rej=0 t=23952272000
cgdsf tbccrd/1 req=33343 mem=27163 peer=0 disk=6180 hand=0 rej=0 t=324376520000
cgdsf tbccrd/4 req=33343 mem=29676 peer=0 disk=3667 hand=24792 rej=0 t=57568390000
cgdsf tbccrd/8 req=33343 mem=30598 peer=0 disk=2745 hand=28964 rej=0 t=23700860000
cgdsf weblins/1 req=33343 mem=27163 peer=0 disk=6180 hand=0 rej=0 t=324376510000
cgdsf weblins/4 req=33343 mem=19952 peer=7770 disk=5621 hand=904 rej=0 t=79438440000
cgdsf weblins/8 req=33343 mem=17394 peer=11216 disk=4733 hand=1052 rej=0 t=36754460000
`

// TestNASABoundedTablesIdentical: with the URL-table bound at or above the
// trace's 2,247 unique URLs nothing is ever evicted, so the simulation gives
// exactly the results of the unbounded tables; a bound below it changes them
// (the knob reaches the policies the simulator runs).
func TestNASABoundedTablesIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("NASA sweep skipped under -short")
	}
	unique, bytes := map[string]bool{}, int64(0)
	for _, a := range nasaAccesses(t) {
		if !unique[a.URL] {
			unique[a.URL] = true
			bytes += int64(len(a.URL))
		}
	}
	cases := []struct {
		name string
		pc   policy.Config
		same bool
	}{
		{"default bound", policy.Config{}, true},
		{"bound = unique URLs", policy.Config{MaxURLs: len(unique), MaxURLBytes: bytes}, true},
		{"bound below unique URLs", policy.Config{MaxURLs: len(unique) / 4}, false},
		{"URL bytes below the trace's", policy.Config{MaxURLBytes: bytes / 4}, false},
	}
	for _, c := range cases {
		got := nasaFingerprint(t, c.pc)
		if same := got == nasaUnbounded; same != c.same {
			t.Errorf("%s (%d unique URLs, %d bytes): same as unbounded = %v, want %v:\n%s\nunbounded:\n%s",
				c.name, len(unique), bytes, same, c.same, got, nasaUnbounded)
		}
	}
}
