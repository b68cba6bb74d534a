package front

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestChunkerFraming(t *testing.T) {
	cases := []struct {
		name string
		in   string
		data string // concatenated chunk data
		n    int    // bytes consumed (the body's length); -1 = error expected
	}{
		{"two chunks", "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nNEXT", "abcde", 20},
		{"extension and trailer", "A;name=v\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n", "0123456789", 35},
		{"upper hex", "1F\r\n" + strings.Repeat("z", 31) + "\r\n0\r\n\r\n", strings.Repeat("z", 31), 4 + 31 + 2 + 5},
		{"empty body", "0\r\n\r\n", "", 5},
		{"no size", "\r\nabc\r\n0\r\n\r\n", "", -1},
		{"bad size", "g\r\nabc\r\n0\r\n\r\n", "", -1},
		{"bare LF after size", "3\nabc\r\n0\r\n\r\n", "", -1},
		{"missing CRLF after data", "3\r\nabcd\r\n0\r\n\r\n", "", -1},
		{"bare LF in trailer", "0\r\nX: 1\n\r\n", "", -1},
		{"size overflow", "1000000000000000\r\n", "", -1},
		// A chunk-size line is size, BWS, then ";" extensions
		// or CRLF (RFC 9112 §7.1.1); trailers are field lines (§7.1.2).
		{"BWS before extension", "3 \t;x\r\nabc\r\n0\r\n\r\n", "abc", 17},
		{"BWS before CRLF", "3 \r\nabc\r\n0\r\n\r\n", "abc", 14},
		{"extension without semicolon", "3 x\r\nabc\r\n0\r\n\r\n", "", -1},
		{"garbage after size", "3x\r\nabc\r\n0\r\n\r\n", "", -1},
		{"control byte in extension", "3;a\x01\r\nabc\r\n0\r\n\r\n", "", -1},
		{"bare CR in extension", "3;a\rb\r\nabc\r\n0\r\n\r\n", "", -1},
		{"trailer obs-fold", "0\r\n X: 1\r\n\r\n", "", -1},
		{"trailer without colon", "0\r\nX-T 1\r\n\r\n", "", -1},
		{"trailer empty name", "0\r\n: 1\r\n\r\n", "", -1},
		{"trailer control byte", "0\r\nX: \x01\r\n\r\n", "", -1},
		{"trailers", "0\r\nA: 1\r\nB:\t2 3\r\n\r\n", "", 19},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Feed one byte at a time and all at once: same answer.
			for _, step := range []int{1, len(c.in)} {
				var ch chunker
				var data []byte
				in := []byte(c.in)
				pos, fin := 0, false
				var err error
				for pos < len(in) && !fin && err == nil {
					end := min(pos+step, len(in))
					var n, d0, d1 int
					n, d0, d1, fin, err = ch.scan(in[pos:end])
					data = append(data, in[pos+d0:pos+d1]...)
					pos += n
				}
				if c.n < 0 {
					if err == nil {
						t.Fatalf("step %d: no error", step)
					}
					continue
				}
				if err != nil || !fin || pos != c.n || string(data) != c.data {
					t.Fatalf("step %d: consumed %d fin %v err %v data %q; want %d %q", step, pos, fin, err, data, c.n, c.data)
				}
			}
		})
	}
}

func TestPoolLIFOAndIdleExpiry(t *testing.T) {
	p := pool{max: 2, idleNanos: int64(time.Second)}
	mk := func() *nodeConn { a, b := net.Pipe(); b.Close(); return &nodeConn{c: a} }
	a, b, c := mk(), mk(), mk()
	p.put(a, 0)
	p.put(b, 10)
	p.put(c, 20) // over the cap: closed, not pooled
	if len(p.idle) != 2 {
		t.Fatalf("pooled %d, want 2", len(p.idle))
	}
	if got := p.get(30); got != b {
		t.Fatal("get did not return the most recent connection")
	}
	p.put(b, int64(2*time.Second))
	// a idled since 0: reaped at 1.5 s past its limit; b stays.
	p.reap(int64(2*time.Second) + 10)
	if len(p.idle) != 1 || p.idle[0] != b {
		t.Fatalf("after reap: %d idle", len(p.idle))
	}
	// Everything too old: get closes it and returns nothing.
	if got := p.get(int64(10 * time.Second)); got != nil || len(p.idle) != 0 {
		t.Fatal("stale connection handed out")
	}
}

func TestLimiterFIFOAndBound(t *testing.T) {
	l := limiter{max: 1, queueMax: 2}
	done := make(chan struct{})
	if q, err := l.acquire(time.Second, done); q || err != nil {
		t.Fatalf("first acquire: queued %v err %v", q, err)
	}
	order := make(chan int, 2)
	for i := 1; i <= 2; i++ {
		go func() {
			if _, err := l.acquire(10*time.Second, done); err == nil {
				order <- i
			}
		}()
		for { // wait until queued, so the order is known
			l.mu.Lock()
			n := len(l.waiters)
			l.mu.Unlock()
			if n == i {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := l.acquire(time.Second, done); err != errQueueFull {
		t.Fatalf("third waiter: err %v, want queue full", err)
	}
	l.release()
	if got := <-order; got != 1 {
		t.Fatalf("first served %d, want 1 (FIFO)", got)
	}
	l.release()
	if got := <-order; got != 2 {
		t.Fatalf("second served %d, want 2", got)
	}
	l.release()
	if l.active != 0 || len(l.waiters) != 0 {
		t.Fatalf("active %d waiters %d after all released", l.active, len(l.waiters))
	}
	if _, err := l.acquire(time.Second, done); err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire(20*time.Millisecond, done); err != errQueueTimeout {
		t.Fatalf("err %v, want queue timeout", err)
	}
}

// scanAll runs the chunk scanner over in, step bytes at a time, and returns
// the bytes consumed, the chunk data, whether the body ended and whether it
// was refused.
func scanAll(in []byte, step int) (int, []byte, bool, bool) {
	var ch chunker
	var data []byte
	pos := 0
	for pos < len(in) {
		end := min(pos+step, len(in))
		n, d0, d1, fin, err := ch.scan(in[pos:end])
		if n < 0 || n > end-pos || d0 < 0 || d1 < d0 || d1 > n {
			panic("scan out of range")
		}
		data = append(data, in[pos+d0:pos+d1]...)
		pos += n
		if err != nil {
			return pos, data, false, true
		}
		if fin {
			return pos, data, true, false
		}
	}
	return pos, data, false, false
}

// FuzzChunker checks that the chunked-body scanner never panics or reads
// out of range, never consumes past the end of a body, and gives the same
// answer whether the bytes arrive at once or one by one (as they may from a
// socket). Seeds, valid and refused framing, are in testdata/fuzz/FuzzChunker.
func FuzzChunker(f *testing.F) {
	f.Add([]byte("3\r\nabc\r\n0\r\n\r\nNEXT"))
	f.Add([]byte("A;x=y\r\n0123456789\r\n0\r\nT: 1\r\n\r\n"))
	f.Add([]byte("3\nabc\r\n0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		n1, d1, fin1, bad1 := scanAll(in, len(in)+1)
		n2, d2, fin2, bad2 := scanAll(in, 1)
		if fin1 != fin2 || bad1 != bad2 || string(d1) != string(d2) || (!bad1 && n1 != n2) {
			t.Fatalf("whole: n %d fin %v bad %v; bytewise: n %d fin %v bad %v", n1, fin1, bad1, n2, fin2, bad2)
		}
		if fin1 {
			// Re-scanning exactly the body must also end there.
			if n3, _, fin3, _ := scanAll(in[:n1], 7); !fin3 || n3 != n1 {
				t.Fatalf("body prefix of %d bytes: n %d fin %v", n1, n3, fin3)
			}
		}
	})
}
