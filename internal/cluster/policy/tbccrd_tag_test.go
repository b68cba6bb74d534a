package policy

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// tagTable is a node's copy of the shared table, kept from TagUpdates.
type tagTable struct {
	m    map[string]int
	full []bool
}

func (tt *tagTable) apply(u TagUpdate) {
	if u.Reset || tt.m == nil {
		tt.m = map[string]int{}
	}
	for _, g := range u.Tags {
		if g.Node < 0 {
			delete(tt.m, g.URL)
		} else {
			tt.m[g.URL] = g.Node
		}
	}
	tt.full = append(tt.full[:0], u.Full...)
}

// route is the node's decision: the tagged node, or -1 to ask the front.
func (tt *tagTable) route(url string) int {
	if h, ok := tt.m[url]; ok && h < len(tt.full) && !tt.full[h] {
		return h
	}
	return -1
}

// TestTBCCRDTagUpdates follows the shared table by hand on two nodes with a
// 100-byte cache and a load limit of 2 connections.
func TestTBCCRDTagUpdates(t *testing.T) {
	c := newCluster(1, 1)
	p := mustNew(t, "tbccrd", Config{CacheBytes: 100, LoadLimit: 2}).(*TBCCRD)
	var u TagUpdate
	check := func(step string, reset bool, tags []Tag, full []bool) {
		t.Helper()
		u = p.TagUpdates(c, u)
		slices.SortFunc(u.Tags, func(a, b Tag) int { return cmpString(a.URL, b.URL) })
		if u.Reset != reset || !slices.Equal(u.Tags, tags) || !slices.Equal(u.Full, full) {
			t.Fatalf("%s: got reset %v tags %v full %v, want %v %v %v", step, u.Reset, u.Tags, u.Full, reset, tags, full)
		}
	}
	check("first call", true, nil, []bool{false, false})
	p.Pick(c, &Request{URL: "/a", Size: 60, Conn: 1, Holder: -1, Now: 1})
	check("conn 1 /a → node 0 caches it", false, []Tag{{URL: "/a", Node: 0}}, []bool{false, false})
	p.Pick(c, &Request{URL: "/b", Size: 30, Conn: 2, Holder: -1, Now: 2})
	check("conn 2 /b → node 1", false, []Tag{{URL: "/b", Node: 1}}, []bool{false, false})
	p.Tagged(c, &Request{URL: "/a", Size: -1, Conn: 2, Now: 3}, 0)
	check("node 1 moves conn 2 to node 0 for /a: a hit, node 0 full", false, nil, []bool{true, false})
	p.Tagged(c, &Request{URL: "/c", Size: 50, Conn: 2, Now: 4}, 1)
	check("a stale tag served /c on node 1: now cached there", false, []Tag{{URL: "/c", Node: 1}}, []bool{false, false})
	if !slices.Equal(p.connCount, []int{1, 1}) {
		t.Fatalf("connections %v, want [1 1]", p.connCount)
	}
	p.Tagged(c, &Request{URL: "/d", Size: 40, Conn: 2, Now: 5}, 1)
	check("/d on node 1 evicts /b (LRU)", false, []Tag{{URL: "/b", Node: -1}, {URL: "/d", Node: 1}}, []bool{false, false})
	p.Pick(c, &Request{URL: "/a", Size: 60, Conn: 3, Holder: -1, Now: 6})
	p.Pick(c, &Request{URL: "/a", Size: 60, Conn: 4, Holder: -1, Now: 7})
	check("node 0 at the limit: /a also cached on node 1 → ask the front", false, []Tag{{URL: "/a", Node: -1, Holders: 3}, {URL: "/c", Node: -1}},
		[]bool{true, true})
	if !slices.Equal(u.Loads, []int{2, 2}) || u.LoadLimit != 2 {
		t.Fatalf("loads %v limit %d, want [2 2] and 2", u.Loads, u.LoadLimit)
	}
	c.Nodes[1].Up = false
	c.Version++
	check("node 1 down", true, nil, []bool{true, true})
	p.TagAsked("/a")
	check("asked about /a", false, []Tag{{URL: "/a", Node: 0}}, []bool{true, true})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestTBCCRDTaggedEqualsPick runs the same random keep-alive workload
// through two tbccrd instances: one picks every request (the front sees
// every request, as in seed 000), the other lets "nodes" route by the
// table TagUpdates shares and is told with Tagged. Whenever the table names
// a node, Pick must name it too, and after every request both instances'
// tables must be equal.
func TestTBCCRDTaggedEqualsPick(t *testing.T) {
	cfg := Config{CacheBytes: 400, LoadLimit: 5}
	c1, c2 := newCluster(1, 1, 1), newCluster(1, 1, 1)
	tag := mustNew(t, "tbccrd", cfg).(*TBCCRD)
	pick := mustNew(t, "tbccrd", cfg).(*TBCCRD)
	rng := rand.New(rand.NewPCG(26, 0))
	var tt tagTable
	var u TagUpdate
	u = tag.TagUpdates(c1, u)
	tt.apply(u)
	holder := map[uint64]int{}
	routed, asked := 0, 0
	for i := range 5000 {
		conn := uint64(1 + rng.IntN(12))
		if rng.IntN(20) == 0 {
			tag.CloseConn(conn)
			pick.CloseConn(conn)
			delete(holder, conn)
			continue
		}
		url := "/" + string(rune('a'+int(rng.ExpFloat64()*4)%26))
		size := int64(20 + 13*(int(url[1])%7))
		now := time.Duration(i) * time.Millisecond
		h, known := holder[conn]
		if !known {
			h = -1
		}
		r := Request{URL: url, Size: size, Conn: conn, Holder: h, Now: now}
		want := pick.Pick(c2, &r)
		if n := tt.route(url); known && n >= 0 {
			if want.Node != n {
				t.Fatalf("request %d (%s on conn %d at node %d): table says %d, Pick %d", i, url, conn, h, n, want.Node)
			}
			tag.Tagged(c1, &Request{URL: url, Size: size, Conn: conn, Now: now}, n)
			routed++
		} else {
			r := Request{URL: url, Size: size, Conn: conn, Holder: h, Now: now}
			if d := tag.Pick(c1, &r); d.Node != want.Node {
				t.Fatalf("request %d: asked Pick %d, Pick %d", i, d.Node, want.Node)
			}
			if known {
				tag.TagAsked(url)
				asked++
			}
		}
		holder[conn] = want.Node
		if a, b := tag.Tables(100), pick.Tables(100); !reflect.DeepEqual(a, b) {
			t.Fatalf("request %d: tables differ\ntagged %+v\npicked %+v", i, a, b)
		}
		u = tag.TagUpdates(c1, u)
		tt.apply(u)
	}
	t.Logf("%d later requests routed by the table, %d asked", routed, asked)
	if routed < 500 || asked == 0 {
		t.Errorf("routed %d, asked %d: the workload does not exercise both", routed, asked)
	}
}
