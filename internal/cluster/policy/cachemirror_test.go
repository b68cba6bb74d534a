package policy

import (
	"testing"

	"shoal/internal/base/cache"
)

// TestCacheReplacer drives the adapter the way the policy's mirror does:
// budget 10 B, objects of 4 B. Adding a third overflows the backing cache,
// which picks the victim; Victim reports it until the mirror removes it.
func TestCacheReplacer(t *testing.T) {
	for _, pol := range []string{cache.GDSF, cache.CGDSF} {
		r := NodeCacheMirrors(cache.Config[struct{}]{Policy: pol, Capacity: 10})(0)
		if _, ok := r.Victim(); ok {
			t.Fatalf("%s: victim of an empty cache", pol)
		}
		r.Add(0, 4, 0)
		r.Add(1, 4, 0)
		r.Hit(0, 0) // 1 is now the less frequent one
		r.Add(2, 4, 0)
		v, ok := r.Victim()
		if !ok || v != 1 {
			t.Fatalf("%s: victim %d %v, want 1", pol, v, ok)
		}
		r.Remove(1)
		if v, ok := r.Victim(); ok {
			t.Fatalf("%s: victim %d after removal, want none", pol, v)
		}
	}
	if NodeCacheMirrors(cache.Config[struct{}]{Policy: cache.LRU, Capacity: 10}) != nil {
		t.Error("lru: want nil (the policies' default NewLRU)")
	}
}

// TestCGDSFMirrorsSeeEachOther: a cgdsf mirror asks the other nodes'
// mirrors whether an object is cached elsewhere; the duplicate goes first.
func TestCGDSFMirrorsSeeEachOther(t *testing.T) {
	nr := NodeCacheMirrors(cache.Config[struct{}]{Policy: cache.CGDSF, Capacity: 10})
	a, b := nr(0), nr(1)
	b.Add(5, 4, 0) // object 5 also lives on node 1
	a.Add(5, 4, 0)
	a.Add(6, 4, 0)
	a.Hit(5, 0) // more hits would keep 5 under plain GDSF …
	a.Add(7, 4, 0)
	if v, ok := a.Victim(); !ok || v != 5 {
		t.Fatalf("victim %d %v, want the duplicate 5", v, ok)
	}
}

// TestGDSFMirrorLearnsSizes: on the relay path the front learns an
// object's size only from the response (Done), after the mirror cached it
// at size 0. The GDSF mirror's backing cache must learn the size too, or it
// never overflows, names no victim, and the mirror stays above the node's
// budget (TestTBCCRDMirrorKnowsSizes/relay: 1,114,112 bytes in a 1 MiB
// mirror). Budget 100 B: three objects learned at 40 B each; one must go.
func TestGDSFMirrorLearnsSizes(t *testing.T) {
	c := newCluster(1)
	p := mustNew(t, "tbccrd", Config{CacheBytes: 100,
		NewReplacer: NodeCacheMirrors(cache.Config[struct{}]{Policy: cache.GDSF, Capacity: 100})}).(*TBCCRD)
	for _, u := range []string{"/a", "/b", "/c"} {
		p.Pick(c, &Request{URL: u, Size: -1, Holder: -1})
	}
	for _, u := range []string{"/a", "/b", "/c"} {
		p.Done(c, 0, &Request{URL: u, Size: 40, Status: 200})
	}
	if nc := p.t.caches[0]; nc.used != 80 || nc.objects != 2 {
		t.Errorf("mirror holds %d objects, %d bytes; want 2 objects, 80 bytes (budget 100)", nc.objects, nc.used)
	}
}

// TestNodeCacheKey: Config.NodeCache ([tuning] node_cache) makes tbccrd's
// mirror evict in the nodes' order. Budget 100 B: /s1 (10 B), /big (60),
// /s2 (10), /big again, then /s3 (30) overflows by 10. LRU drops the
// oldest, /s1. The GDSF mirrors have the nodes' admission and cost
// (cache.DiskCost, 1 + size/41,667): the victim would be /big, of the
// lowest value per byte, 2·1.00144/60 = 0.033381 against /s1's and /s2's
// 0.1, but the newcomer /s3 is worth 1·1.00072/30 = 0.033357, less, so
// /s3 is turned away and nothing is evicted.
func TestNodeCacheKey(t *testing.T) {
	for _, tt := range []struct {
		nodeCache, gone string
	}{
		{"", "/s1"},
		{cache.LRU, "/s1"},
		{cache.GDSF, "/s3"},
		{cache.CGDSF, "/s3"},
	} {
		c := newCluster(1)
		p := mustNew(t, "tbccrd", Config{CacheBytes: 100, NodeCache: tt.nodeCache}).(*TBCCRD)
		for _, r := range []struct {
			url  string
			size int64
		}{{"/s1", 10}, {"/big", 60}, {"/s2", 10}, {"/big", 60}, {"/s3", 30}} {
			p.Pick(c, &Request{URL: r.url, Size: r.size, Holder: -1})
		}
		var gone []string
		for _, u := range []string{"/s1", "/big", "/s2", "/s3"} {
			if _, cached := flags(p, u); cached == nil {
				gone = append(gone, u)
			}
		}
		if len(gone) != 1 || gone[0] != tt.gone {
			t.Errorf("node_cache %q: evicted %v, want [%s]", tt.nodeCache, gone, tt.gone)
		}
	}
	if _, err := New("tbccrd", Config{NodeCache: "arc"}); err == nil {
		t.Error(`node_cache "arc": no error`)
	}
}

// TestMirrorAdmission: a GDSF mirror turns newcomers away as the nodes'
// stores do, and a newcomer that evicted one victim before meeting a
// better one leaves that victim uncached in the table too. One node,
// budget 100, cost cache.DiskCost (about 1 for these sizes), so a URL's
// value is its requests over its size: /s 10 B asked 3 times (0.3), /m
// 40 B twice (0.05), /l 50 B once (0.02). /n (60 B) at 1 request (0.017)
// is turned away; at 2 (0.033) it evicts /l and meets /m: turned away.
func TestMirrorAdmission(t *testing.T) {
	c := newCluster(1)
	p := mustNew(t, "tbccrd", Config{CacheBytes: 100, NodeCache: cache.GDSF}).(*TBCCRD)
	pick := func(u string, size int64) { p.Pick(c, &Request{URL: u, Size: size, Holder: -1}) }
	for _, r := range []struct {
		url  string
		size int64
	}{{"/s", 10}, {"/s", 10}, {"/s", 10}, {"/m", 40}, {"/m", 40}, {"/l", 50}, {"/n", 60}} {
		pick(r.url, r.size)
	}
	if _, cached := flags(p, "/n"); cached != nil || p.t.caches[0].used != 100 {
		t.Fatalf("after /n's first request: cached on %v, mirror %d B; want turned away, 100 B", cached, p.t.caches[0].used)
	}
	pick("/n", 60)
	for u, want := range map[string]bool{"/s": true, "/m": true, "/l": false, "/n": false} {
		if _, cached := flags(p, u); (cached != nil) != want {
			t.Errorf("%s cached = %v, want %v", u, cached != nil, want)
		}
	}
	if nc := p.t.caches[0]; nc.used != 50 || nc.objects != 2 {
		t.Errorf("mirror holds %d objects, %d B; want 2, 50 B", nc.objects, nc.used)
	}
}
