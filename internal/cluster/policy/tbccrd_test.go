package policy

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// flags returns the nodes whose disk_hit and cache_hit flags are set for url.
func flags(p *TBCCRD, url string) (disk, cache []int) {
	id, ok := p.t.lookup(url)
	if !ok {
		return nil, nil
	}
	for i, c := range p.t.rows[id].cells {
		if c.disk {
			disk = append(disk, i)
		}
		if c.cache {
			cache = append(cache, i)
		}
	}
	return disk, cache
}

// TestTBCCRDTrace follows seed 000 §2.2.2 by hand on two nodes with a
// 100-byte MAX_CACHE_SIZE, LRU, and a load limit of 2 connections.
func TestTBCCRDTrace(t *testing.T) {
	c := newCluster(1, 1)
	p := mustNew(t, "tbccrd", Config{CacheBytes: 100, LoadLimit: 2}).(*TBCCRD)
	steps := []struct {
		note    string
		conn    uint64
		url     string
		size    int64
		close   uint64 // connection closed before this request
		node    int
		handoff bool
		cache   map[string][]int // expected cache_hit flags after the step
		counts  []int            // connections per node after the step
	}{
		{"new conn → wrr a; nobody caches /a → least-conn disk holder a", 1, "/a", 60, 0, 0, false,
			map[string][]int{"/a": {0}}, []int{1, 0}},
		{"new conn → wrr b; /b → disk holder b (a has 1 conn)", 2, "/b", 30, 0, 1, false,
			map[string][]int{"/a": {0}, "/b": {1}}, []int{1, 1}},
		{"keep-alive conn 2 asks /a: cached on a below the limit → tag a, hand off", 2, "/a", 60, 0, 0, true,
			map[string][]int{"/a": {0}, "/b": {1}}, []int{2, 0}},
		{"new conn → wrr a; /c → disk holder b (fewer conns), b caches 30+50", 3, "/c", 50, 0, 1, true,
			map[string][]int{"/a": {0}, "/b": {1}, "/c": {1}}, []int{2, 1}},
		{"conn 3 asks /d on b: 30+50+40 > 100 → LRU evicts /b, its cache_hit cleared", 3, "/d", 40, 0, 1, false,
			map[string][]int{"/a": {0}, "/b": nil, "/c": {1}, "/d": {1}}, []int{2, 1}},
		{"new conn → wrr b; /a's holder a is at the limit (2) → disk holder b caches /a, evicts /c", 4, "/a", 60, 0, 1, false,
			map[string][]int{"/a": {0, 1}, "/c": nil, "/d": {1}}, []int{2, 2}},
		{"conn 2 closed; new conn → wrr a; /a cached on a (1 conn) and b (2) → a", 5, "/a", 60, 2, 0, false,
			map[string][]int{"/a": {0, 1}, "/d": {1}}, []int{2, 2}},
		{"/big above 500 KiB is never cached", 5, "/big", 600 << 10, 0, 0, false,
			map[string][]int{"/big": nil}, []int{2, 2}},
	}
	for i, st := range steps {
		if st.close != 0 {
			var cc ConnCloser = p
			cc.CloseConn(st.close)
		}
		now := time.Duration(i) * time.Second
		d := p.Pick(c, &Request{URL: st.url, Size: st.size, Conn: st.conn, Holder: -1, Now: now})
		if d.Node != st.node || d.Handoff != st.handoff || d.Fetch != -1 {
			t.Fatalf("step %d (%s): got %+v, want node %d handoff %v", i, st.note, d, st.node, st.handoff)
		}
		for u, want := range st.cache {
			disk, cache := flags(p, u)
			if !slices.Equal(cache, want) {
				t.Fatalf("step %d (%s): cache_hit(%s) = %v, want %v", i, st.note, u, cache, want)
			}
			if !slices.Equal(disk, []int{0, 1}) {
				t.Fatalf("step %d: disk_hit(%s) = %v", i, u, disk)
			}
		}
		if !slices.Equal(p.connCount, st.counts) {
			t.Fatalf("step %d (%s): connections %v, want %v", i, st.note, p.connCount, st.counts)
		}
	}
	if got := p.t.caches[1].used; got != 100 {
		t.Errorf("node b mirrored bytes = %d, want 100 (/d 40 + /a 60)", got)
	}
	tb := p.Tables(100).(TBCCRDTables)
	if tb.Conns != 4 || tb.URLs != 5 || !slices.Equal(tb.CachedBytes, []int64{60, 100}) {
		t.Errorf("tables: %+v", tb)
	}
}

func TestTBCCRDDiskHolders(t *testing.T) {
	c := newCluster(1, 1, 1)
	p := mustNew(t, "tbccrd", Config{DiskHolders: func(u string) []int {
		if u == "/only-c" {
			return []int{2}
		}
		return []int{0, 1, 2}
	}}).(*TBCCRD)
	// Holder a (already placed): /only-c lives on c's disk only.
	d := p.Pick(c, &Request{URL: "/only-c", Size: 10, Conn: 9, Holder: 0})
	if d.Node != 2 || !d.Handoff {
		t.Fatalf("got %+v, want node 2 with handoff", d)
	}
	disk, cache := flags(p, "/only-c")
	if !slices.Equal(disk, []int{2}) || !slices.Equal(cache, []int{2}) {
		t.Errorf("disk %v cache %v", disk, cache)
	}
	// c goes down: its memory is gone and nobody else can serve it.
	c.Nodes[2].Up = false
	c.Version++
	if d := p.Pick(c, &Request{URL: "/only-c", Size: 10, Conn: 9, Holder: -1}); d != None {
		t.Errorf("with its only disk holder down: %+v", d)
	}
	if _, cache := flags(p, "/only-c"); cache != nil {
		t.Errorf("cache flags survive a down node: %v", cache)
	}
}

func TestTBCCRDSizeLearnedInDone(t *testing.T) {
	c := newCluster(1)
	p := mustNew(t, "tbccrd", Config{CacheBytes: 100}).(*TBCCRD)
	p.Pick(c, &Request{URL: "/a", Size: -1, Holder: -1})
	p.Pick(c, &Request{URL: "/b", Size: -1, Holder: -1})
	if _, cache := flags(p, "/a"); !slices.Equal(cache, []int{0}) {
		t.Fatalf("unknown size not cached: %v", cache)
	}
	// The responses say /b is 70 bytes, then /a 50: 120 > 100, and the least
	// recently requested object, /a, goes — as the node's own LRU would have
	// done when it stored both.
	p.Done(c, 0, &Request{URL: "/b", Size: 70})
	p.Done(c, 0, &Request{URL: "/a", Size: 50})
	if _, cache := flags(p, "/a"); cache != nil {
		t.Errorf("/a should have been evicted, cache %v", cache)
	}
	if _, cache := flags(p, "/b"); !slices.Equal(cache, []int{0}) {
		t.Errorf("/b should stay, cache %v", cache)
	}
	if got := p.t.caches[0].used; got != 70 {
		t.Errorf("used %d, want 70", got)
	}
	// Learning that /b is above the no-cache threshold drops it.
	p.Done(c, 0, &Request{URL: "/b", Size: 600 << 10})
	if _, cache := flags(p, "/b"); cache != nil || p.t.caches[0].used != 0 || p.t.caches[0].objects != 0 {
		t.Errorf("/b above threshold still cached: %v, used %d", cache, p.t.caches[0].used)
	}
}

func TestTBCCRDConnTimeout(t *testing.T) {
	c := newCluster(1, 1)
	p := mustNew(t, "tbccrd", Config{ConnTimeout: time.Minute}).(*TBCCRD)
	p.Pick(c, &Request{URL: "/a", Size: 1, Conn: 1, Holder: -1, Now: 0})
	p.Pick(c, &Request{URL: "/b", Size: 1, Conn: 2, Holder: -1, Now: 50 * time.Second})
	if !slices.Equal(p.connCount, []int{1, 1}) {
		t.Fatalf("counts %v", p.connCount)
	}
	// At 100 s conn 1 (last used at 0) is stale, conn 2 (50 s) is not.
	p.Pick(c, &Request{URL: "/b", Size: 1, Conn: 2, Holder: -1, Now: 100 * time.Second})
	if _, ok := p.conns[1]; ok || len(p.conns) != 1 || !slices.Equal(p.connCount, []int{0, 1}) {
		t.Errorf("after sweep: conns %v counts %v", p.conns, p.connCount)
	}
}

// TestTBCCRDKeepAliveMoves follows one keep-alive connection whose URLs live
// on different nodes: every request is tagged on its own and the connection
// moves each time the tag differs from its holder (seed 000 §2.2.2, last
// paragraph), with the connection table following it.
func TestTBCCRDKeepAliveMoves(t *testing.T) {
	c := newCluster(1, 1, 1)
	home := map[string]int{"/z": 0, "/x": 1, "/y": 2}
	p := mustNew(t, "tbccrd", Config{DiskHolders: func(u string) []int { return []int{home[u]} }}).(*TBCCRD)
	steps := []struct {
		url     string
		node    int
		handoff bool
	}{
		{"/z", 0, false}, // new connection: wrr places it on a, /z is on a
		{"/x", 1, true},
		{"/y", 2, true},
		{"/x", 1, true},
		{"/x", 1, false},
	}
	for i, st := range steps {
		d := p.Pick(c, &Request{URL: st.url, Size: 100, Conn: 9, Holder: -1})
		if d.Node != st.node || d.Handoff != st.handoff {
			t.Fatalf("step %d %s: got %+v, want node %d handoff %v", i, st.url, d, st.node, st.handoff)
		}
		want := []int{0, 0, 0}
		want[st.node] = 1
		if !slices.Equal(p.connCount, want) || p.conns[9].node != st.node {
			t.Fatalf("step %d: connection table %v counts %v", i, p.conns, p.connCount)
		}
	}
}

// TestTBCCRDTiesStayAtHolder: among equally loaded candidates the tag is
// the node holding the connection (no handoff), else the next one after it.
// At low concurrency every node shows 0 connections, and the lowest-index
// rule tagged every new URL, and handed every connection, to node 0;
// the wrr holders now keep them: 0,1,2,3,… and no handoff.
func TestTBCCRDTiesStayAtHolder(t *testing.T) {
	c := newCluster(1, 1, 1, 1)
	p := mustNew(t, "tbccrd", Config{}).(*TBCCRD)
	got, handoffs := "", 0
	for i := range 12 {
		r := &Request{URL: fmt.Sprintf("/u%d", i), Size: 100, Holder: -1, Conn: uint64(i + 1)}
		d := p.Pick(c, r)
		got += fmt.Sprint(d.Node)
		if d.Handoff {
			handoffs++
		}
		p.Done(c, d.Node, r)
		p.CloseConn(r.Conn)
	}
	if got != "012301230123" || handoffs != 0 {
		t.Errorf("tags %s with %d handoffs, want 012301230123 with none", got, handoffs)
	}
	// A busier holder still hands off: node 1 keeps an open connection
	// (/x stays on its holder), so a new connection placed on 1 goes to the
	// first least loaded node after it, 2.
	c = newCluster(1, 1, 1, 1)
	p = mustNew(t, "tbccrd", Config{}).(*TBCCRD)
	if d := p.Pick(c, &Request{URL: "/x", Size: 100, Holder: 1, Conn: 1}); d.Node != 1 || d.Handoff {
		t.Errorf("on an idle holder: %+v, want 1 without handoff", d)
	}
	if d := p.Pick(c, &Request{URL: "/z", Size: 100, Holder: 1, Conn: 2}); d.Node != 2 || !d.Handoff {
		t.Errorf("from a busy holder: %+v, want a handoff to 2", d)
	}
}

// TestTBCCRDMissToRoom: when the nodes' caches admit (GDSF mirrors), a URL
// no node caches goes to a disk holder with room before a full one. Two
// nodes, 100 B each: connection 1 lands on a (wrr) and a caches /x (90 B);
// it then asks /y (50 B). Both nodes count 0 other connections, so the
// seed's rule (LRU mirrors) keeps it on a, which evicts /x; with GDSF
// mirrors it moves to b, which has room, and /x stays.
func TestTBCCRDMissToRoom(t *testing.T) {
	for _, tc := range []struct {
		nodeCache string
		node      int
		xCached   []int
	}{{"", 0, nil}, {"gdsf", 1, []int{0}}} {
		c := newCluster(1, 1)
		p := mustNew(t, "tbccrd", Config{CacheBytes: 100, NodeCache: tc.nodeCache}).(*TBCCRD)
		if d := p.Pick(c, &Request{URL: "/x", Size: 90, Conn: 1, Holder: -1}); d.Node != 0 {
			t.Fatalf("%q: /x on node %d, want 0", tc.nodeCache, d.Node)
		}
		d := p.Pick(c, &Request{URL: "/y", Size: 50, Conn: 1, Holder: -1, Now: time.Second})
		if d.Node != tc.node || d.Handoff != (tc.node != 0) {
			t.Errorf("%q: /y got %+v, want node %d", tc.nodeCache, d, tc.node)
		}
		if _, cached := flags(p, "/x"); !slices.Equal(cached, tc.xCached) {
			t.Errorf("%q: /x cached on %v, want %v", tc.nodeCache, cached, tc.xCached)
		}
	}
}
