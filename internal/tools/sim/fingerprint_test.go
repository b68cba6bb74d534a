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
// going to the lowest index.
const allPoliciesBefore = `chbl/1 req=33343 mem=21413 peer=0 disk=11930 hand=33343 rej=0 ib=0.0 t=488117616000
chbl/4 req=33343 mem=25221 peer=0 disk=8122 hand=33343 rej=0 ib=0.0 t=90972318000
chbl/8 req=33343 mem=26882 peer=0 disk=6461 hand=33343 rej=0 ib=0.0 t=39072880000
dfwrr/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=0.0 t=488117390000
dfwrr/4 req=33343 mem=21067 peer=0 disk=12276 hand=0 rej=0 ib=0.0 t=133550955000
dfwrr/8 req=33343 mem=20737 peer=0 disk=12606 hand=0 rej=0 ib=0.0 t=71845050000
gwrr/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=0.0 t=488117390000
gwrr/4 req=33343 mem=21086 peer=0 disk=12257 hand=0 rej=0 ib=0.0 t=131097005000
gwrr/8 req=33343 mem=20781 peer=0 disk=12562 hand=0 rej=0 ib=0.0 t=68994000000
lard/1 req=33343 mem=21413 peer=0 disk=11930 hand=33343 rej=0 ib=0.0 t=488117616000
lard/4 req=33343 mem=26867 peer=0 disk=6476 hand=33343 rej=0 ib=0.0 t=78004072000
lard/8 req=33343 mem=28851 peer=0 disk=4492 hand=33343 rej=0 ib=0.0 t=30289842000
lardr/1 req=33343 mem=21413 peer=0 disk=11930 hand=33343 rej=0 ib=0.0 t=488117616000
lardr/4 req=33343 mem=26867 peer=0 disk=6476 hand=33343 rej=0 ib=0.0 t=78004072000
lardr/8 req=33343 mem=28851 peer=0 disk=4492 hand=33343 rej=0 ib=0.0 t=30289842000
lc/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=0.0 t=488117390000
lc/4 req=33343 mem=21105 peer=0 disk=12238 hand=0 rej=0 ib=0.0 t=125549310000
lc/8 req=33343 mem=20818 peer=0 disk=12525 hand=0 rej=0 ib=0.0 t=64334900000
p2c/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=0.0 t=488117390000
p2c/4 req=33343 mem=20954 peer=0 disk=12389 hand=0 rej=0 ib=0.0 t=126919660000
p2c/8 req=33343 mem=20797 peer=0 disk=12546 hand=0 rej=0 ib=0.0 t=64260000000
rr/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=0.0 t=488117390000
rr/4 req=33343 mem=21086 peer=0 disk=12257 hand=0 rej=0 ib=0.0 t=131097005000
rr/8 req=33343 mem=20781 peer=0 disk=12562 hand=0 rej=0 ib=0.0 t=68994000000
tbccrd/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=36.0 t=488117400000
tbccrd/4 req=33343 mem=26855 peer=0 disk=6488 hand=24841 rej=0 ib=36.0 t=77342770000
tbccrd/8 req=33343 mem=28878 peer=0 disk=4465 hand=28713 rej=0 ib=36.0 t=29883170000
urlhash/1 req=33343 mem=21413 peer=0 disk=11930 hand=33343 rej=0 ib=0.0 t=488117616000
urlhash/4 req=33343 mem=26914 peer=0 disk=6429 hand=33343 rej=0 ib=0.0 t=81771904000
urlhash/8 req=33343 mem=28948 peer=0 disk=4395 hand=33343 rej=0 ib=0.0 t=38357108000
weblins/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=156.0 t=488117390000
weblins/4 req=33343 mem=19957 peer=5566 disk=7820 hand=910 rej=0 ib=4454.7 t=94111965000
weblins/8 req=33343 mem=18341 peer=9140 disk=5862 hand=1046 rej=0 ib=5402.6 t=40101295000
wlc/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=0.0 t=488117390000
wlc/4 req=33343 mem=21105 peer=0 disk=12238 hand=0 rej=0 ib=0.0 t=125549310000
wlc/8 req=33343 mem=20818 peer=0 disk=12525 hand=0 rej=0 ib=0.0 t=64334900000
wrr/1 req=33343 mem=21413 peer=0 disk=11930 hand=0 rej=0 ib=0.0 t=488117390000
wrr/4 req=33343 mem=21086 peer=0 disk=12257 hand=0 rej=0 ib=0.0 t=131097005000
wrr/8 req=33343 mem=20781 peer=0 disk=12562 hand=0 rej=0 ib=0.0 t=68994000000
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
