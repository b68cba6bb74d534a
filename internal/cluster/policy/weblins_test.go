package policy

import (
	"testing"
	"time"
)

func TestWeblinsBranches(t *testing.T) {
	c := newCluster(1, 1, 1)
	p := mustNew(t, "weblins", Config{Period: time.Hour, PopularN: 1}).(*Weblins)
	const big, small = 200 << 10, 1000
	type step struct {
		note   string
		url    string
		size   int64
		holder int
		active []int
		want   Decision
	}
	steps := []step{
		// Placement: /big → a (all empty), /small → b, /s2 → c (least
		// assigned expected load; a already owns 200 KiB).
		{"large file, owner a idle: hand off to the owner", "/big", big, 1, []int{0, 0, 0},
			Decision{Node: 0, Handoff: true, Fetch: -1}},
		{"small file owned by b: first member a fetches from b's memory", "/small", small, 0, []int{0, 0, 0},
			Decision{Node: 0, Fetch: 1}},
		{"small file placed on c, asked at c: c serves from its own disk", "/s2", small, 2, []int{0, 0, 0},
			Decision{Node: 2, Fetch: -1}},
		{"first member b caches /small: serves it", "/small", small, 1, []int{0, 0, 0},
			Decision{Node: 1, Fetch: -1}},
		{"owner b overloaded and caches /small: c serves, fetching b's copy", "/small", small, 2, []int{0, 130, 0},
			Decision{Node: 2, Fetch: 1}},
		{"c kept a copy: now a member hit even with b idle", "/small", small, 2, []int{0, 0, 0},
			Decision{Node: 2, Fetch: -1}},
		{"owner a overloaded, /big never cached (> 100 KiB): c reads its disk", "/big", big, 2, []int{130, 0, 0},
			Decision{Node: 2, Fetch: -1}},
		{"owner a just below T: large file handed off", "/big", big, 2, []int{129, 0, 0},
			Decision{Node: 0, Handoff: true, Fetch: -1}},
		{"new connection: wrr picks the first member (a), owner a: no handoff", "/big", big, -1, []int{0, 0, 0},
			Decision{Node: 0, Fetch: -1}},
	}
	run := func(i int, st step, now time.Duration) {
		t.Helper()
		setActive(c, st.active...)
		got := p.Pick(c, &Request{URL: st.url, Size: st.size, Holder: st.holder, Now: now})
		if got != st.want {
			t.Fatalf("step %d (%s): got %+v, want %+v", i, st.note, got, st.want)
		}
	}
	for i, st := range steps {
		run(i, st, time.Duration(i)*time.Second)
	}
	if o := [3]int{p.Owner("/big"), p.Owner("/small"), p.Owner("/s2")}; o != [3]int{0, 1, 2} {
		t.Fatalf("owners %v, want [0 1 2]", o)
	}
	// After a Period the most requested file (/big, 4 requests) becomes the
	// replicated popular set: any first member serves it, no handoff.
	run(100, step{"popular rebuild", "/small", small, 0, []int{0, 0, 0}, Decision{Node: 0, Fetch: 1}}, 2*time.Hour)
	run(101, step{"popular: served at first member b", "/big", big, 1, []int{0, 0, 0},
		Decision{Node: 1, Fetch: -1}}, 2*time.Hour+time.Second)
	if tb := p.Tables(10).(WeblinsTables); tb.Docs != 3 || len(tb.Popular) != 1 || tb.Popular[0] != "/big" {
		t.Errorf("tables %+v", tb)
	}
}

// TestWeblinsPlacementBalancesLoad checks the greedy placement: documents go
// to the node with the least expected load (requests × size) so far.
func TestWeblinsPlacementBalancesLoad(t *testing.T) {
	c := newCluster(1, 1)
	p := mustNew(t, "weblins", Config{Period: time.Hour}).(*Weblins)
	reqs := []struct {
		url   string
		size  int64
		owner int
	}{
		{"/1", 100, 0}, // loads 100, 0
		{"/2", 30, 1},  // 100, 30
		{"/3", 30, 1},  // 100, 60
		{"/2", 30, 1},  // 100, 90
		{"/4", 50, 1},  // 100, 140
		{"/5", 10, 0},  // 110, 140
		{"/1", 100, 0}, // 210, 140
		{"/6", 10, 1},  // 210, 150
	}
	for i, r := range reqs {
		p.Pick(c, &Request{URL: r.url, Size: r.size, Holder: 0})
		if got := p.Owner(r.url); got != r.owner {
			t.Fatalf("request %d %s: owner %d, want %d (assigned %v)", i, r.url, got, r.owner, p.assigned)
		}
	}
	if p.assigned[0] != 210 || p.assigned[1] != 150 {
		t.Errorf("assigned %v, want [210 150]", p.assigned)
	}
	// The owner goes down: its documents are placed again.
	c.Nodes[0].Up = false
	c.Version++
	if d := p.Pick(c, &Request{URL: "/1", Size: 100, Holder: -1}); d.Node != 1 || p.Owner("/1") != 1 {
		t.Errorf("after a went down: %+v owner %d", d, p.Owner("/1"))
	}
}

// TestWeblinsSizeThreshold pins S: exactly S bytes is large (handed off),
// one byte less is small (fetched from the owner's memory).
func TestWeblinsSizeThreshold(t *testing.T) {
	c := newCluster(1, 1)
	p := mustNew(t, "weblins", Config{})
	if d := p.Pick(c, &Request{URL: "/e", Size: 100 << 10, Holder: 1}); d != (Decision{Node: 0, Handoff: true, Fetch: -1}) {
		t.Errorf("size S: %+v", d)
	}
	// /f is placed on b (a owns 100 KiB of expected load), asked at a.
	if d := p.Pick(c, &Request{URL: "/f", Size: 100<<10 - 1, Holder: 0}); d != (Decision{Node: 0, Fetch: 1}) {
		t.Errorf("size S-1: %+v", d)
	}
}

func TestWeblinsFirstMemberLC(t *testing.T) {
	c := newCluster(1, 1, 1)
	setActive(c, 5, 0, 3)
	p := mustNew(t, "weblins", Config{FirstMember: "lc"})
	// /a is placed on a (no expected load yet); it is small, asked on a new
	// connection: lc picks b as first member, which fetches from a.
	if d := p.Pick(c, &Request{URL: "/a", Size: 10, Holder: -1}); d != (Decision{Node: 1, Fetch: 0}) {
		t.Errorf("got %+v", d)
	}
	if _, err := New("weblins", Config{FirstMember: "dns"}); err == nil {
		t.Error("bad first member accepted")
	}
}
