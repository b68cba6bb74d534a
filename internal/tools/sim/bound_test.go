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
const nasaUnbounded = `lru lard/1 req=33612 mem=21745 peer=0 disk=11867 hand=33612 rej=0 t=486274306000
lru lard/4 req=33612 mem=27256 peer=0 disk=6356 hand=33612 rej=0 t=76928348000
lru lard/8 req=33612 mem=29288 peer=0 disk=4324 hand=33612 rej=0 t=29651284000
lru lardr/1 req=33612 mem=21745 peer=0 disk=11867 hand=33612 rej=0 t=486274306000
lru lardr/4 req=33612 mem=27256 peer=0 disk=6356 hand=33612 rej=0 t=76928348000
lru lardr/8 req=33612 mem=29288 peer=0 disk=4324 hand=33612 rej=0 t=29651284000
lru tbccrd/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 t=486274090000
lru tbccrd/4 req=33612 mem=27256 peer=0 disk=6356 hand=24791 rej=0 t=76311430000
lru tbccrd/8 req=33612 mem=29255 peer=0 disk=4357 hand=28964 rej=0 t=29876130000
lru weblins/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 t=486274080000
lru weblins/4 req=33612 mem=20355 peer=5430 disk=7827 hand=904 rej=0 t=106163480000
lru weblins/8 req=33612 mem=18639 peer=9289 disk=5684 hand=1047 rej=0 t=43447500000
cgdsf lard/1 req=33612 mem=27576 peer=0 disk=6036 hand=33612 rej=0 t=320047356000
cgdsf lard/4 req=33612 mem=30085 peer=0 disk=3527 hand=33612 rej=0 t=57280244000
cgdsf lard/8 req=33612 mem=30981 peer=0 disk=2631 hand=33612 rej=0 t=23403472000
cgdsf lardr/1 req=33612 mem=27576 peer=0 disk=6036 hand=33612 rej=0 t=320047356000
cgdsf lardr/4 req=33612 mem=30085 peer=0 disk=3527 hand=33612 rej=0 t=57280244000
cgdsf lardr/8 req=33612 mem=30981 peer=0 disk=2631 hand=33612 rej=0 t=23403472000
cgdsf tbccrd/1 req=33612 mem=27576 peer=0 disk=6036 hand=0 rej=0 t=320047140000
cgdsf tbccrd/4 req=33612 mem=30063 peer=0 disk=3549 hand=24988 rej=0 t=56601430000
cgdsf tbccrd/8 req=33612 mem=30986 peer=0 disk=2626 hand=29222 rej=0 t=23239005000
cgdsf weblins/1 req=33612 mem=27576 peer=0 disk=6036 hand=0 rej=0 t=320047130000
cgdsf weblins/4 req=33612 mem=20190 peer=7709 disk=5713 hand=911 rej=0 t=85972885000
cgdsf weblins/8 req=33612 mem=17706 peer=11287 disk=4619 hand=1042 rej=0 t=38982815000
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
