//go:build linux

package handoff

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
)

// segment is an Ethernet frame carrying an option-less IPv4 header and a
// TCP header from client to dst with the given TCP flags.
func segment(client, dst netip.AddrPort, flags byte) []byte {
	b := make([]byte, 14+20+20)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[9] = 0x45, 6
	binary.BigEndian.PutUint16(ip[2:], 40)
	ip[8] = 64
	c, d := client.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], c[:])
	copy(ip[16:], d[:])
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], client.Port())
	binary.BigEndian.PutUint16(tcp[2:], dst.Port())
	tcp[12], tcp[13] = 5<<4, flags
	return b
}

// slotOf mirrors steerProgram's slot hash: a little-endian load of the
// client address xor a little-endian load of its port, times 0x9E3779B1,
// top steerSlotBits bits.
func slotOf(client netip.AddrPort) int {
	a := client.Addr().As4()
	var p [2]byte
	binary.BigEndian.PutUint16(p[:], client.Port())
	x := binary.LittleEndian.Uint32(a[:]) ^ uint32(binary.LittleEndian.Uint16(p[:]))
	return int((x * 0x9E3779B1) >> (32 - steerSlotBits))
}

// TestSteerProgramSlots runs the steering program on hand-made segments
// (BPF_PROG_TEST_RUN) and checks its verdict and the mark it sets: held
// flows dropped, mapped flows to their node, and a flow the map does not
// hold — its SYN included — to its slot's node once nodes accept, to the
// front's stack before.
func TestSteerProgramSlots(t *testing.T) {
	inNetns(t, func() {
		s, err := NewSteer(SteerConfig{VIP: netip.MustParseAddrPort("10.201.0.100:80"), Dev: "d0", Backend: "bpf"})
		if err != nil {
			t.Skipf("no eBPF steering here: %v", err)
			return
		}
		defer s.Close()
		for i, a := range []string{"10.201.0.11", "10.201.0.12", "10.201.0.13"} {
			if err := s.AddNode(i, netip.MustParseAddr(a)); err != nil {
				t.Error(err)
				return
			}
		}
		prog := s.m.(*bpfMap).prog
		const (
			pass     = -1 // TCX_NEXT
			drop     = 2  // TC_ACT_SHOT
			redirect = 7  // TC_ACT_REDIRECT
			syn, ack = 0x02, 0x10
		)
		run := func(step string, f Flow, flags byte, want, node int) {
			t.Helper()
			ctx := make([]byte, 192) // struct __sk_buff
			out := make([]byte, 192)
			ret, err := prog.Run(&ebpf.RunOptions{Data: segment(f.Client, f.VIP, flags), Context: ctx, ContextOut: out})
			if err != nil {
				t.Errorf("%s: run: %v", step, err)
				return
			}
			mark := binary.NativeEndian.Uint32(out[skbMark:])
			if int32(ret) != int32(want) || (want == redirect && mark != s.Mark(node)) {
				t.Errorf("%s: verdict %d mark %#x, want %d mark %#x", step, int32(ret), mark, want, s.Mark(node))
			}
		}
		mapped, held, other := flow(1000), flow(1001), flow(1002)
		s.Add(mapped, 1)
		s.Hold(held)
		wrongPort := Flow{Client: other.Client, VIP: netip.MustParseAddrPort("10.201.0.100:81")}

		run("front accepts: SYN of a new flow", other, syn, pass, 0)
		run("front accepts: segment of an unknown flow", other, ack, pass, 0)
		run("front accepts: SYN on a mapped 4-tuple", mapped, syn, pass, 0)
		run("mapped flow", mapped, ack, redirect, 1)
		run("held flow", held, ack, drop, 0)
		run("another port", wrongPort, ack, pass, 0)

		if err := s.SetSlots([]int{2}, nil); err != nil {
			t.Errorf("SetSlots: %v", err)
			return
		}
		run("node 2 accepts: SYN of a new flow", other, syn, redirect, 2)
		run("node 2 accepts: segment of an unknown flow", other, ack, redirect, 2)
		run("node 2 accepts: SYN on a mapped 4-tuple", mapped, syn, redirect, 1)
		run("node 2 accepts: mapped flow", mapped, ack, redirect, 1)
		run("node 2 accepts: held flow", held, ack, drop, 0)
		run("node 2 accepts: another port", wrongPort, syn, pass, 0)

		// Node 1 dies: its flow goes to the front's stack (which resets
		// it) until the entry is removed, then to its slot's node.
		if fs := s.NodeFlows(1); len(fs) != 1 || fs[0] != mapped {
			t.Errorf("NodeFlows(1) = %v; want [%v]", fs, mapped)
		}
		if err := s.PassFlows([]Flow{mapped, other}); err != nil { // other is not steered: ignored
			t.Errorf("PassFlows: %v", err)
		}
		run("node 1 died: its flow", mapped, ack, pass, 0)
		if n, err := s.RemovePassing([]Flow{mapped, held}); n != 1 || err != nil {
			t.Errorf("RemovePassing = %d, %v; want 1 (the held flow is not passing)", n, err)
		}
		run("node 1's flow unmapped", mapped, ack, redirect, 2)

		// Three nodes: each new flow goes to the node its slot names,
		// and every node takes some of 300 client ports.
		if err := s.SetSlots([]int{0, 1, 2}, nil); err != nil {
			t.Errorf("SetSlots: %v", err)
			return
		}
		owners := s.Slots()
		per := map[int]int{}
		for p := range uint16(300) {
			f := flow(20000 + p)
			n := owners[slotOf(f.Client)]
			per[n]++
			run("three nodes accept", f, syn, redirect, n)
		}
		if len(per) != 3 || per[0] < 50 || per[1] < 50 || per[2] < 50 {
			t.Errorf("300 new flows over three nodes: %v", per)
		}
		// Node 1 leaves: first its slots go to the front (the segments of
		// its young flows and new connections there pass to the front's
		// stack), no other slot moves; then they go to the others.
		if err := s.SetSlots([]int{0, 2}, []int{1}); err != nil {
			t.Errorf("SetSlots: %v", err)
			return
		}
		for k, n := range s.Slots() {
			if owners[k] == 1 && n != -1 || owners[k] != 1 && n != owners[k] {
				t.Errorf("slot %d: node %d while node 1 leaves, was %d", k, n, owners[k])
			}
		}
		for p := range uint16(300) {
			f := flow(20000 + p)
			if owners[slotOf(f.Client)] == 1 {
				run("node 1 leaving: a flow of its slots", f, ack, pass, 0)
				break
			}
		}
		if err := s.SetSlots([]int{0, 2}, nil); err != nil {
			t.Errorf("SetSlots: %v", err)
			return
		}
		for k, n := range s.Slots() {
			if owners[k] != 1 && n != owners[k] || n == 1 || n < 0 {
				t.Errorf("slot %d: node %d after node 1 left, was %d", k, n, owners[k])
			}
		}
		if err := s.SetSlots(nil, nil); err != nil {
			t.Errorf("SetSlots(nil): %v", err)
		}
		run("front accepts again: SYN of a new flow", other, syn, pass, 0)
	})
}
