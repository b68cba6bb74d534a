package node

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// bigFetchSize is the file a non-holder streams in the memory tests: far
// above MaxObject and above any buffer the path may keep.
const bigFetchSize = 64 << 20

// streamGet sends GET path on a new connection to addr and reads the
// response with a fixed buffer, hashing the body: it returns the status,
// the announced Content-Length, the body bytes read, their SHA-256, and
// whether the connection was closed after them. stall, when set, is
// called once after the first body bytes, before reading the rest.
func streamGet(t *testing.T, addr, path string, stall func()) (status int, clen, n int64, sum [32]byte, closed bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte(get(path)))
	br := bufio.NewReaderSize(nc, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the head: %v", err)
	}
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var rerr error
	for n < resp.ContentLength {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := br.Read(buf[:min(int64(len(buf)), resp.ContentLength-n)])
		h.Write(buf[:k])
		n += int64(k)
		if rerr = err; err != nil {
			break
		}
		if stall != nil && n > 0 {
			stall()
			stall = nil
		}
	}
	copy(sum[:], h.Sum(nil))
	if n == resp.ContentLength {
		// A complete body on a kept-alive connection: nothing more comes.
		nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := br.ReadByte()
		closed = err == io.EOF
	} else {
		// Short: closed by the node (EOF or reset), not a read timeout on
		// a connection left open.
		var ne net.Error
		closed = !errors.As(rerr, &ne) || !ne.Timeout()
	}
	return resp.StatusCode, resp.ContentLength, n, sum, closed
}

// TestBigPeerFetchBoundedMemory: a 64 MiB file stored only on node 1 is
// fetched by node 0 for its client; both nodes run in this process, so
// TotalAlloc's growth over the request is what both sides allocated: it
// must stay far below the file's size (the holder reads the file in
// chunks, the asking node forwards each chunk and keeps none), and the
// client gets the file's bytes.
func TestBigPeerFetchBoundedMemory(t *testing.T) {
	layout := map[string][]int{"/huge.bin": {1}}
	roots, bodies := partSite(t, 2, layout, map[string]int{"/huge.bin": bigFetchSize})
	ns := startPeers(t, roots[0], 2, func(i int, c *Config) {
		c.Root = roots[i]
		if i == 0 {
			writeManifests(t, roots, c.Peer.Peers, layout, bodies)
		}
	})
	want := sha256.Sum256(bodies["/huge.bin"])
	bodies = nil
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	status, clen, n, sum, _ := streamGet(t, ns[0].addr, "/huge.bin", nil)
	runtime.ReadMemStats(&m1)
	if status != 200 || clen != bigFetchSize || n != bigFetchSize || sum != want {
		t.Fatalf("status %d, Content-Length %d, %d bytes read, SHA-256 match %v", status, clen, n, sum == want)
	}
	grew := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("allocated %d KiB over a %d MiB fetch", grew>>10, bigFetchSize>>20)
	if grew > 8<<20 {
		t.Errorf("both nodes allocated %d MiB for a %d MiB file, want < 8 MiB (the body must not be held whole)", grew>>20, bigFetchSize>>20)
	}
	if st := ns[1].srv.PeerStats(); st.Served != 1 || st.ServedBytes != bigFetchSize {
		t.Errorf("holder counters %+v", st)
	}
}

// TestBigPeerFetchHolderDies: the only holder of a 64 MiB file goes away
// after the first bytes reached the client: node 0 cannot finish the
// promised body, so it closes the client's connection short of
// Content-Length (never a complete-looking 200). With a second holder,
// the same failure is finished from it and the client gets every byte.
func TestBigPeerFetchHolderDies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		holders  []int
		complete bool
	}{
		{"only holder", []int{1}, false},
		{"second holder finishes", []int{1, 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			layout := map[string][]int{"/huge.bin": tc.holders}
			roots, bodies := partSite(t, 3, layout, map[string]int{"/huge.bin": bigFetchSize})
			ns := startPeers(t, roots[0], 3, func(i int, c *Config) {
				c.Root = roots[i]
				if i == 0 {
					writeManifests(t, roots, c.Peer.Peers, layout, bodies)
				}
			})
			want := sha256.Sum256(bodies["/huge.bin"])
			status, clen, n, sum, closed := streamGet(t, ns[0].addr, "/huge.bin", func() { shut(ns[1].srv) })
			t.Logf("status %d, %d of %d bytes, closed %v", status, n, clen, closed)
			if status != 200 || clen != bigFetchSize {
				t.Fatalf("status %d, Content-Length %d", status, clen)
			}
			if tc.complete {
				if n != clen || sum != want || closed {
					t.Errorf("got %d of %d bytes, SHA-256 match %v, closed %v; want the whole file, finished by the second holder", n, clen, sum == want, closed)
				}
				if st := ns[2].srv.PeerStats(); st.Served != 1 {
					t.Errorf("second holder served %d, want 1 (the resumed stream)", st.Served)
				}
				return
			}
			if n >= clen || !closed {
				t.Errorf("holder gone: %d of %d bytes, closed %v; want the connection closed short of Content-Length", n, clen, closed)
			}
		})
	}
}
