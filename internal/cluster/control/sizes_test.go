package control

import (
	"strings"
	"testing"

	"shoal/internal/cluster/policy"
)

// sizeSeen records the Size each Pick and Done call saw.
type sizeSeen struct {
	firstUsable
	pick, done []int64
}

func (p *sizeSeen) Pick(c *policy.Cluster, r *policy.Request) policy.Decision {
	p.pick = append(p.pick, r.Size)
	return p.firstUsable.Pick(c, r)
}
func (p *sizeSeen) Done(c *policy.Cluster, node int, r *policy.Request) {
	p.done = append(p.done, r.Size)
}

// TestSizesReachPickAndDone: a size learned from a relayed 200 (Size set
// before Done) or from a node's index reaches Pick of later requests for
// the URL, as the simulator passes the trace's size; a 404's length is not
// learned, and the table stops growing at MaxSizes.
func TestSizesReachPickAndDone(t *testing.T) {
	p := &sizeSeen{}
	c, err := New(p, []NodeSpec{{URL: "http://127.0.0.1:1"}}, Options{MaxSizes: 3})
	if err != nil {
		t.Fatal(err)
	}
	req := func(url string, status int, size int64) {
		r := policy.Request{URL: url, Size: -1}
		_, b := c.Pick(&r)
		if status != 0 {
			r.Status, r.Size = status, size
		}
		c.Done(b, &r)
	}
	req("/a", 200, 100)   // learns /a = 100 from the response
	req("/a", 0, 0)       // a handoff: Pick gets 100
	req("/gone", 404, 20) // not learned
	req("/gone", 0, 0)
	c.LearnSizes(map[string]int64{"/b": 7, "/c": 8})
	req("/b", 0, 0)
	c.LearnSizes(map[string]int64{"/d": 9}) // the table is full (3)
	req("/d", 0, 0)
	want := []int64{-1, 100, -1, -1, 7, -1}
	if len(p.pick) != len(want) {
		t.Fatalf("Pick saw sizes %v, want %v", p.pick, want)
	}
	for i := range want {
		if p.pick[i] != want[i] {
			t.Fatalf("Pick saw sizes %v, want %v", p.pick, want)
		}
	}
	if got := []int64{c.Size("/a"), c.Size("/gone"), c.Size("/c"), c.Size("/d")}; got[0] != 100 || got[1] != -1 || got[2] != 8 || got[3] != -1 {
		t.Errorf("Size(/a, /gone, /c, /d) = %v, want [100 -1 8 -1]", got)
	}
	// The URL text is bounded too: 10 bytes hold "/aaaa" and "/bbbb" only.
	c2, err := New(p, []NodeSpec{{URL: "http://127.0.0.1:1"}}, Options{MaxSizeBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	c2.LearnSizes(map[string]int64{"/aaaa": 1})
	c2.LearnSizes(map[string]int64{"/bbbb": 2})
	c2.LearnSizes(map[string]int64{"/c": 3})
	if got := []int64{c2.Size("/aaaa"), c2.Size("/bbbb"), c2.Size("/c")}; got[0] != 1 || got[1] != 2 || got[2] != -1 {
		t.Errorf("with 10 bytes: sizes %v, want [1 2 -1]", got)
	}
}

// TestParseSizes checks the size index format: "SIZE URL" lines, a URL
// may hold spaces, the limit caps the entries, and anything else is an
// error rather than a guess.
func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  map[string]int64
		err   bool
	}{
		{"10 /a\n0 /b c.html\n", 10, map[string]int64{"/a": 10, "/b c.html": 0}, false},
		{"10 /a\n20 /b\n30 /c\n", 2, map[string]int64{"/a": 10, "/b": 20}, false},
		{"", 10, map[string]int64{}, false},
		{"10 a\n", 10, nil, true},
		{"-1 /a\n", 10, nil, true},
		{"x /a\n", 10, nil, true},
		{"10\n", 10, nil, true},
	} {
		got, err := parseSizes(strings.NewReader(tc.in), tc.limit)
		if (err != nil) != tc.err {
			t.Errorf("%q: err %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}
