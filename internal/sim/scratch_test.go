package sim

import (
	"fmt"
	"testing"
	"time"

	"shoal/internal/policy"
	"shoal/internal/trace"
)

func TestScratchWeblins(t *testing.T) {
	acc := scratchAcc(t)
	for _, c := range []string{"lru", "cgdsf"} {
		for _, v := range []struct {
			name string
			pc   policy.Config
		}{
			{"default", policy.Config{}},
			{"popN100", policy.Config{PopularN: 100}},
			{"nocache100k", policy.Config{NoCacheAbove: 100 << 10}},
			{"popN100+nocache100k", policy.Config{PopularN: 100, NoCacheAbove: 100 << 10}},
			{"popN100+nocache100k+period20s", policy.Config{PopularN: 100, NoCacheAbove: 100 << 10, Period: 20 * time.Second}},
			{"popN100+nocache100k+period1s", policy.Config{PopularN: 100, NoCacheAbove: 100 << 10, Period: 1 * time.Second}},
		} {
			r, err := Run(Config{Policy: "weblins", Nodes: 4, CacheBytes: 2 << 20, Cache: c, PolicyConfig: v.pc}, NewSliceSource(acc))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%s %s hit=%.3f bhit=%.3f ib=%.0f el=%v\n", c, v.name, r.HitRatio, r.ByteHitRatio, r.InternalBytesPerRequest, r.Elapsed)
		}
	}
}

func TestScratchFetch(t *testing.T) {
	acc := scratchAcc(t)
	var tot int64
	for _, a := range acc {
		tot += a.Size
	}
	for _, c := range []string{"lru", "gdsf", "cgdsf"} {
		sm, err := newSim(Config{Policy: "weblins", Nodes: 4, CacheBytes: 2 << 20, Cache: c, PolicyConfig: policy.Config{PopularN: 100}}, NewSliceSource(acc))
		if err != nil {
			t.Fatal(err)
		}
		sm.run()
		r := sm.result()
		var small, smallB int64
		for _, a := range acc {
			if a.Size < 100<<10 {
				small++
				smallB += a.Size
			}
		}
		fmt.Printf("fetches=%d small=%d smallbytes=%d\n", sm.dbgFetches, small, smallB)
		fmt.Printf("%s req=%d totbytes=%d peerhits=%d fetchbytes=%.0f mem=%d disk=%d hand=%d bhit=%.3f\n", c, r.Requests, tot, r.PeerHits, r.FetchBytesPerRequest*float64(r.Requests), r.MemHits, r.DiskReads, r.Handoffs, r.ByteHitRatio)
	}
}

func scratchAcc(t *testing.T) []Access {
	p := "/work/shared/data/traces/nasa_aug95_19950801_fullday_derived.log.gz"
	sizes, err := trace.Sizes(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := trace.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	acc, err := Load(NewTraceSource(r, sizes))
	if err != nil {
		t.Fatal(err)
	}
	return acc
}
