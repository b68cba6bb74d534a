package node

import (
	"strconv"
	"testing"
)

// TestScanLeavesCacheBounded: the node's only per-URL table is its memory
// cache, byte-budgeted and keyed by the content table's cleaned URL, so a
// scan of missing or refused paths caches nothing (no negative cache) and
// many spellings of one file share one entry.
func TestScanLeavesCacheBounded(t *testing.T) {
	_, ts, c := startSite(t)
	cases := []struct {
		path   func(i int) string
		status int
	}{
		{func(i int) string { return "/scan/" + strconv.Itoa(i) }, 404},
		{func(i int) string { return "/../scan" + strconv.Itoa(i) }, 403},
		{func(i int) string { return "/%zz" + strconv.Itoa(i) }, 400},
		{func(i int) string { return "/x" + strconv.Itoa(i) + "/../hello.txt" }, 200},
	}
	for _, tc := range cases {
		for i := range 500 {
			c.send(get(tc.path(i)))
			if r := c.read(false); r.status != tc.status {
				t.Fatalf("%s: status %d, want %d", tc.path(i), r.status, tc.status)
			}
		}
	}
	if n := ts.srv.objs.Stats().MemoryObjects; n != 1 {
		t.Errorf("%d objects cached after 1,500 refused paths and 500 spellings of /hello.txt, want 1", n)
	}
}
