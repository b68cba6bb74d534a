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
// 500 KB).
const allPoliciesBefore = `chbl/1 req=33612 mem=21259 peer=0 disk=12353 hand=33612 rej=0 ib=0.0 t=502058786000
chbl/4 req=33612 mem=25104 peer=0 disk=8508 hand=33612 rej=0 ib=0.0 t=94300890000
chbl/8 req=33612 mem=27012 peer=0 disk=6600 hand=33612 rej=0 ib=0.0 t=39726610000
dfwrr/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=0.0 t=502058560000
dfwrr/4 req=33612 mem=20914 peer=0 disk=12698 hand=0 rej=0 ib=0.0 t=138977660000
dfwrr/8 req=33612 mem=20647 peer=0 disk=12965 hand=0 rej=0 ib=0.0 t=71397930000
gwrr/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=0.0 t=502058560000
gwrr/4 req=33612 mem=20905 peer=0 disk=12707 hand=0 rej=0 ib=0.0 t=136806100000
gwrr/8 req=33612 mem=20626 peer=0 disk=12986 hand=0 rej=0 ib=0.0 t=70748330000
lard/1 req=33612 mem=21259 peer=0 disk=12353 hand=33612 rej=0 ib=0.0 t=502058786000
lard/4 req=33612 mem=26969 peer=0 disk=6643 hand=33612 rej=0 ib=0.0 t=79769950000
lard/8 req=33612 mem=29119 peer=0 disk=4493 hand=33612 rej=0 ib=0.0 t=31083286000
lardr/1 req=33612 mem=21259 peer=0 disk=12353 hand=33612 rej=0 ib=0.0 t=502058786000
lardr/4 req=33612 mem=26969 peer=0 disk=6643 hand=33612 rej=0 ib=0.0 t=79769950000
lardr/8 req=33612 mem=29119 peer=0 disk=4493 hand=33612 rej=0 ib=0.0 t=31083286000
lc/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=0.0 t=502058560000
lc/4 req=33612 mem=20953 peer=0 disk=12659 hand=0 rej=0 ib=0.0 t=129111830000
lc/8 req=33612 mem=20650 peer=0 disk=12962 hand=0 rej=0 ib=0.0 t=66189450000
p2c/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=0.0 t=502058560000
p2c/4 req=33612 mem=20795 peer=0 disk=12817 hand=0 rej=0 ib=0.0 t=130438390000
p2c/8 req=33612 mem=20638 peer=0 disk=12974 hand=0 rej=0 ib=0.0 t=66167380000
rr/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=0.0 t=502058560000
rr/4 req=33612 mem=20905 peer=0 disk=12707 hand=0 rej=0 ib=0.0 t=136806100000
rr/8 req=33612 mem=20626 peer=0 disk=12986 hand=0 rej=0 ib=0.0 t=70748330000
tbccrd/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=36.0 t=502058570000
tbccrd/4 req=33612 mem=27008 peer=0 disk=6604 hand=24880 rej=0 ib=36.0 t=78435710000
tbccrd/8 req=33612 mem=29082 peer=0 disk=4530 hand=28988 rej=0 ib=36.0 t=30279800000
urlhash/1 req=33612 mem=21259 peer=0 disk=12353 hand=33612 rej=0 ib=0.0 t=502058786000
urlhash/4 req=33612 mem=27059 peer=0 disk=6553 hand=33612 rej=0 ib=0.0 t=84428666000
urlhash/8 req=33612 mem=29165 peer=0 disk=4447 hand=33612 rej=0 ib=0.0 t=39134178000
weblins/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=156.0 t=502058560000
weblins/4 req=33612 mem=20035 peer=5328 disk=8249 hand=910 rej=0 ib=4474.9 t=102974185000
weblins/8 req=33612 mem=18359 peer=9263 disk=5990 hand=1057 rej=0 ib=5334.4 t=43505640000
wlc/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=0.0 t=502058560000
wlc/4 req=33612 mem=20953 peer=0 disk=12659 hand=0 rej=0 ib=0.0 t=129111830000
wlc/8 req=33612 mem=20650 peer=0 disk=12962 hand=0 rej=0 ib=0.0 t=66189450000
wrr/1 req=33612 mem=21259 peer=0 disk=12353 hand=0 rej=0 ib=0.0 t=502058560000
wrr/4 req=33612 mem=20905 peer=0 disk=12707 hand=0 rej=0 ib=0.0 t=136806100000
wrr/8 req=33612 mem=20626 peer=0 disk=12986 hand=0 rej=0 ib=0.0 t=70748330000
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
