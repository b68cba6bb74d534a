package node

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/httpwire"
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

// TestBigPeerFetchForms: the other answers for a file streamed from its
// holder (700 KiB, above MaxObject, stored on node 1 only), as node 0
// gives them: a single range is cut from the stream, several ranges get
// the whole file (RFC 9110 §14.2), and a HEAD, a 304 and a 416 come from
// the table without asking the holder. Keep-alive holds after each.
func TestBigPeerFetchForms(t *testing.T) {
	const size = 700 << 10
	layout := map[string][]int{"/big.bin": {1}}
	roots, bodies := partSite(t, 2, layout, map[string]int{"/big.bin": size})
	ns := startPeers(t, roots[0], 2, func(i int, c *Config) {
		c.Root = roots[i]
		if i == 0 {
			writeManifests(t, roots, c.Peer.Peers, layout, bodies)
		}
	})
	b := string(bodies["/big.bin"])
	c := ns[0].dial(t)
	c.send("HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	r := c.read(true)
	etag := r.h.Get("Etag")
	if r.status != 200 || r.h.Get("Content-Length") != "716800" || etag == "" {
		t.Fatalf("HEAD: %d %v", r.status, r.h)
	}
	for _, tc := range []struct {
		name, extra string
		status      int
		body        string
		fetch       bool
	}{
		{"single range", "Range: bytes=600000-600009\r\n", 206, b[600000:600010], true},
		{"suffix range", "Range: bytes=-5\r\n", 206, b[size-5:], true},
		{"range in the first chunk", "Range: bytes=10-19\r\n", 206, b[10:20], true},
		{"several ranges", "Range: bytes=0-1,100-101,600000-600009\r\n", 206, "multipart", true},
		{"ranges out of order", "Range: bytes=100-101,0-1\r\n", 200, b, true},
		{"whole", "", 200, b, true},
		// Last: answered after the streams above returned (one goroutine
		// per connection), so the counters below are final.
		{"not modified", "If-None-Match: " + etag + "\r\n", 304, "", false},
		{"unsatisfiable", "Range: bytes=800000-\r\n", 416, "", false},
	} {
		served := ns[1].srv.PeerStats().Served
		c.send(get("/big.bin", tc.extra))
		r := c.read(false)
		if tc.body == "multipart" {
			// serveMultipart's layout, with the boundary the node chose.
			_, bnd, _ := strings.Cut(r.h.Get("Content-Type"), "boundary=")
			var want []byte
			for _, s := range []httpwire.Span{{Start: 0, End: 2}, {Start: 100, End: 102}, {Start: 600000, End: 600010}} {
				want = appendPartHead(want, []byte(bnd), "application/octet-stream", s, size)
				want = append(want, b[s.Start:s.End]...)
			}
			tc.body = string(want) + "\r\n--" + bnd + "--\r\n"
		}
		if r.status != tc.status || r.body != tc.body {
			t.Errorf("%s: status %d, %d bytes; want %d, %d bytes", tc.name, r.status, len(r.body), tc.status, len(tc.body))
		}
		if tc.status == 206 && tc.name != "several ranges" && r.h.Get("Content-Range") == "" {
			t.Errorf("%s: no Content-Range", tc.name)
		}
		if got := ns[1].srv.PeerStats().Served - served; got != map[bool]uint64{true: 1, false: 0}[tc.fetch] {
			t.Errorf("%s: holder served %d, fetch expected %v", tc.name, got, tc.fetch)
		}
	}
	if st := ns[1].srv.PeerStats(); st.Served != 6 {
		t.Errorf("HEAD made a fetch: holder served %d, want 6", st.Served)
	}
	// The ranges' streams stopped early are not failures.
	if st := ns[0].srv.PeerStats(); st.Failures != 0 || st.Fetches != 3 {
		t.Errorf("node 0 counters %+v, want 3 whole fetches (suffix range, ranges out of order, whole) and no failure", st)
	}
}

// TestBigPeerFetchSlowClient: a client that stops reading for a while
// (here 1 s, five times the peers' per-frame FetchTimeout) stalls the
// holder's stream behind it, since nothing is buffered in between; the
// holder must wait for its asker as long as a peer connection may idle,
// not FetchTimeout, or every slow download of a large remote file would
// be cut. The client gets the whole file.
func TestBigPeerFetchSlowClient(t *testing.T) {
	layout := map[string][]int{"/huge.bin": {1}}
	roots, bodies := partSite(t, 2, layout, map[string]int{"/huge.bin": bigFetchSize})
	ns := startPeers(t, roots[0], 2, func(i int, c *Config) {
		c.Root = roots[i]
		c.Peer.FetchTimeout = 200 * time.Millisecond
		if i == 0 {
			writeManifests(t, roots, c.Peer.Peers, layout, bodies)
		}
	})
	want := sha256.Sum256(bodies["/huge.bin"])
	status, clen, n, sum, _ := streamGet(t, ns[0].addr, "/huge.bin", func() { time.Sleep(time.Second) })
	if status != 200 || n != clen || sum != want {
		t.Errorf("slow client: status %d, %d of %d bytes, SHA-256 match %v", status, n, clen, sum == want)
	}
}
