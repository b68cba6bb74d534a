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
// per-URL tables were bounded (main at f001268, tables unbounded), with
// requests keyed by the file they name (content.ObjectKey) since then.
// It moved again with the store's footprints and admission, and with the
// footprint's charge per entry (see allPoliciesBefore), and its cgdsf
// rows when GDSF's caches began to admit (a frequency sketch; a newcomer
// evicts only victims worth less).
const nasaUnbounded = `lru lard/1 req=33612 mem=21122 peer=0 disk=12490 hand=33612 rej=0 t=506310266000
lru lard/4 req=33612 mem=26894 peer=0 disk=6718 hand=33612 rej=0 t=81221220000
lru lard/8 req=33612 mem=29065 peer=0 disk=4547 hand=33612 rej=0 t=31852512000
lru lardr/1 req=33612 mem=21122 peer=0 disk=12490 hand=33612 rej=0 t=506310266000
lru lardr/4 req=33612 mem=26894 peer=0 disk=6718 hand=33612 rej=0 t=81221220000
lru lardr/8 req=33612 mem=29065 peer=0 disk=4547 hand=33612 rej=0 t=31852512000
lru tbccrd/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 t=506310050000
lru tbccrd/4 req=33612 mem=26957 peer=0 disk=6655 hand=24903 rej=0 t=78855120000
lru tbccrd/8 req=33612 mem=29019 peer=0 disk=4593 hand=28966 rej=0 t=30632280000
lru weblins/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 t=506310040000
lru weblins/4 req=33612 mem=19963 peer=5209 disk=8440 hand=893 rej=0 t=107577015000
lru weblins/8 req=33612 mem=18419 peer=8994 disk=6199 hand=1048 rej=0 t=44351885000
cgdsf lard/1 req=33612 mem=27139 peer=0 disk=6473 hand=33612 rej=0 t=339990426000
cgdsf lard/4 req=33612 mem=29931 peer=0 disk=3681 hand=33612 rej=0 t=59615022000
cgdsf lard/8 req=33612 mem=30932 peer=0 disk=2680 hand=33612 rej=0 t=24380224000
cgdsf lardr/1 req=33612 mem=27139 peer=0 disk=6473 hand=33612 rej=0 t=339990426000
cgdsf lardr/4 req=33612 mem=29931 peer=0 disk=3681 hand=33612 rej=0 t=59615022000
cgdsf lardr/8 req=33612 mem=30932 peer=0 disk=2680 hand=33612 rej=0 t=24380224000
cgdsf tbccrd/1 req=33612 mem=27139 peer=0 disk=6473 hand=0 rej=0 t=339990210000
cgdsf tbccrd/4 req=33612 mem=29876 peer=0 disk=3736 hand=24836 rej=0 t=60173020000
cgdsf tbccrd/8 req=33612 mem=30985 peer=0 disk=2627 hand=29272 rej=0 t=23891500000
cgdsf weblins/1 req=33612 mem=27139 peer=0 disk=6473 hand=0 rej=0 t=339990200000
cgdsf weblins/4 req=33612 mem=20072 peer=7687 disk=5853 hand=897 rej=0 t=90894470000
cgdsf weblins/8 req=33612 mem=17332 peer=11184 disk=5096 hand=1040 rej=0 t=39631575000
`

// TestNASABoundedTablesIdentical: with the URL-table bound at or above the
// trace's unique objects (1,705 files) nothing is ever evicted, so the simulation gives
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
