package policy

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tablePolicies are the policies that keep per-URL state.
var tablePolicies = []string{"lard", "lardr", "tbccrd", "weblins"}

// urlCount is the number of URLs in p's per-URL table, read through the
// admin snapshot (Tabler) so the test sees what an operator sees.
func urlCount(t testing.TB, p Policy) int {
	t.Helper()
	n, ok := TableURLs(p)
	if !ok {
		t.Fatalf("%s: no URL table snapshot", p.Name())
	}
	return n
}

// scan feeds n unique URLs through Pick and Done as a URL scanner on a path
// that does not see response statuses (passfd, repair) would.
func scan(p Policy, c *Cluster, n int) {
	for i := range n {
		r := Request{URL: "/scan/" + strconv.Itoa(i), Size: -1, Conn: uint64(i%512) + 1, Holder: -1}
		d := p.Pick(c, &r)
		if d.Node >= 0 {
			c.Start(d.Node)
			c.Finish(d.Node)
			p.Done(c, d.Node, &r)
		}
	}
}

// TestTablesBoundedUnderScan: 200,000 unique URLs leave every per-URL table
// at its default bound (Config.MaxURLs, 65,536), not at 200,000.
func TestTablesBoundedUnderScan(t *testing.T) {
	const want = 65536
	for _, name := range tablePolicies {
		t.Run(name, func(t *testing.T) {
			p := mustNew(t, name, Config{})
			c := newCluster(1, 1, 1, 1)
			scan(p, c, 200_000)
			if got := urlCount(t, p); got != want {
				t.Errorf("%s: %d URLs in the table after a 200,000-URL scan, want the bound %d", name, got, want)
			}
		})
	}
}

// held lists the URLs in p's per-URL table, sorted.
func held(p Policy) []string {
	var x *urlIndex
	switch q := p.(type) {
	case *LARD:
		x = q.idx
	case *LARDR:
		x = q.idx
	case *TBCCRD:
		x = q.t.idx
	case *Weblins:
		x = q.t.idx
	}
	var out []string
	for u := range x.ids {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// TestTableEvictionOrder checks the eviction order by hand on tiny bounds:
// the least recently requested URL leaves first, a request refreshes a URL,
// and the byte bound evicts as many URLs as it takes for the new one to fit.
func TestTableEvictionOrder(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		reqs string // space-separated URLs, requested in order
		want string // URLs held afterwards, sorted
	}{
		// a b c fill 3; a is refreshed; d evicts b (oldest), e evicts c.
		{"count LRU", Config{MaxURLs: 3}, "/a /b /c /a /d /e", "/a /d /e"},
		// No refresh: plain FIFO order.
		{"count FIFO", Config{MaxURLs: 2}, "/a /b /c", "/b /c"},
		// A repeat of a held URL evicts nothing.
		{"repeat", Config{MaxURLs: 2}, "/a /b /a /b /a", "/a /b"},
		// 5+5 = 10 bytes; /cc (3) needs /aaaa out (8); /dddddd (7) needs
		// /bbbb out (3+7 = 10).
		{"bytes", Config{MaxURLBytes: 10}, "/aaaa /bbbb /cc /dddddd", "/cc /dddddd"},
		// One URL longer than the byte bound is admitted alone.
		{"long URL", Config{MaxURLBytes: 4}, "/ab /abcdefgh", "/abcdefgh"},
	}
	for _, name := range tablePolicies {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				p := mustNew(t, name, tc.cfg)
				c := newCluster(1, 1)
				for i, u := range strings.Fields(tc.reqs) {
					r := Request{URL: u, Size: 100, Conn: uint64(i + 1), Holder: -1}
					if d := p.Pick(c, &r); d.Node < 0 {
						t.Fatalf("%s: no node", u)
					}
				}
				if got := strings.Join(held(p), " "); got != tc.want {
					t.Errorf("held %q, want %q", got, tc.want)
				}
				if got, want := urlCount(t, p), len(strings.Fields(tc.want)); got != want {
					t.Errorf("Tables counts %d URLs, want %d", got, want)
				}
			})
		}
	}
}

// TestUnservableURLsLeave: a URL the node answered 404, 410 or 403 for
// leaves the table in Done; other answers (and an unknown status, 0, from
// paths that do not see the response) keep it; other URLs are untouched.
func TestUnservableURLsLeave(t *testing.T) {
	for _, name := range tablePolicies {
		for _, tc := range []struct {
			status int
			kept   bool
		}{{0, true}, {200, true}, {206, true}, {304, true}, {400, true}, {405, true}, {500, true}, {503, true},
			{403, false}, {404, false}, {410, false}} {
			t.Run(name+"/"+strconv.Itoa(tc.status), func(t *testing.T) {
				p := mustNew(t, name, Config{})
				c := newCluster(1, 1)
				hot := Request{URL: "/hot", Size: 100, Holder: -1}
				p.Done(c, p.Pick(c, &hot).Node, &hot)
				r := Request{URL: "/probe", Size: -1, Holder: -1}
				d := p.Pick(c, &r)
				r.Status = tc.status
				p.Done(c, d.Node, &r)
				want := "/hot"
				if tc.kept {
					want = "/hot /probe"
				}
				if got := strings.Join(held(p), " "); got != want {
					t.Errorf("after status %d: held %q, want %q", tc.status, got, want)
				}
			})
		}
	}
}

// TestEvictedRowsForgetCaches: tbccrd's mirror drops an evicted or
// unservable URL's bytes from the node that cached it, and the row's id,
// reused by the next URL, carries none of the old URL's flags or size.
func TestEvictedRowsForgetCaches(t *testing.T) {
	p := mustNew(t, "tbccrd", Config{MaxURLs: 2}).(*TBCCRD)
	c := newCluster(1)
	pick := func(u string, size int64) {
		r := Request{URL: u, Size: size, Holder: -1}
		p.Pick(c, &r)
	}
	tables := func() TBCCRDTables { return p.Tables(10).(TBCCRDTables) }
	pick("/a", 100)
	pick("/b", 200)
	if tb := tables(); tb.CachedBytes[0] != 300 || tb.CachedURLs[0] != 2 {
		t.Fatalf("a+b: cached %d bytes in %d URLs, want 300 in 2", tb.CachedBytes[0], tb.CachedURLs[0])
	}
	pick("/c", -1) // evicts /a, reuses its id, size unknown (0 bytes)
	tb := tables()
	if tb.CachedBytes[0] != 200 || tb.CachedURLs[0] != 2 || tb.URLs != 2 || tb.Evicted != 1 {
		t.Fatalf("after /c: %+v, want 200 bytes in 2 URLs, 2 rows, 1 evicted", tb)
	}
	for _, row := range tb.Rows {
		if row.URL == "/c" && row.Size != -1 {
			t.Errorf("/c inherited size %d from the evicted row", row.Size)
		}
	}
	r := Request{URL: "/b", Size: -1, Holder: -1, Status: 404}
	p.Done(c, 0, &r)
	if tb := tables(); tb.CachedBytes[0] != 0 || tb.CachedURLs[0] != 1 || tb.URLs != 1 {
		t.Fatalf("after 404 on /b: %+v, want 0 bytes in 1 URL, 1 row", tb)
	}
}

// TestWeblinsEvictedDocForgetsOwner: a weblins document evicted from the
// table loses its popular flag and owner, and the URL that reuses its id
// starts with a request count of its own.
func TestWeblinsEvictedDocForgetsOwner(t *testing.T) {
	p := mustNew(t, "weblins", Config{MaxURLs: 2, PopularN: 1, Period: time.Second}).(*Weblins)
	c := newCluster(1, 1)
	req := func(u string, now time.Duration) {
		r := Request{URL: u, Size: 1000, Holder: -1, Now: now}
		p.Pick(c, &r)
	}
	req("/pop", 0)
	req("/pop", 1)
	req("/x", 2)
	req("/x", 1100*time.Millisecond) // rebuild: /pop (2 requests) is popular
	if got := p.Tables(10).(WeblinsTables).Popular; !slices.Equal(got, []string{"/pop"}) {
		t.Fatalf("popular = %v, want [/pop]", got)
	}
	req("/y", 1200*time.Millisecond) // evicts /pop (least recent)
	if got := p.Tables(10).(WeblinsTables).Popular; len(got) != 0 {
		t.Errorf("popular after eviction = %v, want none", got)
	}
	if o := p.Owner("/pop"); o != -1 {
		t.Errorf("evicted /pop still has owner %d", o)
	}
	id, _ := p.t.lookup("/y")
	if d := p.docs[id]; d.count != 1 || p.popular[id] {
		t.Errorf("/y reusing the id: count %d popular %v, want 1 false", d.count, p.popular[id])
	}
}

// TestTableURLs: exactly the table policies report a URL count, zero while
// their tables are empty; the others report none.
func TestTableURLs(t *testing.T) {
	for _, name := range Names() {
		p, err := New(name, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		n, ok := TableURLs(p)
		if want := slices.Contains(tablePolicies, name); ok != want || n != 0 {
			t.Errorf("%s: TableURLs = %d, %v; want 0, %v", name, n, ok, want)
		}
	}
}
