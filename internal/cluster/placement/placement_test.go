package placement

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// The expectations below were computed by an independent implementation
// (a dozen lines of Python: FNV-1a, splitmix64, -w/ln(u)) and checked by
// hand against the scores it printed.
var handNodes = []Node{{"n0", 1}, {"n1", 1}, {"n2", 2}, {"n3", 0}}

func TestHash(t *testing.T) {
	if got, want := Hash("n0", "/index.html"), uint64(0xeeb13baab9bd7bb9); got != want {
		t.Fatalf("Hash = %#x, want %#x", got, want)
	}
}

func TestScore(t *testing.T) {
	for _, tc := range []struct {
		node Node
		key  string
		want float64
	}{
		{handNodes[0], "/index.html", 14.2853},
		{handNodes[1], "/index.html", 2.9134},
		{handNodes[2], "/index.html", 1.527},
		{handNodes[2], "/img/1.png", 33.5796},
		{handNodes[3], "/img/1.png", 0},
	} {
		if got := Score(tc.node, tc.key); math.Abs(got-tc.want) > 1e-4 {
			t.Errorf("Score(%v, %q) = %.4f, want %.4f", tc.node, tc.key, got, tc.want)
		}
	}
}

func TestHolders(t *testing.T) {
	for _, tc := range []struct {
		key  string
		r    int
		want []int
	}{
		{"/index.html", 1, []int{0}},
		{"/index.html", 2, []int{0, 1}},
		{"/index.html", 3, []int{0, 1, 2}},
		{"/index.html", 0, []int{0, 1, 2}},  // 0 = all usable nodes
		{"/index.html", 4, []int{0, 1, 2}},  // n3 has weight 0: never a holder
		{"/index.html", -1, []int{0, 1, 2}}, // negative = all
		{"/a/b.css", 2, []int{2, 1}},
		{"/img/1.png", 2, []int{2, 0}},
		{"/", 1, []int{2}},
		{"/", 3, []int{2, 1, 0}},
	} {
		got := Holders(nil, handNodes, tc.key, tc.r)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Holders(%q, r=%d) = %v, want %v", tc.key, tc.r, got, tc.want)
		}
		for i := range handNodes {
			if h := Holds(handNodes, tc.key, tc.r, i); h != slices.Contains(tc.want, i) {
				t.Errorf("Holds(%q, r=%d, %d) = %v", tc.key, tc.r, i, h)
			}
		}
	}
	// Appends after what dst holds.
	if got := Holders([]int{9}, handNodes, "/a/b.css", 1); !slices.Equal(got, []int{9, 2}) {
		t.Errorf("Holders with a prefix = %v", got)
	}
	if got := Holders(nil, nil, "/x", 2); len(got) != 0 {
		t.Errorf("no nodes: %v", got)
	}
}

func TestReplicas(t *testing.T) {
	for _, tc := range []struct{ r, want int }{{0, 3}, {-5, 3}, {1, 1}, {3, 3}, {9, 3}} {
		if got := Replicas(tc.r, handNodes); got != tc.want {
			t.Errorf("Replicas(%d) = %d, want %d", tc.r, got, tc.want)
		}
	}
}

func keys(n int) []File {
	fs := make([]File, n)
	for i := range fs {
		fs[i] = File{Key: fmt.Sprintf("/dir%d/file%d.html", i%37, i), Size: int64(100 + i%1000)}
	}
	return fs
}

// TestWeightedShare: a node's share of keys follows its weight.
func TestWeightedShare(t *testing.T) {
	nodes := []Node{{"a", 1}, {"b", 1}, {"c", 2}}
	count := make([]int, len(nodes))
	const n = 40000
	for _, f := range keys(n) {
		count[Holders(nil, nodes, f.Key, 1)[0]]++
	}
	for i, want := range []float64{0.25, 0.25, 0.5} {
		if got := float64(count[i]) / n; math.Abs(got-want) > 0.02 {
			t.Errorf("node %s share %.3f, want %.2f ± 0.02", nodes[i].ID, got, want)
		}
	}
}

// TestOneNodeChangesOnlyItsShare is the property that makes joins and
// leaves cheap: adding a node only gives it keys (no key moves between old
// nodes), and removing it gives back exactly those, for every R.
func TestOneNodeChangesOnlyItsShare(t *testing.T) {
	base := []Node{{"10.0.0.1:80", 1}, {"10.0.0.2:80", 2}, {"10.0.0.3:80", 1}, {"10.0.0.4:80", 3}}
	joined := append(slices.Clone(base), Node{"10.0.0.5:80", 2})
	for r := 1; r <= len(base); r++ {
		for _, f := range keys(5000) {
			before := Holders(nil, base, f.Key, r)
			after := Holders(nil, joined, f.Key, r)
			newHas := slices.Contains(after, 4)
			// Old nodes keep their order; the new node is inserted, and
			// pushes out at most the last one.
			var kept []int
			for _, i := range after {
				if i != 4 {
					kept = append(kept, i)
				}
			}
			want := before
			if newHas && r < len(joined) && len(before) == r {
				want = before[:r-1]
			}
			if !slices.Equal(kept, want) {
				t.Fatalf("r=%d %s: before %v after %v", r, f.Key, before, after)
			}
		}
		fs := keys(5000)
		m := Diff(fs, base, joined, r)
		ideal := Share(fs, joined, r, "10.0.0.5:80")
		if m.Moved != ideal || m.Lost != 0 {
			t.Errorf("join r=%d: moved %d, ideal %d, lost %d", r, m.Moved, ideal, m.Lost)
		}
		if r < len(base) && m.Dropped != ideal {
			t.Errorf("join r=%d: dropped %d, want %d (one copy leaves an old node per copy the new one takes)", r, m.Dropped, ideal)
		}
		// Leaving: the leaver's copies are made again from survivors.
		back := Diff(fs, joined, base, r)
		switch {
		case r == 1: // the leaver held the only copy: nothing to copy from
			if back.Lost != ideal || back.Moved != 0 {
				t.Errorf("leave r=1: lost %d moved %d, want lost = the leaver's share %d", back.Lost, back.Moved, ideal)
			}
		default:
			if back.Moved != ideal || back.Lost != 0 {
				t.Errorf("leave r=%d: moved %d lost %d, want moved = the leaver's share %d", r, back.Moved, back.Lost, ideal)
			}
		}
	}
}

func TestDiffLost(t *testing.T) {
	nodes := []Node{{"a", 1}, {"b", 1}}
	fs := keys(200)
	m := Diff(fs, nodes, nodes[:1], 1)
	if want := Share(fs, nodes, 1, "b"); m.Lost != want || m.Moved != 0 {
		t.Errorf("r=1, b dies: lost %d (want b's share %d), moved %d", m.Lost, want, m.Moved)
	}
}

func BenchmarkHolders(b *testing.B) {
	nodes := []Node{{"a", 1}, {"b", 1}, {"c", 2}, {"d", 1}}
	var dst []int
	b.ReportAllocs()
	for b.Loop() {
		dst = Holders(dst[:0], nodes, "/images/some/file.png", 2)
	}
}
