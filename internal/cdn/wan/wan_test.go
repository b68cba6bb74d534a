//go:build linux

package wan

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, TUN); run under flock /work/lab.lock")
	}
}

// inNS runs f on a thread switched into namespace ns; sockets made there
// stay in it.
func inNS(t *testing.T, ns string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		h, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			t.Error(err)
			return
		}
		defer h.Close()
		if err := unix.Setns(int(h.Fd()), unix.CLONE_NEWNET); err != nil {
			t.Error(err)
			return
		}
		f()
	}()
	<-done
}

func TestParseMatrix(t *testing.T) {
	d := t.TempDir()
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"0 40 80\n40 0 20 # comment\n80,20,0\n", true},
		{"0 40\n40\n", false},
		{"0 x\nx 0\n", false},
		{"", false},
	} {
		p := filepath.Join(d, "m")
		os.WriteFile(p, []byte(tc.text), 0o644)
		m, err := ParseMatrix(p)
		if (err == nil) != tc.ok {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if tc.ok && m.RTT[2][1] != 20 {
			t.Fatalf("%q: %v", tc.text, m.RTT)
		}
	}
}

// TestDelays checks that a TCP connect between two PoPs takes the matrix's
// RTT (a lab measurement, not a unit test: it needs root and a quiet
// machine; the bound is loose).
func TestDelays(t *testing.T) {
	needRoot(t)
	m := Matrix{RTT: [][]float64{{0, 40, 100}, {40, 0, 20}, {100, 20, 0}}}
	w, err := Start(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
		for _, ns := range w.NS {
			if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
				t.Errorf("namespace %s left behind", ns)
			}
		}
	}()
	var ln net.Listener
	inNS(t, w.NS[0], func() { ln, err = net.Listen("tcp", Addr(0).String()+":7000") })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// The host reaches every PoP directly, without delay.
	c, err := net.DialTimeout("tcp", Addr(0).String()+":7000", 2*time.Second)
	if err != nil {
		t.Fatalf("host → PoP 0: %v", err)
	}
	c.Close()
	for _, tc := range []struct {
		from int
		rtt  float64
	}{{1, 40}, {2, 100}} {
		var best time.Duration
		for range 3 {
			var d time.Duration
			inNS(t, w.NS[tc.from], func() {
				start := time.Now()
				c, err := net.DialTimeout("tcp", Addr(0).String()+":7000", 5*time.Second)
				d = time.Since(start)
				if err != nil {
					t.Error(err)
					return
				}
				c.Close()
			})
			if best == 0 || d < best {
				best = d
			}
		}
		want := time.Duration(tc.rtt * float64(time.Millisecond))
		t.Logf("PoP %d → 0: connect %v for a configured RTT of %v", tc.from, best, want)
		if best < want*9/10 || best > want*3/2 {
			t.Errorf("connect took %v, want about %v", best, want)
		}
	}
}
