//go:build linux

package handoff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// Guard is the node's half of a safe move: a TCX ingress program on the
// node's interfaces that DROPS a segment to a virtual IP when it finds no
// connection for it on the node — no socket at all, or only a listener —
// where the kernel would answer with a reset. A client segment that the
// front's steering sends on before the node has rebuilt the socket (the
// rest of a multi-segment request, pipelined requests, the ACK of the
// first answer bytes) is therefore lost and retransmitted to the rebuilt
// socket instead of ending the connection. That is what lets the front
// steer a flow to its node before it sends the state (RepairMover.Move),
// rather than hold it until the node has acknowledged, and so saves the
// client's early ACKs that holding drops (seed 002 §3: the front-end keeps
// forwarding the migrated connection's packets; TCP's own retransmission
// covers the short window in which the new owner is not ready).
//
// Only segments without SYN or RST to a guarded address are looked at; a
// SYN is a new connection (the listener answers it as usual) and a RST
// for no socket is ignored by the kernel anyway. Dropped is counted.
type Guard struct {
	vips  map[netip.Addr]bool
	devs  []string
	m     *ebpf.Map // guarded addresses (IPv4, network order) → 1
	held  *ebpf.Map // held flows (struct bpf_sock_tuple.ipv4) → 0 (Hold) or a node's IPv4 (Forward)
	ctr   *ebpf.Map // [0]: segments dropped
	prog  *ebpf.Program
	links []link.Link
}

// tcpListen is TCP_LISTEN in struct bpf_sock's state.
const tcpListen = 10

// bpfSockState is offsetof(struct bpf_sock, state).
const bpfSockState = 72

// skbIfindex is offsetof(struct __sk_buff, ifindex).
const skbIfindex = 40

// NewGuard attaches the guard for vips (IPv4) to the ingress of each of
// devs. It needs CAP_BPF and CAP_NET_ADMIN and a kernel with TCX (≥ 6.6).
func NewGuard(devs []string, vips []netip.Addr) (*Guard, error) {
	if len(devs) == 0 || len(vips) == 0 {
		return nil, errors.New("handoff: guard: need an interface and a virtual IP")
	}
	g := &Guard{vips: map[netip.Addr]bool{}, devs: devs}
	var err error
	g.m, err = ebpf.NewMap(&ebpf.MapSpec{Name: "shoal_guard_vip", Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: 64})
	if err != nil {
		return nil, fmt.Errorf("handoff: guard: bpf map: %w", err)
	}
	g.held, err = ebpf.NewMap(&ebpf.MapSpec{Name: "shoal_guard_hold", Type: ebpf.Hash, KeySize: 12, ValueSize: 4, MaxEntries: 1 << 17})
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("handoff: guard: bpf map: %w", err)
	}
	g.ctr, err = ebpf.NewMap(&ebpf.MapSpec{Name: "shoal_guard_ctr", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("handoff: guard: bpf map: %w", err)
	}
	for _, v := range vips {
		if !v.Is4() {
			g.Close()
			return nil, fmt.Errorf("handoff: guard: %v: only IPv4 is supported", v)
		}
		k := v.As4()
		if err := g.m.Put(k[:], []byte{1}); err != nil {
			g.Close()
			return nil, fmt.Errorf("handoff: guard: %w", err)
		}
		g.vips[v] = true
	}
	insns := guardProgram(g.m, g.held, g.ctr)
	g.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "shoal_guard", Type: ebpf.SchedCLS, License: "Apache-2.0", Instructions: insns})
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("handoff: guard: load bpf program: %w", err)
	}
	for _, d := range devs {
		ifc, err := net.InterfaceByName(d)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("handoff: guard: %w", err)
		}
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: g.prog, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("handoff: guard: attach tcx ingress on %s: %w", d, err)
		}
		g.links = append(g.links, l)
	}
	return g, nil
}

// guardProgram is the guard's TCX program over its maps: guarded addresses,
// held or forwarded flows, and the drop counter.
func guardProgram(vips, held, ctr *ebpf.Map) asm.Instructions {
	const (
		ipOff  = 14
		tcpOff = ipOff + 20
	)
	return append(ipv4TCPPrologue(tcpOff), asm.Instructions{
		asm.LoadMem(asm.R5, asm.R2, tcpOff+13, asm.Byte),
		asm.And.Imm(asm.R5, 0x06), // SYN or RST: not ours
		asm.JNE.Imm(asm.R5, 0, "pass"),
		// struct bpf_sock_tuple.ipv4 at fp-16: saddr, daddr, sport, dport
		// (network order, as in the packet); the map key (daddr) at fp-4.
		asm.LoadMem(asm.R5, asm.R2, ipOff+12, asm.Word),
		asm.StoreMem(asm.RFP, -16, asm.R5, asm.Word),
		asm.LoadMem(asm.R5, asm.R2, ipOff+16, asm.Word),
		asm.StoreMem(asm.RFP, -12, asm.R5, asm.Word),
		asm.StoreMem(asm.RFP, -4, asm.R5, asm.Word),
		asm.LoadMem(asm.R5, asm.R2, tcpOff, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R5, asm.Word),
		asm.LoadMapPtr(asm.R1, vips.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"), // not a guarded address
		// A flow this node is moving to another node (Hold): dropped,
		// so that its frozen socket takes nothing the next one misses; a
		// flow it moved (Forward): sent on to the new holder.
		asm.LoadMapPtr(asm.R1, held.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "lookup"),
		asm.LoadMem(asm.R5, asm.R0, 0, asm.Word),
		asm.JEq.Imm(asm.R5, 0, "drop"),
		asm.JEq.Imm32(asm.R5, -1, "pass"), // Pass: the kernel resets the client
		// struct bpf_redir_neigh { u32 nh_family; be32 ipv4_nh; u32 pad[3] } at fp-48
		asm.StoreImm(asm.RFP, -48, 2, asm.Word), // AF_INET
		asm.StoreMem(asm.RFP, -44, asm.R5, asm.Word),
		asm.StoreImm(asm.RFP, -40, 0, asm.Word),
		asm.StoreImm(asm.RFP, -36, 0, asm.Word),
		asm.StoreImm(asm.RFP, -32, 0, asm.Word),
		// bpf_redirect_neigh(skb->ifindex, &nh, 20, 0): back out of the
		// interface it came in on, to the new holder's MAC.
		asm.LoadMem(asm.R1, asm.R6, skbIfindex, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -48),
		asm.Mov.Imm(asm.R3, 20),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnRedirectNeigh.Call(),
		asm.Return(),
		// bpf_skc_lookup_tcp(skb, &tuple, sizeof tuple.ipv4, BPF_F_CURRENT_NETNS, 0):
		// established (or time-wait, or request) socket first, else listener.
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("lookup"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.Mov.Imm(asm.R3, 12),
		asm.Mov.Imm(asm.R4, -1),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkcLookupTcp.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"), // no socket: the kernel would reset
		asm.LoadMem(asm.R7, asm.R0, bpfSockState, asm.Word),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.FnSkRelease.Call(),
		asm.JEq.Imm(asm.R7, tcpListen, "drop"),     // only a listener: it would reset
		asm.Mov.Imm(asm.R0, -1).WithSymbol("pass"), // TCX_NEXT
		asm.Return(),
		asm.StoreImm(asm.RFP, -20, 0, asm.Word).WithSymbol("drop"),
		asm.LoadMapPtr(asm.R1, ctr.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -20),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "shot"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("shot"), // TC_ACT_SHOT: the client retransmits later
		asm.Return(),
	}...)
}

// Covers reports whether segments to addr are guarded.
func (g *Guard) Covers(addr netip.Addr) bool { return g != nil && g.vips[addr.Unmap()] }

// Devs lists the guarded interfaces.
func (g *Guard) Devs() []string { return g.devs }

// Dropped is the number of segments the guard dropped.
func (g *Guard) Dropped() uint64 {
	var n uint64
	if g == nil || g.ctr == nil || g.ctr.Lookup(uint32(0), &n) != nil {
		return 0
	}
	return n
}

// holdKey is f as the guard's hold map keys it: struct bpf_sock_tuple.ipv4
// (client address, VIP, client port, VIP port), all in network order.
func holdKey(f Flow) [12]byte {
	var k [12]byte
	c, v := f.Client.Addr().As4(), f.VIP.Addr().As4()
	copy(k[0:], c[:])
	copy(k[4:], v[:])
	binary.BigEndian.PutUint16(k[8:], f.Client.Port())
	binary.BigEndian.PutUint16(k[10:], f.VIP.Port())
	return k
}

// Hold drops f's segments at this node until Unhold, even while a socket
// for f exists here. A node that moves a connection to another node holds
// its flow from before it freezes the socket until the front steers the
// flow away (seed 002 §3's "the old server stops accepting" step, done in
// the kernel): a segment the frozen socket would acknowledge and keep is
// dropped instead, and the client retransmits it to the new owner.
func (g *Guard) Hold(f Flow) error {
	if g == nil || g.held == nil {
		return errors.New("handoff: guard: no guard to hold a flow")
	}
	k := holdKey(f)
	if err := g.held.Put(k[:], []byte{0, 0, 0, 0}); err != nil {
		return fmt.Errorf("handoff: guard: hold %v: %w", f, err)
	}
	return nil
}

// Forward sends f's segments on to the node at to (its address on the
// guarded interface's network) instead of dropping them, until Unhold:
// after a move, the front's flow map may still send a few of them here
// until the new holder's report has reached it, and forwarding them saves
// the client a retransmission timeout.
func (g *Guard) Forward(f Flow, to netip.Addr) error {
	if g == nil || g.held == nil {
		return errors.New("handoff: guard: no guard to forward a flow")
	}
	if !to.Is4() || to.IsUnspecified() {
		return fmt.Errorf("handoff: guard: forward %v to %v: need an IPv4 address", f, to)
	}
	k, a := holdKey(f), to.As4()
	if err := g.held.Put(k[:], a[:]); err != nil {
		return fmt.Errorf("handoff: guard: forward %v: %w", f, err)
	}
	return nil
}

// Pass lets f's segments through to the kernel even though no socket here
// matches them, so that the client gets a reset rather than silence: for a
// flow this node moved away whose new holder never reported the move to
// the front (it died), so the front still sends the flow here after the
// forward ended.
func (g *Guard) Pass(f Flow) error {
	if g == nil || g.held == nil {
		return errors.New("handoff: guard: no guard")
	}
	k := holdKey(f)
	if err := g.held.Put(k[:], []byte{0xff, 0xff, 0xff, 0xff}); err != nil {
		return fmt.Errorf("handoff: guard: pass %v: %w", f, err)
	}
	return nil
}

// Unhold ends Hold, Forward or Pass for f.
func (g *Guard) Unhold(f Flow) {
	if g == nil || g.held == nil {
		return
	}
	k := holdKey(f)
	g.held.Delete(k[:])
}

// Close detaches the program.
func (g *Guard) Close() error {
	var errs []error
	for _, l := range g.links {
		errs = append(errs, l.Close())
	}
	g.links = nil
	if g.prog != nil {
		errs = append(errs, g.prog.Close())
		g.prog = nil
	}
	for _, m := range []*ebpf.Map{g.m, g.held, g.ctr} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	g.m, g.held, g.ctr = nil, nil, nil
	return errors.Join(errs...)
}

// guardFor builds the guard of a handoff port listening on addr: the
// virtual IPs are the IPv4 addresses on lo outside 127/8 (where direct
// routing puts them), the interfaces the one holding addr, or every other
// interface that is up when addr is unspecified.
func guardFor(addr net.Addr) (*Guard, error) {
	ap, err := addrPortOf(addr)
	if err != nil {
		return nil, err
	}
	a := ap.Addr().Unmap()
	if a.IsLoopback() {
		return nil, errors.New("handoff: guard: handoff port on loopback: no interface to guard")
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return nil, fmt.Errorf("handoff: guard: %w", err)
	}
	as, err := lo.Addrs()
	if err != nil {
		return nil, fmt.Errorf("handoff: guard: %w", err)
	}
	var vips []netip.Addr
	for _, x := range as {
		if n, ok := x.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.Unmap().IsLoopback() {
				vips = append(vips, ip.Unmap())
			}
		}
	}
	if len(vips) == 0 {
		return nil, errors.New("handoff: guard: no virtual IP on lo")
	}
	var devs []string
	if a.IsUnspecified() {
		ifs, err := net.Interfaces()
		if err != nil {
			return nil, fmt.Errorf("handoff: guard: %w", err)
		}
		for _, ifc := range ifs {
			if ifc.Flags&net.FlagUp != 0 && ifc.Flags&net.FlagLoopback == 0 {
				devs = append(devs, ifc.Name)
			}
		}
	} else {
		d, err := InterfaceOf(a)
		if err != nil {
			return nil, fmt.Errorf("handoff: guard: %w", err)
		}
		devs = []string{d}
	}
	return NewGuard(devs, vips)
}
