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
const allPoliciesBefore = `chbl/1 req=33612 mem=21745 peer=0 disk=11867 hand=33612 rej=0 ib=0.0 t=486274306000
chbl/4 req=33612 mem=25525 peer=0 disk=8087 hand=33612 rej=0 ib=0.0 t=90787276000
chbl/8 req=33612 mem=27230 peer=0 disk=6382 hand=33612 rej=0 ib=0.0 t=38638600000
dfwrr/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=0.0 t=486274080000
dfwrr/4 req=33612 mem=21397 peer=0 disk=12215 hand=0 rej=0 ib=0.0 t=135434180000
dfwrr/8 req=33612 mem=21165 peer=0 disk=12447 hand=0 rej=0 ib=0.0 t=70383125000
gwrr/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=0.0 t=486274080000
gwrr/4 req=33612 mem=21380 peer=0 disk=12232 hand=0 rej=0 ib=0.0 t=133178085000
gwrr/8 req=33612 mem=21059 peer=0 disk=12553 hand=0 rej=0 ib=0.0 t=68957090000
lard/1 req=33612 mem=21745 peer=0 disk=11867 hand=33612 rej=0 ib=0.0 t=486274306000
lard/4 req=33612 mem=27256 peer=0 disk=6356 hand=33612 rej=0 ib=0.0 t=76928348000
lard/8 req=33612 mem=29288 peer=0 disk=4324 hand=33612 rej=0 ib=0.0 t=29651284000
lardr/1 req=33612 mem=21745 peer=0 disk=11867 hand=33612 rej=0 ib=0.0 t=486274306000
lardr/4 req=33612 mem=27256 peer=0 disk=6356 hand=33612 rej=0 ib=0.0 t=76928348000
lardr/8 req=33612 mem=29288 peer=0 disk=4324 hand=33612 rej=0 ib=0.0 t=29651284000
lc/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=0.0 t=486274080000
lc/4 req=33612 mem=21414 peer=0 disk=12198 hand=0 rej=0 ib=0.0 t=125255150000
lc/8 req=33612 mem=21216 peer=0 disk=12396 hand=0 rej=0 ib=0.0 t=63920390000
p2c/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=0.0 t=486274080000
p2c/4 req=33612 mem=21384 peer=0 disk=12228 hand=0 rej=0 ib=0.0 t=125707860000
p2c/8 req=33612 mem=21090 peer=0 disk=12522 hand=0 rej=0 ib=0.0 t=64228100000
rr/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=0.0 t=486274080000
rr/4 req=33612 mem=21380 peer=0 disk=12232 hand=0 rej=0 ib=0.0 t=133178085000
rr/8 req=33612 mem=21059 peer=0 disk=12553 hand=0 rej=0 ib=0.0 t=68957090000
tbccrd/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=36.0 t=486274090000
tbccrd/4 req=33612 mem=27256 peer=0 disk=6356 hand=24791 rej=0 ib=36.0 t=76311430000
tbccrd/8 req=33612 mem=29255 peer=0 disk=4357 hand=28964 rej=0 ib=36.0 t=29876130000
urlhash/1 req=33612 mem=21745 peer=0 disk=11867 hand=33612 rej=0 ib=0.0 t=486274306000
urlhash/4 req=33612 mem=27329 peer=0 disk=6283 hand=33612 rej=0 ib=0.0 t=81115173000
urlhash/8 req=33612 mem=29352 peer=0 disk=4260 hand=33612 rej=0 ib=0.0 t=38566508000
weblins/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=156.0 t=486274080000
weblins/4 req=33612 mem=20355 peer=5430 disk=7827 hand=904 rej=0 ib=4421.1 t=106163480000
weblins/8 req=33612 mem=18639 peer=9289 disk=5684 hand=1047 rej=0 ib=5350.1 t=43447500000
wlc/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=0.0 t=486274080000
wlc/4 req=33612 mem=21414 peer=0 disk=12198 hand=0 rej=0 ib=0.0 t=125255150000
wlc/8 req=33612 mem=21216 peer=0 disk=12396 hand=0 rej=0 ib=0.0 t=63920390000
wrr/1 req=33612 mem=21745 peer=0 disk=11867 hand=0 rej=0 ib=0.0 t=486274080000
wrr/4 req=33612 mem=21380 peer=0 disk=12232 hand=0 rej=0 ib=0.0 t=133178085000
wrr/8 req=33612 mem=21059 peer=0 disk=12553 hand=0 rej=0 ib=0.0 t=68957090000
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
