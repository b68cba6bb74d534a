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
// It moved again with the store's footprints and admission (see
// allPoliciesBefore).
const nasaUnbounded = `lru lard/1 req=33612 mem=21259 peer=0 disk=12353 hand=33612 rej=0 t=502058786000
lru lard/4 req=33612 mem=26969 peer=0 disk=6643 hand=33612 rej=0 t=79769950000
lru lard/8 req=33612 mem=29119 peer=0 disk=4493 hand=33612 rej=0 t=31083286000
lru lardr/1 req=33612 mem=21259 peer=0 disk=12353 hand=33612 rej=0 t=502058786000
lru lardr/4 req=33612 mem=26969 peer=0 disk=6643 hand=33612 rej=0 t=79769950000
lru lardr/8 req=33612 mem=29119 peer=0 disk=4493 hand=33612 rej=0 t=31083286000
lru tbccrd/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 t=502058570000
lru tbccrd/4 req=33612 mem=27008 peer=0 disk=6604 hand=24880 rej=0 t=78435710000
lru tbccrd/8 req=33612 mem=29082 peer=0 disk=4530 hand=28988 rej=0 t=30279800000
lru weblins/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 t=502058560000
lru weblins/4 req=33612 mem=20035 peer=5328 disk=8249 hand=910 rej=0 t=102974185000
lru weblins/8 req=33612 mem=18359 peer=9263 disk=5990 hand=1057 rej=0 t=43505640000
cgdsf lard/1 req=33612 mem=26423 peer=0 disk=7189 hand=33612 rej=0 t=356774776000
cgdsf lard/4 req=33612 mem=29586 peer=0 disk=4026 hand=33612 rej=0 t=61831204000
cgdsf lard/8 req=33612 mem=30754 peer=0 disk=2858 hand=33612 rej=0 t=24060588000
cgdsf lardr/1 req=33612 mem=26423 peer=0 disk=7189 hand=33612 rej=0 t=356774776000
cgdsf lardr/4 req=33612 mem=29586 peer=0 disk=4026 hand=33612 rej=0 t=61831204000
cgdsf lardr/8 req=33612 mem=30754 peer=0 disk=2858 hand=33612 rej=0 t=24060588000
cgdsf tbccrd/1 req=33612 mem=26423 peer=0 disk=7189 hand=0 rej=0 t=356774560000
cgdsf tbccrd/4 req=33612 mem=29588 peer=0 disk=4024 hand=24861 rej=0 t=61192570000
cgdsf tbccrd/8 req=33612 mem=30711 peer=0 disk=2901 hand=29155 rej=0 t=24684390000
cgdsf weblins/1 req=33612 mem=26423 peer=0 disk=7189 hand=0 rej=0 t=356774550000
cgdsf weblins/4 req=33612 mem=19473 peer=7434 disk=6705 hand=905 rej=0 t=94100315000
cgdsf weblins/8 req=33612 mem=17083 peer=10997 disk=5532 hand=1046 rej=0 t=42113585000
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
