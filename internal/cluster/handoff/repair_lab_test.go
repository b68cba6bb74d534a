//go:build linux

package handoff

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// The kernel half of the repair path, end to end in a Lab, without the
// front and node servers: helper processes (this test binary re-executed
// under `ip netns exec`) play a minimal front (accept, read head, Freeze,
// steer, hand off, close) and minimal nodes (net/http over a
// RepairListener), and a Go client in the client namespace checks every
// body. internal/cluster/front and internal/cluster/node have the full integration test.

const helperEnv = "SHOAL_REPAIR_HELPER"

var labKey = []byte("0123456789abcdef0123456789abcdef")

// newTestLab builds a lab or skips when namespaces cannot be created.
func newTestLab(t testing.TB, nodes int) *Lab {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("lab needs iproute2's ip command")
	}
	l := NewLab("", nodes)
	if err := l.Up(context.Background()); err != nil {
		if errors.Is(err, ErrNoPrivilege) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Down(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return l
}

// helper starts this test binary in namespace ns as role; it returns once
// the helper printed READY (the rest of its stdout goes to out).
func helper(t testing.TB, ns, role string, out io.Writer, args ...string) (*testutil.Proc, io.WriteCloser) {
	t.Helper()
	inNS := func(name string, a ...string) *exec.Cmd { return Exec(context.Background(), ns, name, a...) }
	cmd := testutil.HelperCmd(t, inNS, "TestRepairHelper", helperEnv, role+" "+strings.Join(args, " "))
	return testutil.StartReady(t, cmd, out, "helper "+role+" in "+ns)
}

// TestRepairHelper is not a test: it is the entry point of helper processes.
func TestRepairHelper(t *testing.T) {
	testutil.HelperMain(t, helperEnv, func(f []string) error {
		switch f[0] {
		case "node":
			return helperNode(f[1], f[2:]...)
		case "front":
			return helperFront(f[1], f[2], f[3:])
		case "client":
			return helperClient(f[1:])
		case "fetch":
			return helperFetch(f[1:])
		case "hold":
			return helperHold(f[1:])
		case "pipeline":
			return helperPipeline(f[1:])
		case "mover":
			return helperMover(f[1], f[2:])
		case "guardnode":
			return helperGuardNode(f[1], f[2])
		case "guardclient":
			return helperGuardClient(f[1])
		default:
			return fmt.Errorf("unknown role %q", f[0])
		}
	})
}

// body returns n deterministic bytes for a size and seed.
func body(n int, seed string) []byte {
	b := make([]byte, n)
	h := sha256.Sum256([]byte(seed))
	for i := range b {
		b[i] = h[i%32] ^ byte(i>>8)
	}
	return b
}

// helperNode serves net/http on a RepairListener at addr; "noguard" as
// an option leaves the node without its Guard. It prints the guard's state
// after READY and the segments it dropped when stdin closes.
func helperNode(addr string, opts ...string) error {
	auth, _ := NewAuth(labKey, 0)
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return err
	}
	rl := ListenRepair(ln, auth, RepairListenerConfig{NoGuard: slices.Contains(opts, "noguard")})
	host, _ := os.Hostname()
	_ = host
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Node", addr)
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(body(n, r.URL.Path))
	})
	fmt.Println("READY")
	g, gerr := rl.Guard()
	fmt.Printf("NODE guard=%v (%v)\n", g != nil, gerr)
	go func() {
		// Report counters on stdin close.
		io.Copy(io.Discard, os.Stdin)
		fmt.Printf("NODE dropped=%d\n", g.Dropped())
	}()
	srv := &http.Server{Handler: h}
	return srv.Serve(rl)
}

// helperFront hands every accepted connection to the nodes in turn.
func helperFront(vip, dev string, nodes []string) error {
	auth, _ := NewAuth(labKey, 0)
	vap := netip.MustParseAddrPort(vip)
	st, err := NewSteer(SteerConfig{VIP: vap, Dev: dev})
	if err != nil {
		return err
	}
	defer st.Close()
	var clients []*RepairClient
	for i, n := range nodes {
		ap := netip.MustParseAddrPort(n)
		if err := st.AddNode(i, ap.Addr()); err != nil {
			return err
		}
		clients = append(clients, NewRepairClient(RepairClientConfig{Addr: n, Auth: auth,
			OnFin: func(f Flow, _ uint32) { st.Remove(f) }}))
	}
	ln, err := net.Listen("tcp4", vip)
	if err != nil {
		return err
	}
	var moved, failed atomic.Int64
	var next atomic.Int64
	go func() {
		// stdin closing ends the helper and prints the counters.
		io.Copy(io.Discard, os.Stdin)
		fmt.Printf("FRONT moved=%d failed=%d steered=%d\n", moved.Load(), failed.Load(), st.Len())
		os.Exit(0)
	}()
	fmt.Println("READY")
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			// Read until the end of the first head; everything read is
			// handed over as the receive queue's prefix.
			var buf []byte
			tmp := make([]byte, 4096)
			for !strings.Contains(string(buf), "\r\n\r\n") {
				n, err := c.Read(tmp)
				if err != nil {
					c.Close()
					return
				}
				buf = append(buf, tmp[:n]...)
			}
			i := int(next.Add(1)-1) % len(clients)
			ts, err := Freeze(c.(*net.TCPConn), buf)
			if err != nil {
				failed.Add(1)
				fmt.Fprintln(os.Stderr, "freeze:", err)
				c.Close()
				return
			}
			f := Flow{Client: ts.Remote, VIP: ts.Local}
			if err := st.Add(f, i); err != nil {
				failed.Add(1)
				fmt.Fprintln(os.Stderr, "steer:", err)
				c.Close()
				return
			}
			if err := clients[i].Handoff(ts); err != nil {
				failed.Add(1)
				fmt.Fprintln(os.Stderr, "handoff:", err)
				st.Remove(f)
			} else {
				moved.Add(1)
			}
			c.Close() // silent: the socket is in repair mode
		}()
	}
}

// helperClient runs conns keep-alive connections doing reqs requests in
// total against url, checking every body; it prints one JSON result line.
func helperClient(args []string) error {
	url := args[0]
	conns, _ := strconv.Atoi(args[1])
	reqs, _ := strconv.Atoi(args[2])
	sizes := []int{1 << 10, 10 << 10, 100 << 10, 1 << 20}
	fmt.Println("READY")
	var ok, bad, errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	var n atomic.Int64
	for range conns {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}
			cl := &http.Client{Transport: tr, Timeout: 20 * time.Second}
			defer tr.CloseIdleConnections()
			for {
				k := int(n.Add(1))
				if k > reqs {
					return
				}
				size := sizes[k%len(sizes)]
				path := fmt.Sprintf("/obj%d", k)
				resp, err := cl.Get(fmt.Sprintf("%s%s?n=%d", url, path, size))
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(b) != string(body(size, path)) {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: status %d, %d bytes, %v", path, resp.StatusCode, len(b), err))
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	fe, _ := firstErr.Load().(string)
	out, _ := json.Marshal(map[string]any{"ok": ok.Load(), "bad": bad.Load(), "errors": errs.Load(), "first_error": fe})
	fmt.Println(string(out))
	return nil
}

// TestRepairLabKernel moves keep-alive connections from a minimal front to
// three nodes with TCP_REPAIR and nftables steering; every body must
// arrive intact and the front must end with no steered flow left.
func TestRepairLabKernel(t *testing.T) {
	l := newTestLab(t, 3)
	var nodeAddrs []string
	for i, a := range l.NodeAddrs {
		addr := netip.AddrPortFrom(a, 7070).String()
		nodeAddrs = append(nodeAddrs, addr)
		helper(t, l.NodeNS(i), "node", io.Discard, addr)
	}
	var frontOut strings.Builder
	var fmu sync.Mutex
	fw := writerFunc(func(p []byte) (int, error) { fmu.Lock(); defer fmu.Unlock(); return frontOut.Write(p) })
	_, frontIn := helper(t, l.FrontNS(), "front", fw, append([]string{netip.AddrPortFrom(l.VIP, 80).String(), "eth0"}, nodeAddrs...)...)

	conns, reqs := 20, 400
	if testing.Short() {
		conns, reqs = 5, 40
	}
	var res strings.Builder
	cl, _ := helper(t, l.ClientNS(), "client", &res, "http://"+l.VIP.String(), strconv.Itoa(conns), strconv.Itoa(reqs))
	if err := cl.Wait(); err != nil {
		t.Fatalf("client: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	frontIn.Close()
	time.Sleep(300 * time.Millisecond)
	fmu.Lock()
	t.Logf("front: %s", strings.TrimSpace(frontOut.String()))
	fmu.Unlock()
	var r struct {
		OK, Bad, Errors int
		FirstError      string `json:"first_error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.String())), &r); err != nil {
		t.Fatalf("client output %q: %v", res.String(), err)
	}
	t.Logf("client: %+v", r)
	if r.OK != reqs || r.Bad != 0 || r.Errors != 0 {
		t.Errorf("client: %d ok of %d, %d bad, %d errors (%s)", r.OK, reqs, r.Bad, r.Errors, r.FirstError)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
