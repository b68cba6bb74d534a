package pop

import (
	"slices"
	"testing"
	"time"

	"shoal/internal/cdn/replica"
)

func TestPoPKey(t *testing.T) {
	for in, want := range map[string]string{
		"http://Example.com:8080/a?b=1":                "example.com/a?b=1",
		"https://example.com/a":                        "example.com/a",
		"http://example.com/a\x00accept-encoding=gzip": "example.com/a",
		"http://127.0.0.1:41234/docs/index.html":       "/docs/index.html",
		"http://localhost:8080/a":                      "/a",
		"http://[::1]:8080/x":                          "/x",
	} {
		if got := PoPKey(in); got != want {
			t.Errorf("PoPKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// memNode is an EdgeNode over a map.
type memNode map[string]StoredEntry

func (m memNode) EdgeWalk(f func(StoredEntry) bool) {
	for _, e := range m {
		if !f(e) {
			return
		}
	}
}
func (m memNode) EdgeRemove(k string) bool { _, ok := m[k]; delete(m, k); return ok }
func (m memNode) EdgeMarkStale(k string) bool {
	e, ok := m[k]
	e.Tags = append(e.Tags, "STALE")
	m[k] = e
	return ok
}
func (m memNode) EdgeHas(k string) bool { _, ok := m[k]; return ok }

// TestNodeCacheApply: a purge by prefix reaches every variant on every
// node stored before it, and only those; hits are summed per PoP key.
func TestNodeCacheApply(t *testing.T) {
	t0 := time.Now()
	old, late := t0.Add(-time.Minute), t0.Add(time.Minute)
	a := memNode{
		"http://s:81/img/a":        {Key: "http://s:81/img/a", Stored: old},
		"http://s:81/img/b\x00v=1": {Key: "http://s:81/img/b\x00v=1", Stored: old},
		"http://s:81/img/c":        {Key: "http://s:81/img/c", Stored: late},
		"http://s:81/index.html":   {Key: "http://s:81/index.html", Stored: old},
	}
	b := memNode{"http://s:82/img/b\x00v=2": {Key: "http://s:82/img/b\x00v=2", Stored: old}}
	c := newNodeCache([]EdgeNode{a, b})
	got := c.Apply(replica.Purge{Prefix: "/img/", At: t0}, time.Second)
	if want := []string{"s/img/a", "s/img/b"}; !slices.Equal(got, want) {
		t.Fatalf("touched %v, want %v", got, want)
	}
	if len(a) != 2 || len(b) != 0 || !a.EdgeHas("http://s:81/img/c") || !c.heldAnywhere("http://s:81/index.html") {
		t.Fatalf("left a=%v b=%v", a, b)
	}
	c.OnHit("http://s:81/x\x00v=1")
	c.OnHit("http://s:82/x")
	c.OnHit("http://t/x")
	if h := c.TakeHits(); h[HashKey("s/x")] != 2 || h[HashKey("t/x")] != 1 || len(c.TakeHits()) != 0 {
		t.Fatalf("hits %v", h)
	}
}
