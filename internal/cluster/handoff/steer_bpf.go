//go:build linux

package handoff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// bpfMap is Steer's eBPF backend: a hash map (client address . port →
// fwmark, node address) read by a small TCX ingress program on the front's
// interface towards the clients (steerProgram). For a TCP packet to VIP:port
// whose key is in the map (or, when nodes accept, whose slot names a node),
// the program sets skb->mark and sends the frame
// straight back out of the interface to the node's MAC with
// bpf_redirect_neigh, before the front's IP stack sees it (no routing, no
// prerouting hook, no forwarding path; the fwmark routes stay as a
// fallback). Updating the map is one bpf(2) call (no netlink transaction, no
// nf_tables commit), which is what makes it cheaper per handoff
// (BenchmarkSteer).
//
// A held flow (Steer.Hold) has node address 0.0.0.0, and its packets are
// dropped.
//
// The program is assembled here instruction by instruction (no C compiler
// or generated object in the tree); it assumes IPv4 without options (IHL 5)
// and leaves every other packet alone.
type bpfMap struct {
	m *ebpf.Map
	// slots is the direct-accept table (Steer.SetSlots): SteerSlots
	// entries of mark and node address, all zero while the front accepts.
	slots *ebpf.Map
	prog  *ebpf.Program
	l     link.Link
	// el is the scratch of put and del (Steer.mu serialises them): it lives
	// on the heap so that the kernel may read key and value through the
	// addresses in its attr.
	el *bpfElem
	// batch is the scratch of putAll and del (under Steer.mu too).
	batch *bpfBatch
}

// bpfBatch is a bpf(2) BPF_MAP_*_BATCH attribute and the keys and values
// it points to.
type bpfBatch struct {
	attr         bpfBatchAttr
	keys, values []byte
}

// bpfBatchAttr is union bpf_attr's batch member (include/uapi/linux/bpf.h).
type bpfBatchAttr struct {
	inBatch, outBatch, keys, values uint64
	count, mapFD                    uint32
	elemFlags, flags                uint64
}

// bpfElem is a bpf(2) BPF_MAP_*_ELEM attribute and the key and value it
// points to.
type bpfElem struct {
	attr struct {
		mapFD      uint32
		_          uint32
		key, value uint64
		flags      uint64
	}
	key, value [8]byte
}

// bpf(2) commands (include/uapi/linux/bpf.h).
const (
	bpfMapUpdateElem  = 2
	bpfMapDeleteElem  = 3
	bpfMapUpdateBatch = 26
	bpfMapDeleteBatch = 27
)

// elem runs one map command on key (and value for an update) with a raw
// system call: a hash map update or delete never blocks, and cilium/ebpf's
// bookkept call would wake the runtime's sysmon (rawsys.go).
func (b *bpfMap) elem(cmd int, key []byte, value []byte) error {
	e := b.el
	copy(e.key[:], key)
	e.attr.mapFD = uint32(b.m.FD())
	e.attr.key = uint64(uintptr(unsafe.Pointer(&e.key[0])))
	e.attr.value, e.attr.flags = 0, 0
	if value != nil {
		copy(e.value[:], value)
		e.attr.value = uint64(uintptr(unsafe.Pointer(&e.value[0])))
	}
	_, _, errno := unix.RawSyscall(unix.SYS_BPF, uintptr(cmd), uintptr(unsafe.Pointer(&e.attr)), unsafe.Sizeof(e.attr))
	runtime.KeepAlive(e)
	if errno != 0 {
		return fmt.Errorf("bpf map command %d: %w", cmd, errno)
	}
	return nil
}

// batchCmd runs one batched map command on the first n keys (and values,
// for an update) of b.batch with a raw system call, and returns how many
// elements the kernel processed: all n, or those before the one that
// failed.
func (b *bpfMap) batchCmd(cmd int, n int) (int, error) {
	e := b.batch
	e.attr = bpfBatchAttr{}
	e.attr.mapFD = uint32(b.m.FD())
	e.attr.count = uint32(n)
	e.attr.keys = uint64(uintptr(unsafe.Pointer(&e.keys[0])))
	if cmd == bpfMapUpdateBatch {
		e.attr.values = uint64(uintptr(unsafe.Pointer(&e.values[0])))
	}
	_, _, errno := unix.RawSyscall(unix.SYS_BPF, uintptr(cmd), uintptr(unsafe.Pointer(&e.attr)), unsafe.Sizeof(e.attr))
	runtime.KeepAlive(e)
	if errno != 0 {
		return int(e.attr.count), fmt.Errorf("bpf batch command %d: %w", cmd, errno)
	}
	return n, nil
}

// fillKeys puts fs's keys into the batch scratch (from key 0).
func (b *bpfMap) fillKeys(fs []Flow) {
	e := b.batch
	if cap(e.keys) < 8*len(fs) {
		e.keys = make([]byte, 8*len(fs))
		e.values = make([]byte, 8*len(fs))
	}
	e.keys, e.values = e.keys[:8*len(fs)], e.values[:8*len(fs)]
	for i, f := range fs {
		copy(e.keys[8*i:], flowKey(f))
	}
}

// __sk_buff field offsets (include/uapi/linux/bpf.h).
const (
	skbMark    = 8
	skbData    = 76
	skbDataEnd = 80
)

func newBPFMap(cfg SteerConfig) (*bpfMap, error) {
	ifc, err := net.InterfaceByName(cfg.Dev)
	if err != nil {
		return nil, fmt.Errorf("handoff: steer: %w", err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "shoal_flows", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: bpfMaxFlows})
	if err != nil {
		return nil, fmt.Errorf("handoff: steer: bpf map: %w", err)
	}
	vip := cfg.VIP.Addr().As4()
	var port [2]byte
	binary.BigEndian.PutUint16(port[:], cfg.VIP.Port())
	// Packet bytes loaded as little-endian words compare against these.
	vipLE := int32(binary.LittleEndian.Uint32(vip[:]))
	portLE := int32(binary.LittleEndian.Uint16(port[:]))
	slots, err := ebpf.NewMap(&ebpf.MapSpec{Name: "shoal_slots", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: SteerSlots})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("handoff: steer: bpf map: %w", err)
	}
	insns := steerProgram(m, slots, vipLE, portLE, int32(ifc.Index))
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "shoal_steer", Type: ebpf.SchedCLS, License: "Apache-2.0", Instructions: insns})
	if err != nil {
		m.Close()
		slots.Close()
		return nil, fmt.Errorf("handoff: steer: load bpf program: %w", err)
	}
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		prog.Close()
		m.Close()
		slots.Close()
		return nil, fmt.Errorf("handoff: steer: attach tcx ingress on %s: %w", cfg.Dev, err)
	}
	return &bpfMap{m: m, slots: slots, prog: prog, l: l, el: new(bpfElem), batch: new(bpfBatch)}, nil
}

func (b *bpfMap) put(f Flow, mark uint32, node netip.Addr) error {
	var v [8]byte
	binary.NativeEndian.PutUint32(v[:], mark)
	a := node.As4()
	copy(v[4:], a[:])
	return b.elem(bpfMapUpdateElem, flowKey(f), v[:])
}

// putAll updates every flow of fs in one BPF_MAP_UPDATE_BATCH call.
func (b *bpfMap) putAll(fs []Flow, mark uint32, node netip.Addr) error {
	if len(fs) == 1 {
		return b.put(fs[0], mark, node)
	}
	b.fillKeys(fs)
	a := node.As4()
	v := b.batch.values
	for i := range fs {
		binary.NativeEndian.PutUint32(v[8*i:], mark)
		copy(v[8*i+4:], a[:])
	}
	_, err := b.batchCmd(bpfMapUpdateBatch, len(fs))
	return err
}

// del deletes fs's entries: one BPF_MAP_DELETE_BATCH call for several
// (FIN-HANDOFF notices arrive batched), resumed after a key the map does
// not hold (the kernel stops at the first ENOENT).
func (b *bpfMap) del(fs []Flow) error {
	if len(fs) == 1 {
		if err := b.elem(bpfMapDeleteElem, flowKey(fs[0]), nil); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		return nil
	}
	var errs []error
	for len(fs) > 0 {
		b.fillKeys(fs)
		n, err := b.batchCmd(bpfMapDeleteBatch, len(fs))
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
		if err == nil {
			break
		}
		fs = fs[min(n+1, len(fs)):] // skip the key that failed
	}
	return errors.Join(errs...)
}

func (b *bpfMap) count() (int, error) {
	n := 0
	var k, v [8]byte
	it := b.m.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	return n, it.Err()
}

func (b *bpfMap) close() error {
	return errors.Join(b.l.Close(), b.prog.Close(), b.m.Close(), b.slots.Close())
}

// steerProgram is the steering program over the flow map m and the slot
// table slots. For a TCP segment to the VIP and port (vipLE, portLE: as a
// little-endian load of the packet's bytes reads them):
//
//   - a flow in m goes where its entry says (dropped while held);
//   - any other segment, the SYN of a new connection included, goes to the
//     node of its slot, hash(client address, port) mod SteerSlots, when the
//     slot names one (nodes accept: Steer.SetSlots) — stateless, like LVS's
//     or Maglev's consistent hashing, so a SYN flood allocates nothing here;
//   - otherwise it passes to the front's stack. A SYN passes whenever its
//     slot is empty, even if m has an entry (the front accepts, and a new
//     connection on a 4-tuple whose entry is still present must reach it).
func steerProgram(m, slots *ebpf.Map, vipLE, portLE, ifindex int32) asm.Instructions {
	const (
		ipOff  = 14
		tcpOff = ipOff + 20
	)
	return append(ipv4TCPPrologue(tcpOff), asm.Instructions{
		asm.LoadMem(asm.R5, asm.R2, ipOff+16, asm.Word),
		asm.JNE.Imm32(asm.R5, vipLE, "pass"),
		asm.LoadMem(asm.R5, asm.R2, tcpOff+2, asm.Half),
		asm.JNE.Imm(asm.R5, portLE, "pass"),
		asm.LoadMem(asm.R7, asm.R2, tcpOff+13, asm.Byte),
		asm.And.Imm(asm.R7, 0x02), // R7: SYN
		// flow key on the stack: saddr, sport, 0 0
		asm.LoadMem(asm.R5, asm.R2, ipOff+12, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R5, asm.Word),
		asm.LoadMem(asm.R4, asm.R2, tcpOff, asm.Half),
		asm.StoreMem(asm.RFP, -4, asm.R4, asm.Word),
		// slot key at fp-12: (saddr ^ sport) * golden ratio, top 8 bits
		asm.Xor.Reg32(asm.R5, asm.R4),
		asm.Mul.Imm32(asm.R5, -1640531535), // 0x9E3779B1
		asm.RSh.Imm32(asm.R5, 32-steerSlotBits),
		asm.StoreMem(asm.RFP, -12, asm.R5, asm.Word),
		asm.LoadMapPtr(asm.R1, slots.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -12),
		asm.FnMapLookupElem.Call(),
		asm.Mov.Reg(asm.R8, asm.R0), // R8: the slot's entry, or 0
		asm.JEq.Imm(asm.R8, 0, "noslot"),
		asm.LoadMem(asm.R5, asm.R8, 4, asm.Word),
		asm.JNE.Imm(asm.R5, 0, "flow"),
		asm.Mov.Imm(asm.R8, 0).WithSymbol("noslot"),
		asm.JNE.Imm(asm.R7, 0, "pass"), // a SYN and no node accepts: the front's
		asm.LoadMapPtr(asm.R1, m.FD()).WithSymbol("flow"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "steer"),
		asm.JEq.Imm(asm.R8, 0, "pass"),
		asm.Mov.Reg(asm.R0, asm.R8),
		// value: mark (u32), node IPv4 address (network order)
		asm.LoadMem(asm.R5, asm.R0, 0, asm.Word).WithSymbol("steer"),
		asm.StoreMem(asm.R6, skbMark, asm.R5, asm.Word),
		asm.LoadMem(asm.R5, asm.R0, 4, asm.Word),
		asm.JEq.Imm(asm.R5, 0, "drop"),    // node 0.0.0.0: the flow is held (Steer.Hold)
		asm.JEq.Imm32(asm.R5, -1, "pass"), // 255.255.255.255: to the front's stack (Steer.PassFlows)
		// struct bpf_redir_neigh { u32 nh_family; be32 ipv4_nh; u32 pad[3] } at fp-32
		asm.StoreImm(asm.RFP, -32, 2, asm.Word), // AF_INET
		asm.StoreMem(asm.RFP, -28, asm.R5, asm.Word),
		asm.StoreImm(asm.RFP, -24, 0, asm.Word),
		asm.StoreImm(asm.RFP, -20, 0, asm.Word),
		asm.StoreImm(asm.RFP, -16, 0, asm.Word),
		// bpf_redirect_neigh(ifindex, &nh, 20, 0): straight out of the same
		// interface to the node's MAC, skipping the front's IP stack (no
		// routing, no forwarding path) — LVS direct routing in the driver
		// hook.
		asm.Mov.Imm(asm.R1, ifindex),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -32),
		asm.Mov.Imm(asm.R3, 20),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnRedirectNeigh.Call(),
		asm.Return(),                               // TC_ACT_REDIRECT (7) from the helper, or TC_ACT_SHOT on error
		asm.Mov.Imm(asm.R0, -1).WithSymbol("pass"), // TCX_NEXT: continue as if no program ran
		asm.Return(),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("drop"), // TC_ACT_SHOT: the client retransmits later
		asm.Return(),
	}...)
}

// bpfMaxFlows is the flow map's size.
const bpfMaxFlows = 1 << 20

// steerSlotBits is log2 of SteerSlots.
const steerSlotBits = 8

// SteerSlots is the size of the direct-accept table: a new connection goes
// to the node of slot hash(client address, port) mod SteerSlots. 256 slots
// spread the connections of up to a few dozen nodes within a few percent.
const SteerSlots = 1 << steerSlotBits

// setSlots writes the slot table: vals[k] is slot k's mark and node
// address (zero: none).
func (b *bpfMap) setSlots(vals [][8]byte) error {
	for k := range vals {
		if err := b.slots.Update(uint32(k), vals[k][:], ebpf.UpdateAny); err != nil {
			return fmt.Errorf("slot %d: %w", k, err)
		}
	}
	return nil
}

// ipv4TCPPrologue is the start the steering and guard programs share: it
// keeps the skb in R6, the packet's start in R2 and its end in R3, and jumps
// to "pass" unless the frame holds an option-less IPv4 header and a whole
// TCP header (through tcpOff+14) carrying TCP.
func ipv4TCPPrologue(tcpOff int32) asm.Instructions {
	const ipOff = 14
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, tcpOff+14),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 12, asm.Half), // ethertype
		asm.JNE.Imm(asm.R5, 0x0008, "pass"),       // 0x0800 in network order
		asm.LoadMem(asm.R5, asm.R2, ipOff, asm.Byte),
		asm.JNE.Imm(asm.R5, 0x45, "pass"), // IPv4, no options
		asm.LoadMem(asm.R5, asm.R2, ipOff+9, asm.Byte),
		asm.JNE.Imm(asm.R5, 6, "pass"), // TCP
	}
}
