//go:build linux

package handoff

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// inNetns runs f on a thread switched into a fresh network namespace that
// has one interface d0 (a veth) with 10.201.0.3/24 and the VIP. It skips
// without root.
func inNetns(tb testing.TB, f func()) {
	tb.Helper()
	var b [3]byte
	rand.Read(b[:])
	ns := LabPrefix + "steer-" + hex.EncodeToString(b[:])
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1"}, // no dummy driver in every kernel
		{"-n", ns, "link", "set", "d1", "up"},
		{"-n", ns, "addr", "add", "10.201.0.3/24", "dev", "d0"},
		{"-n", ns, "addr", "add", "10.201.0.100/32", "dev", "d0"},
		{"-n", ns, "link", "set", "d0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			if args[0] == "netns" {
				tb.Skipf("needs CAP_NET_ADMIN for a network namespace: ip netns add: %v: %s", err, out)
			}
			tb.Fatalf("ip %v: %v: %s", args, err, out)
		}
		if args[0] == "netns" {
			tb.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		}
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			tb.Error(err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			tb.Error(err)
			return
		}
		f()
	}()
	<-done
}

func flow(port uint16) Flow {
	return Flow{Client: netip.AddrPortFrom(netip.MustParseAddr("10.201.0.2"), port), VIP: netip.MustParseAddrPort("10.201.0.100:80")}
}

// TestSteerTable checks that user space and the kernel map agree through
// adds, moves, removals and a node's removal, and that Close undoes the
// routing changes.
func TestSteerTable(t *testing.T) {
	for _, backend := range []string{"nftables", "bpf"} {
		t.Run(backend, func(t *testing.T) { testSteerTable(t, backend) })
	}
}

func testSteerTable(t *testing.T, backend string) {
	inNetns(t, func() {
		s, err := NewSteer(SteerConfig{VIP: netip.MustParseAddrPort("10.201.0.100:80"), Dev: "d0", Backend: backend})
		if err != nil {
			t.Error(err)
			return
		}
		check := func(step string, want int) {
			t.Helper()
			k, err := s.KernelLen()
			if err != nil || k != want || s.Len() != want {
				t.Errorf("%s: kernel has %d (%v), user space %d, want %d", step, k, err, s.Len(), want)
			}
		}
		if err := s.Add(flow(1000), 0); !errors.Is(err, ErrUnknownNode) {
			t.Errorf("Add to a node without a route: %v", err)
		}
		for i, a := range []string{"10.201.0.11", "10.201.0.12"} {
			if err := s.AddNode(i, netip.MustParseAddr(a)); err != nil {
				t.Error(err)
				return
			}
		}
		for p := range uint16(10) {
			if err := s.Add(flow(1000+p), int(p%2)); err != nil {
				t.Error(err)
			}
		}
		check("10 added", 10)
		if err := s.Add(flow(1000), 1); err != nil { // moved to the other node
			t.Error(err)
		}
		check("one moved", 10)
		if ok, err := s.Remove(flow(1001)); !ok || err != nil {
			t.Errorf("Remove: %v %v", ok, err)
		}
		if ok, _ := s.Remove(flow(1001)); ok {
			t.Error("second Remove reported a steered flow")
		}
		check("one removed", 9)
		if n, err := s.RemoveFlows([]Flow{flow(1002), flow(1004), flow(5000)}); n != 2 || err != nil {
			t.Errorf("RemoveFlows = %d, %v; want 2", n, err)
		}
		check("two removed in a batch", 7)
		// Node 1 now has 1000, 1003, 1005, 1007, 1009.
		if n, err := s.RemoveFlows(s.NodeFlows(1)); n != 5 || err != nil {
			t.Errorf("RemoveFlows(NodeFlows(1)) = %d, %v; want 5", n, err)
		}
		check("node 1 dropped", 2)
		// A batch of moves reported together: one update, then one
		// removal that finds a key the kernel no longer has in the
		// middle (the eBPF backend resumes after it).
		batch := []Flow{flow(3000), flow(3001), flow(3002), flow(3003), flow(3004), flow(3005)}
		if err := s.AddFlows(batch, 1); err != nil {
			t.Errorf("AddFlows: %v", err)
		}
		check("six added in a batch", 8)
		if err := s.AddFlows([]Flow{flow(3000), flow(1006)}, 0); err != nil {
			t.Errorf("AddFlows (moves): %v", err)
		}
		check("two moved in a batch", 8)
		if b, ok := s.m.(*bpfMap); ok {
			if err := b.del([]Flow{flow(3002)}); err != nil {
				t.Errorf("del: %v", err)
			}
		}
		if n, err := s.RemoveFlows(batch); n != 6 || err != nil {
			t.Errorf("RemoveFlows of the batch = %d, %v; want 6", n, err)
		}
		check("the batch removed", 2)
		// Hold: a kernel entry with no node (eBPF only), replaced in place
		// by Add, released by Remove.
		err = s.Hold(flow(2000))
		switch {
		case backend == "nftables" && !errors.Is(err, errors.ErrUnsupported):
			t.Errorf("Hold with nftables: %v, want ErrUnsupported", err)
		case backend == "bpf" && err != nil:
			t.Errorf("Hold: %v", err)
		case backend == "bpf":
			check("one held", 3)
			if err := s.Hold(flow(2000)); err == nil {
				t.Error("Hold of a held flow succeeded")
			}
			if err := s.Add(flow(2000), 0); err != nil {
				t.Errorf("Add after Hold: %v", err)
			}
			check("held flow steered", 3)
			if ok, err := s.Remove(flow(2000)); !ok || err != nil {
				t.Errorf("Remove: %v %v", ok, err)
			}
			check("held flow removed", 2)
		}
		out, _ := exec.Command("ip", "rule", "show").CombinedOutput()
		if !bytesContains(out, "fwmark 0x5e000001 lookup 2000") || hasLocalRule(out, "0") || !hasLocalRule(out, "100") {
			t.Errorf("rules after NewSteer:\n%s", out)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		out, _ = exec.Command("ip", "rule", "show").CombinedOutput()
		if bytesContains(out, "fwmark") || !hasLocalRule(out, "0") || hasLocalRule(out, "100") {
			t.Errorf("rules after Close:\n%s", out)
		}
		if b, _ := os.ReadFile(earlyDemuxPath); string(b) != "1\n" {
			t.Errorf("tcp_early_demux after Close = %q, want 1", b)
		}
	})
}

func bytesContains(b []byte, sub string) bool { return strings.Contains(string(b), sub) }

// BenchmarkSteer measures the front's cost of steering one flow (Add then
// Remove) with each backend: an nftables map element (a netlink batch and
// an nf_tables transaction commit each) against an eBPF hash map entry (one
// bpf(2) call each).
func BenchmarkSteer(b *testing.B) {
	for _, backend := range []string{"nftables", "bpf"} {
		b.Run(backend, func(b *testing.B) {
			inNetns(b, func() {
				s, err := NewSteer(SteerConfig{VIP: netip.MustParseAddrPort("10.201.0.100:80"), Dev: "d0", Backend: backend})
				if err != nil {
					b.Error(err)
					return
				}
				defer s.Close()
				s.AddNode(0, netip.MustParseAddr("10.201.0.11"))
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					f := flow(uint16(i))
					if err := s.Add(f, 0); err != nil {
						b.Error(err)
						return
					}
					s.Remove(f)
				}
			})
		})
	}
}
