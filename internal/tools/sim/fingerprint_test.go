package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"shoal/internal/cluster/policy"
)

// allPoliciesFingerprint runs every policy of policy.Names on its default
// front path over the NASA trace (2 MiB per node, 16 requests per node in
// the system, 1/4/8 nodes) and spells out every count, the internal bytes
// and the virtual elapsed time: the front cost, the handoffs and the
// layer-4 placement the simulator charges each policy all show in it.
func allPoliciesFingerprint(tb testing.TB) string {
	acc := nasaAccesses(tb)
	sw := Sweep{Base: Config{CacheBytes: 2 << 20, Seed: 1, PerNode: 16}, Policies: policy.Names(), Nodes: []int{1, 4, 8},
		Open: func() (Source, error) { return NewSliceSource(acc), nil }}
	res, err := sw.Run(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	for _, r := range res {
		fmt.Fprintf(&b, "%s/%d req=%d mem=%d peer=%d disk=%d hand=%d rej=%d ib=%.1f t=%d\n", r.Policy, r.Nodes,
			r.Requests, r.MemHits, r.PeerHits, r.DiskReads, r.Handoffs, r.Rejected, r.InternalBytesPerRequest, r.Elapsed)
	}
	return b.String()
}

// allPoliciesBefore is allPoliciesFingerprint as the simulator gave it while
// it still looked policies' traits up by name (main at 35f495a): moving the
// traits into internal/cluster/policy must not change a single count. Since then
// only lc, wlc, lard, lardr and tbccrd moved, when ties among the least
// loaded nodes began to rotate (tbccrd: to stay at the holder) instead of
// going to the lowest index, and every count moved when the simulator
// began to key requests by the file they name (content.ObjectKey): the
// trace's spellings of one file became one object, and 269 records whose
// spelling never answered 200 but whose file did are now replayed.
// Every count moved again when the simulator began to charge each object
// its store footprint and to admit what a live node's store admits
// (store.Footprint; the largest object an eighth of the budget, at least
// 500 KB), and once more when that footprint began to charge an entry's Go
// objects 1,024 bytes, as a live node's heap holds them, not 256.
const allPoliciesBefore = `chbl/1 req=33612 mem=21122 peer=0 disk=12490 hand=33612 rej=0 ib=0.0 t=506310266000
chbl/4 req=33612 mem=25178 peer=0 disk=8434 hand=33612 rej=0 ib=0.0 t=93563890000
chbl/8 req=33612 mem=26913 peer=0 disk=6699 hand=33612 rej=0 ib=0.0 t=40195160000
dfwrr/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=0.0 t=506310040000
dfwrr/4 req=33612 mem=20817 peer=0 disk=12795 hand=0 rej=0 ib=0.0 t=138211490000
dfwrr/8 req=33612 mem=20422 peer=0 disk=13190 hand=0 rej=0 ib=0.0 t=73307820000
gwrr/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=0.0 t=506310040000
gwrr/4 req=33612 mem=20773 peer=0 disk=12839 hand=0 rej=0 ib=0.0 t=138133050000
gwrr/8 req=33612 mem=20523 peer=0 disk=13089 hand=0 rej=0 ib=0.0 t=71354390000
lard/1 req=33612 mem=21122 peer=0 disk=12490 hand=33612 rej=0 ib=0.0 t=506310266000
lard/4 req=33612 mem=26894 peer=0 disk=6718 hand=33612 rej=0 ib=0.0 t=81221220000
lard/8 req=33612 mem=29065 peer=0 disk=4547 hand=33612 rej=0 ib=0.0 t=31852512000
lardr/1 req=33612 mem=21122 peer=0 disk=12490 hand=33612 rej=0 ib=0.0 t=506310266000
lardr/4 req=33612 mem=26894 peer=0 disk=6718 hand=33612 rej=0 ib=0.0 t=81221220000
lardr/8 req=33612 mem=29065 peer=0 disk=4547 hand=33612 rej=0 ib=0.0 t=31852512000
lc/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=0.0 t=506310040000
lc/4 req=33612 mem=20819 peer=0 disk=12793 hand=0 rej=0 ib=0.0 t=129963560000
lc/8 req=33612 mem=20570 peer=0 disk=13042 hand=0 rej=0 ib=0.0 t=66390630000
p2c/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=0.0 t=506310040000
p2c/4 req=33612 mem=20833 peer=0 disk=12779 hand=0 rej=0 ib=0.0 t=130056980000
p2c/8 req=33612 mem=20504 peer=0 disk=13108 hand=0 rej=0 ib=0.0 t=66594120000
rr/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=0.0 t=506310040000
rr/4 req=33612 mem=20773 peer=0 disk=12839 hand=0 rej=0 ib=0.0 t=138133050000
rr/8 req=33612 mem=20523 peer=0 disk=13089 hand=0 rej=0 ib=0.0 t=71354390000
tbccrd/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=36.0 t=506310050000
tbccrd/4 req=33612 mem=26957 peer=0 disk=6655 hand=24903 rej=0 ib=36.0 t=78855120000
tbccrd/8 req=33612 mem=29019 peer=0 disk=4593 hand=28966 rej=0 ib=36.0 t=30632280000
urlhash/1 req=33612 mem=21122 peer=0 disk=12490 hand=33612 rej=0 ib=0.0 t=506310266000
urlhash/4 req=33612 mem=26979 peer=0 disk=6633 hand=33612 rej=0 ib=0.0 t=85232491000
urlhash/8 req=33612 mem=29107 peer=0 disk=4505 hand=33612 rej=0 ib=0.0 t=39508718000
weblins/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=156.0 t=506310040000
weblins/4 req=33612 mem=19963 peer=5209 disk=8440 hand=893 rej=0 ib=4437.3 t=107577015000
weblins/8 req=33612 mem=18419 peer=8994 disk=6199 hand=1048 rej=0 ib=5313.7 t=44351885000
wlc/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=0.0 t=506310040000
wlc/4 req=33612 mem=20819 peer=0 disk=12793 hand=0 rej=0 ib=0.0 t=129963560000
wlc/8 req=33612 mem=20570 peer=0 disk=13042 hand=0 rej=0 ib=0.0 t=66390630000
wrr/1 req=33612 mem=21122 peer=0 disk=12490 hand=0 rej=0 ib=0.0 t=506310040000
wrr/4 req=33612 mem=20773 peer=0 disk=12839 hand=0 rej=0 ib=0.0 t=138133050000
wrr/8 req=33612 mem=20523 peer=0 disk=13089 hand=0 rej=0 ib=0.0 t=71354390000
`

// TestAllPoliciesFingerprint: every policy is charged exactly what it was
// before its traits moved from name lists in sim into internal/cluster/policy.
func TestAllPoliciesFingerprint(t *testing.T) {
	if testing.Short() {
		t.Skip("NASA sweep skipped under -short")
	}
	if got := allPoliciesFingerprint(t); got != allPoliciesBefore {
		t.Errorf("fingerprint changed:\n%s\nbefore:\n%s", got, allPoliciesBefore)
	}
}
