//go:build linux

package handoff

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// TestRepairMoverModes runs RepairMover in a lab against nodes with and
// without their Guard, and a pipelining client (10 padded requests in one
// write, ~50 KB, answers 1 KB to 1 MB). A guarded node lets the mover steer
// each flow before the freeze (Early); an unguarded one makes it hold the
// flow until the node's acknowledgement (Held). Either way every answer
// must arrive byte-exact.
func TestRepairMoverModes(t *testing.T) {
	for _, c := range []struct {
		name      string
		nodeOpts  []string
		wantEarly bool
	}{
		{"guarded", nil, true},
		{"unguarded", []string{"noguard"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newTestLab(t, 2)
			var nodes []string
			var nodeOut []*testutil.SyncBuf
			for i, a := range l.NodeAddrs {
				addr := netip.AddrPortFrom(a, 7070).String()
				nodes = append(nodes, addr)
				out := &testutil.SyncBuf{}
				nodeOut = append(nodeOut, out)
				helper(t, l.NodeNS(i), "node", out, append([]string{addr}, c.nodeOpts...)...)
			}
			frontOut := &testutil.SyncBuf{}
			_, frontIn := helper(t, l.FrontNS(), "mover", frontOut, append([]string{netip.AddrPortFrom(l.VIP, 80).String()}, nodes...)...)

			// The nodes' handler answers /objK?n=SIZE with body(SIZE, "/objK").
			var man strings.Builder
			sizes := []int{1 << 10, 10 << 10, 100 << 10, 1 << 20}
			for k := range 40 {
				n := sizes[k%len(sizes)]
				sum := sha256.Sum256(body(n, fmt.Sprintf("/obj%d", k)))
				fmt.Fprintf(&man, "/obj%d?n=%d %d %s\n", k, n, n, hex.EncodeToString(sum[:]))
			}
			manPath := filepath.Join(t.TempDir(), "manifest")
			if err := os.WriteFile(manPath, []byte(man.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			conns := 16
			var out strings.Builder
			cl, _ := helper(t, l.ClientNS(), "pipeline", &out, netip.AddrPortFrom(l.VIP, 80).String(), strconv.Itoa(conns), manPath, "5000")
			if err := cl.Wait(); err != nil {
				t.Fatalf("client: %v", err)
			}
			var r pipelineResult
			if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r); err != nil {
				t.Fatalf("client output %q: %v", out.String(), err)
			}
			t.Logf("client: %+v", r)
			if r.OK != conns*10 || r.Bad != 0 || r.Errors != 0 {
				t.Errorf("%d of %d answers intact, %d corrupt, %d connections failed (first: %s)", r.OK, conns*10, r.Bad, r.Errors, r.FirstError)
			}
			frontIn.Close()
			var fs struct{ Moved, Refused, Lost, Early, Held uint64 }
			line := waitLine(t, frontOut, regexp.MustCompile(`(?m)^FRONT (.*)$`))
			if err := json.Unmarshal([]byte(line), &fs); err != nil {
				t.Fatalf("front output %q: %v", line, err)
			}
			t.Logf("front: %+v", fs)
			early, held := fs.Early, fs.Held
			if !c.wantEarly {
				early, held = held, early
			}
			if fs.Moved != uint64(conns) || early != fs.Moved || held != 0 {
				t.Errorf("front moved %d of %d: %d steered early, %d held (want all %s)", fs.Moved, conns, fs.Early, fs.Held,
					map[bool]string{true: "early", false: "held"}[c.wantEarly])
			}
			for i, o := range nodeOut {
				t.Logf("node%d: %s", i+1, strings.Join(strings.Fields(o.String()), " "))
			}
		})
	}
}

// TestRepairGuard: a client segment for a connection the node does not
// have (here: one the node froze and let go silently, while its listener
// stays) must be dropped at a guarded node — the client sees no reset and
// the guard counts the drop — and draws a reset at an unguarded one. This
// is what makes steering before the node has rebuilt a socket safe.
func TestRepairGuard(t *testing.T) {
	for _, c := range []struct {
		name  string
		guard bool
		want  string // the client's read outcome
	}{
		{"guarded", true, "timeout"},
		{"unguarded", false, "reset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newTestLab(t, 1)
			// The client reaches the VIP straight at the node, as steered
			// packets do.
			if out, err := Exec(t.Context(), l.ClientNS(), "ip", "route", "add", l.VIP.String()+"/32", "via", l.NodeAddrs[0].String()).CombinedOutput(); err != nil {
				t.Fatalf("route: %v: %s", err, out)
			}
			nodeOut := &testutil.SyncBuf{}
			_, nodeIn := helper(t, l.NodeNS(0), "guardnode", nodeOut, netip.AddrPortFrom(l.VIP, 9).String(), strconv.FormatBool(c.guard))
			var out strings.Builder
			cl, _ := helper(t, l.ClientNS(), "guardclient", &out, netip.AddrPortFrom(l.VIP, 9).String())
			if err := cl.Wait(); err != nil {
				t.Fatalf("client: %v", err)
			}
			got := strings.TrimSpace(out.String())
			nodeIn.Close()
			line := waitLine(t, nodeOut, regexp.MustCompile(`(?m)^GUARD dropped=(\d+)$`))
			t.Logf("client: %s; node's guard dropped %s segments", got, line)
			if got != c.want {
				t.Errorf("client's segment after the node let go: %s, want %s", got, c.want)
			}
			if n, _ := strconv.Atoi(line); c.guard && n == 0 {
				t.Errorf("guard counted no dropped segment")
			}
		})
	}
}

// helperMover is a minimal front on RepairMover: it reads each accepted
// connection's first head and moves it (MoveConn) to the nodes in turn; on
// stdin close it prints the mover's counters as "FRONT {json}".
func helperMover(vip string, nodes []string) error {
	var aps []netip.AddrPort
	for _, n := range nodes {
		aps = append(aps, netip.MustParseAddrPort(n))
	}
	vap := netip.MustParseAddrPort(vip)
	m, err := NewRepairMover(RepairMoverConfig{Key: labKey, VIP: vap, Nodes: aps})
	if err != nil {
		return err
	}
	defer m.Close()
	ln, err := net.Listen("tcp4", vip)
	if err != nil {
		return err
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		b, _ := json.Marshal(map[string]uint64{"moved": m.Moved.Load(), "refused": m.Refused.Load(),
			"lost": m.Lost.Load(), "early": m.Early.Load(), "held": m.Held.Load()})
		fmt.Printf("FRONT %s\n", b)
		time.Sleep(100 * time.Millisecond)
		os.Exit(0)
	}()
	fmt.Println("READY")
	var mu sync.Mutex
	next := 0
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			br := bufio.NewReaderSize(c, 64<<10)
			var head []byte
			for !strings.HasSuffix(string(head), "\r\n\r\n") {
				line, err := br.ReadSlice('\n')
				if err != nil {
					c.Close()
					return
				}
				head = append(head, line...)
			}
			n := br.Buffered()
			rest, _ := br.Peek(n)
			mu.Lock()
			i := next % len(nodes)
			next++
			mu.Unlock()
			if err := m.MoveConn(c.(*net.TCPConn), append(head, rest...), i, 0, 0); err != nil {
				fmt.Fprintln(os.Stderr, "move:", err)
				c.Close()
			}
		}()
	}
}

// helperGuardNode listens on addr (the VIP, on lo), with the node's Guard
// on eth0 if guard is "true"; it accepts one connection, reads one byte,
// freezes the socket and closes it silently (the node no longer has the
// connection, the client does not know), and on stdin close prints the
// guard's drops.
func helperGuardNode(addr, guard string) error {
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return err
	}
	var g *Guard
	if guard == "true" {
		if g, err = NewGuard([]string{"eth0"}, []netip.Addr{netip.MustParseAddrPort(addr).Addr()}); err != nil {
			return err
		}
		defer g.Close()
	}
	fmt.Println("READY")
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			return
		}
		if _, err := Freeze(c.(*net.TCPConn), nil); err != nil {
			fmt.Fprintln(os.Stderr, "freeze:", err)
			return
		}
		c.Close() // repair mode: no FIN, no RST
	}()
	io.Copy(io.Discard, os.Stdin)
	fmt.Printf("GUARD dropped=%d\n", g.Dropped())
	return nil
}

// helperGuardClient connects to addr, sends a byte, waits for the node to
// let the connection go, sends another and prints how a read ends: reset,
// eof or timeout (nothing came back in 1.5 s).
func helperGuardClient(addr string) error {
	fmt.Println("READY")
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("a")); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond) // the node freezes and closes
	if _, err := c.Write([]byte("b")); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
	var b [1]byte
	_, err = c.Read(b[:])
	fmt.Println(outcome(err))
	return nil
}

// waitLine waits (boundedly) for re in out and returns its first group.
func waitLine(t *testing.T, out *testutil.SyncBuf, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no %v in output %q", re, out.String())
	return ""
}
