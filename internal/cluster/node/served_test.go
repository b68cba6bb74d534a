package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"shoal/internal/base/cache"
)

// TestServedBytes: Status.Served counts file body bytes answered
// (object_bytes) and those that came from a memory (memory_bytes): this
// node's cache, or a peer's memory when the owner did not read its disk.
// Node 0 asks, node 1 owns the peer-fetched file. Each step's expected
// counters are cumulative, checked by hand: hello.txt is 13 B, small.bin
// 90 KiB (92,160 B), big.bin 614,403 B, above the 500 KiB cache
// threshold, so always sendfile from disk).
func TestServedBytes(t *testing.T) {
	root, small := peerSite(t)
	big := []byte(bigBody())
	if err := os.WriteFile(filepath.Join(root, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	const hello, sm = int64(len(helloBody)), int64(90 << 10)
	if int64(len(small)) != sm || hello != 13 || len(big) != 614403 {
		t.Fatalf("fixture sizes %d %d %d", len(helloBody), len(small), len(big))
	}
	ns := startPeers(t, root, 2, nil)
	c := ns[0].dial(t)
	steps := []struct {
		name     string
		req      string
		head     bool
		obj, mem int64 // cumulative
	}{
		{"miss reads the disk", get("/hello.txt"), false, 13, 0},
		{"hit from memory", get("/hello.txt"), false, 26, 13},
		{"HEAD counts nothing", "HEAD /hello.txt HTTP/1.1\r\nHost: test\r\n\r\n", true, 26, 13},
		{"range of a cached file", get("/hello.txt", "Range: bytes=0-4\r\n"), false, 31, 18},
		{"above the cache threshold: disk", get("/big.bin"), false, 31 + 614403, 18},
		{"peer reads its disk", get("/small.bin", "Shoal-Fetch: 1\r\n"), false, 31 + 614403 + sm, 18},
		{"peer's memory (streamed)", get("/small.bin", "Shoal-Fetch: 1\r\n"), false, 31 + 614403 + 2*sm, 18 + sm},
		{"peer's memory (range)", get("/small.bin", "Shoal-Fetch: 1\r\n", "Range: bytes=0-9\r\n"), false, 31 + 614403 + 2*sm + 10, 18 + sm + 10},
	}
	for _, st := range steps {
		c.send(st.req)
		if r := c.read(st.head); r.status != 200 && r.status != 206 {
			t.Fatalf("%s: status %d", st.name, r.status)
		}
		want := cache.Served{ObjectBytes: st.obj, MemoryBytes: st.mem}
		var got cache.Served
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			// The counters are added when the connection's batch ends,
			// which may be just after the client has its answer.
			if got = ns[0].srv.Status().Served; got == want || time.Now().After(deadline) {
				break
			}
		}
		if got != want {
			t.Errorf("%s: served %+v, want %+v", st.name, got, want)
		}
	}
	if got := ns[1].srv.Status().Served; got != (cache.Served{}) {
		t.Errorf("the owner counts bytes it sent to a peer as answered: %+v", got)
	}
	// The status report carries them inline under their JSON names.
	var m map[string]any
	if err := json.Unmarshal(ns[0].srv.statusJSON(), &m); err != nil {
		t.Fatal(err)
	}
	if m["object_bytes"] != float64(31+614403+2*sm+10) || m["memory_bytes"] != float64(18+sm+10) {
		t.Errorf("status JSON object_bytes %v, memory_bytes %v", m["object_bytes"], m["memory_bytes"])
	}
}
