package httpwire

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseRanges checks the nginx 1.22 range rules (outcomes verified
// against nginx 1.22.1 by hand with curl on a 108-byte file, and by the
// differential test in internal/cluster/node) plus shoal's coalescing.
func TestParseRanges(t *testing.T) {
	const size = 108
	cases := []struct {
		v     string
		max   int
		kind  RangeKind
		spans string // "start-end(excl) ..."
	}{
		{"", 0, RangeNone, ""},
		{"bytes=", 0, RangeNone, ""},
		{"items=0-1", 0, RangeNone, ""},
		{"BYTES=0-4", 0, RangeSingle, "0-5"},
		{"bytes=0-4", 0, RangeSingle, "0-5"},
		{"bytes= 0 - 4 ", 0, RangeSingle, "0-5"},
		{"bytes=100-", 0, RangeSingle, "100-108"},
		{"bytes=100-1000", 0, RangeSingle, "100-108"},
		{"bytes=-8", 0, RangeSingle, "100-108"},
		{"bytes=-1000", 0, RangeSingle, "0-108"},
		{"bytes=108-", 0, RangeUnsatisfiable, ""},
		{"bytes=-0", 0, RangeUnsatisfiable, ""},
		{"bytes=x", 0, RangeUnsatisfiable, ""},
		{"bytes=5-2", 0, RangeUnsatisfiable, ""},      // last < first: skipped, none left
		{"bytes=0-1,,3-4", 0, RangeUnsatisfiable, ""}, // empty element is a syntax error in nginx
		{"bytes=0-1;3-4", 0, RangeUnsatisfiable, ""},
		{"bytes=\t0-1", 0, RangeUnsatisfiable, ""},
		{"bytes=99999999999999999999-", 0, RangeUnsatisfiable, ""},
		{"bytes=200-300,0-1", 0, RangeSingle, "0-2"}, // one satisfiable: single part
		{"bytes=0-9,20-29", 0, RangeMulti, "0-10 20-30"},
		{"bytes=20-29,0-9", 0, RangeMulti, "20-30 0-10"}, // order kept
		{"bytes=0-9,5-14", 0, RangeSingle, "0-15"},       // overlap coalesced (nginx: 2 parts)
		{"bytes=0-9,10-19", 0, RangeSingle, "0-20"},      // adjacent coalesced (nginx: 2 parts)
		{"bytes=0-9,10-19,40-49", 0, RangeMulti, "0-20 40-50"},
		{"bytes=0-50,0-50", 0, RangeSingle, "0-51"},         // 102 <= 108 bytes: allowed, coalesced
		{"bytes=0-60,0-60", 0, RangeNone, ""},               // 122 > 108 bytes: whole body, as nginx
		{"bytes=0-0,2-2,4-4", 2, RangeNone, ""},             // beyond max: whole body (nginx max_ranges)
		{"bytes=0-0,2-2", 2, RangeMulti, "0-1 2-3"},         // at max
		{"bytes=0-0,2-2,200-300", 2, RangeMulti, "0-1 2-3"}, // unsatisfiable ones do not count
	}
	for _, c := range cases {
		spans, kind := ParseRanges([]byte(c.v), size, c.max, nil)
		var got []string
		for _, s := range spans {
			got = append(got, fmt.Sprintf("%d-%d", s.Start, s.End))
		}
		if kind != c.kind || strings.Join(got, " ") != c.spans {
			t.Errorf("ParseRanges(%q, max %d) = %v %q, want %v %q", c.v, c.max, kind, strings.Join(got, " "), c.kind, c.spans)
		}
	}
	// An empty body: "0-" selects nothing and is ignored, "5-" is unsatisfiable.
	if _, k := ParseRanges([]byte("bytes=0-"), 0, 0, nil); k != RangeNone {
		t.Errorf("empty body bytes=0-: %v", k)
	}
	if _, k := ParseRanges([]byte("bytes=5-"), 0, 0, nil); k != RangeUnsatisfiable {
		t.Errorf("empty body bytes=5-: %v", k)
	}
}

func TestParseRangesNoAlloc(t *testing.T) {
	dst := make([]Span, 0, 8)
	v := []byte("bytes=0-9,20-29,-5")
	if n := testing.AllocsPerRun(100, func() { dst, _ = ParseRanges(v, 1000, 8, dst) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

// BenchmarkParseRanges parses a single range and a small multi-range set
// into a reused slice, as a node does per request.
func BenchmarkParseRanges(b *testing.B) {
	for _, v := range []string{"bytes=0-1023", "bytes=0-99, 200-299, -50"} {
		b.Run(v, func(b *testing.B) {
			in := []byte(v)
			dst := make([]Span, 0, 8)
			b.ReportAllocs()
			for b.Loop() {
				var kind RangeKind
				dst, kind = ParseRanges(in, 1<<20, 0, dst)
				if kind == RangeUnsatisfiable || kind == RangeNone {
					b.Fatal(kind)
				}
			}
		})
	}
}
