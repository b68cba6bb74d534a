package replica

import (
	"maps"
	"testing"
	"time"
)

func TestPurgeMatches(t *testing.T) {
	tags := Tags(" product-7  shop ")
	for _, tc := range []struct {
		p          Purge
		host, uri  string
		want       bool
		validation bool
	}{
		{Purge{URL: "/a"}, "x.com", "/a", true, true},
		{Purge{URL: "/a"}, "x.com", "/a?v=2", false, true},
		{Purge{URL: "/a", Host: "X.com"}, "x.com", "/a", true, true},
		{Purge{URL: "/a", Host: "y.com"}, "x.com", "/a", false, true},
		{Purge{Prefix: "/img/"}, "x.com", "/img/a.png?s=1", true, true},
		{Purge{Prefix: "/img/"}, "x.com", "/im", false, true},
		{Purge{Tag: "shop"}, "x.com", "/anything", true, true},
		{Purge{Tag: "shop2"}, "x.com", "/anything", false, true},
		{Purge{}, "x.com", "/a", false, false},
		{Purge{URL: "/a", Tag: "t"}, "x.com", "/a", true, false},
		{Purge{URL: "a"}, "x.com", "a", true, false},
		{Purge{Tag: "a b"}, "x.com", "/", false, false},
	} {
		if got := tc.p.Matches(tc.host, tc.uri, tags); got != tc.want {
			t.Errorf("%+v matches %s%s: %v, want %v", tc.p, tc.host, tc.uri, got, tc.want)
		}
		if err := tc.p.Validate(); (err == nil) != tc.validation {
			t.Errorf("%+v: validate %v", tc.p, err)
		}
	}
}

// TestPurgeLogCatchUp: a PoP that missed purges catches up from a peer's
// log by its vector, gaps included, and applies each once.
func TestPurgeLogCatchUp(t *testing.T) {
	cfg := DefaultConfig()
	a := NewPurgeLog(cfg, "a@1")
	b := NewPurgeLog(cfg, "b@1")
	away := NewPurgeLog(cfg, "c@1")
	p1 := a.Issue(t0, Purge{URL: "/1"})
	p2 := a.Issue(t0.Add(time.Second), Purge{Prefix: "/2"})
	q1 := b.Issue(t0.Add(2*time.Second), Purge{Tag: "t"})
	if !a.Add(q1) || a.Add(q1) || a.Add(p1) {
		t.Fatal("a: add of a new purge must report new, of a known one not")
	}
	// away saw p2 only (p1 was lost): its vector for a stays 0.
	if !away.Add(p2) {
		t.Fatal("away: p2 not new")
	}
	if v := away.Vector(); !maps.Equal(v, map[string]uint64{"a@1": 0}) {
		t.Fatalf("away's vector %v, want a@1:0 (p1 missing)", v)
	}
	got := a.Since(away.Vector())
	if len(got) != 3 || got[0] != p1 || got[1] != p2 || got[2] != q1 {
		t.Fatalf("since: %v, want p1 p2 q1 oldest first", got)
	}
	n := 0
	for _, p := range got {
		if away.Add(p) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("away applied %d, want 2 (p1 and q1; p2 it had)", n)
	}
	if v := away.Vector(); !maps.Equal(v, map[string]uint64{"a@1": 2, "b@1": 1}) {
		t.Fatalf("vector after catch-up %v", v)
	}
	if got := a.Since(away.Vector()); len(got) != 0 {
		t.Fatalf("nothing left to send, got %v", got)
	}
	// Retention: a day later the log is empty but the vector remembers.
	a.Expire(t0.Add(cfg.PurgeRetention + 3*time.Second))
	if a.Len() != 0 || a.Vector()["a@1"] != 2 || a.Add(p1) {
		t.Fatalf("after expiry: len %d vector %v", a.Len(), a.Vector())
	}
}

// TestPurgeLogTombstone: a copy made before a matching purge (or within
// the 2 s margin after it) is refused; soft purges only mark it stale.
func TestPurgeLogTombstone(t *testing.T) {
	l := NewPurgeLog(DefaultConfig(), "a@1")
	l.Issue(t0, Purge{URL: "/hard"})
	l.Issue(t0, Purge{Prefix: "/soft/", Soft: true})
	for _, tc := range []struct {
		uri        string
		made       time.Time
		hard, soft bool
	}{
		{"/hard", t0.Add(-time.Hour), true, false},
		{"/hard", t0.Add(time.Second), true, false},
		{"/hard", t0.Add(3 * time.Second), false, false},
		{"/soft/x", t0.Add(-time.Minute), false, true},
		{"/other", t0.Add(-time.Minute), false, false},
	} {
		h, s := l.Tombstone("x.com", tc.uri, nil, tc.made)
		if h != tc.hard || s != tc.soft {
			t.Errorf("%s made %v: hard %v soft %v, want %v %v", tc.uri, tc.made.Sub(t0), h, s, tc.hard, tc.soft)
		}
	}
}

// TestPurgeLogBounded: past MaxPurges the oldest go first.
func TestPurgeLogBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxPurges = 3
	l := NewPurgeLog(cfg, "a@1")
	for i := range 5 {
		l.Issue(t0.Add(time.Duration(i)*time.Second), Purge{URL: "/x"})
	}
	got := l.Since(nil)
	if l.Len() != 3 || len(got) != 3 || got[0].Seq != 3 || l.Vector()["a@1"] != 5 {
		t.Fatalf("len %d, kept %v, vector %v", l.Len(), got, l.Vector())
	}
}
