package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/base/store"
)

// A conn rebuilds the object of a miss the store did not keep for its next
// miss (conn.spare), and never one the store kept. Three files of one size
// and mtime (so one ETag) and three types, a memory tier that holds one:
// on one connection, every answer carries its own file's type and body,
// the kept file's hits included, whatever misses came between. Failed when
// the kept file's object was reused too: its hits then carried the head of
// the last miss (text/css for a text/plain file).
func TestMissObjectReuse(t *testing.T) {
	root := t.TempDir()
	const size = 1000
	mod := time.Unix(1_600_000_000, 0)
	files := []struct{ name, ctype string }{
		{"a.txt", "text/plain; charset=utf-8"},
		{"b.css", "text/css; charset=utf-8"},
		{"c.html", "text/html; charset=utf-8"},
	}
	for i, f := range files {
		p := filepath.Join(root, f.name)
		if err := os.WriteFile(p, []byte(strings.Repeat(string(rune('a'+i)), size)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	lastMod := string(httpwire.AppendHTTPDate(nil, mod))
	ts := start(t, root, func(c *Config) { c.CacheBytes = store.Footprint(1000, 0) })
	c := ts.dial(t)
	for _, i := range []int{0, 0, 1, 2, 0, 1, 0, 2, 2, 0} {
		f := files[i]
		c.send(get("/" + f.name))
		r := c.read(false)
		if r.status != 200 || r.h.Get("Content-Type") != f.ctype || r.h.Get("Content-Length") != strconv.Itoa(size) ||
			r.h.Get("Last-Modified") != lastMod || r.body != strings.Repeat(string(rune('a'+i)), size) {
			t.Fatalf("%s: %d, %s, Content-Length %s, Last-Modified %s, body %.8q…; want 200, %s, %d, %s, its own",
				f.name, r.status, r.h.Get("Content-Type"), r.h.Get("Content-Length"), r.h.Get("Last-Modified"), r.body,
				f.ctype, size, lastMod)
		}
	}
	if st := ts.srv.objs.Stats(); st.MemoryObjects != 1 || st.MemoryHits == 0 {
		t.Errorf("store %+v; want one file kept and hits on it", st)
	}
}
