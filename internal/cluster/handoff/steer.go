//go:build linux

package handoff

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Steer keeps the per-flow steering that sends a handed-off connection's
// later packets from the client to the node that now owns it, in the
// front's network namespace: the kernel half of seed 002's front-end, which
// keeps forwarding a migrated connection's packets to the real server.
//
// Two backends hold the flow table (SteerConfig.Backend), both keyed by the
// client's address and port and never matching a SYN while the front
// accepts (with the eBPF backend the nodes may accept instead: SetSlots):
//
//   - bpf (default where it loads): an eBPF hash map read by a TCX ingress
//     program on the front's interface, which sets the flow's fwmark and
//     redirects the frame with bpf_redirect_neigh straight back out to the
//     node's MAC before the front's IP stack sees it (LVS direct routing in
//     the driver hook; the IP header is untouched, TTL included).
//   - nftables: one table, `map flows { type ipv4_addr . inet_service : mark }`
//     and a prerouting rule `ip daddr VIP tcp dport PORT tcp flags & syn == 0
//     meta mark set ip saddr . tcp sport map @flows`; the kernel's
//     forwarding path then routes marked packets to the node.
//
// For both, each node has a policy route (`ip rule fwmark M lookup T`,
// `default via <node> dev <dev>` in table T), the `local` routing rule moves
// from preference 0 to LocalPref so that marked packets are forwarded
// instead of delivered to the front's own VIP, and TCP early demux is off
// (see noEarlyDemux). Measured on this kernel (BenchmarkSteer, add+remove
// of one flow): nftables 455 µs wall / ~70 µs CPU (a netlink batch and an
// nf_tables commit each way, serialised by the commit mutex), bpf 19 µs (one
// bpf(2) call each way); a map lookup per packet costs the same with both,
// but bpf skips the front's routing and forwarding for steered packets.
// nftables remains for kernels without TCX (< 6.6) and for operators who
// want `nft list ruleset` to show everything.
//
// Steer is safe for concurrent use.
type Steer struct {
	cfg        SteerConfig
	mu         sync.Mutex
	m          flowMap      // the kernel's flow → mark map (nftables or eBPF)
	flows      map[Flow]int // flow → node index
	nodes      map[int]netip.Addr
	slots      []int  // the nodes that accept (SetSlots)
	gone       []int  // nodes that left, whose slots go to the front (SetSlots)
	moved      bool   // the local rule was moved
	earlyDemux []byte // tcp_early_demux before NewSteer, restored by Close

	// Added, Removed and Errors count steering changes.
	Added, Removed, Errors atomic.Uint64
}

// SteerConfig configures a Steer. Zero fields take the documented default.
type SteerConfig struct {
	// VIP is the virtual address and port clients connect to (required).
	VIP netip.AddrPort
	// Dev is the interface towards the nodes (required), e.g. "eth0".
	Dev string
	// Backend selects the kernel map: "bpf" (a TCX ingress program on Dev
	// reading an eBPF hash map; kernel ≥ 6.6), "nftables", or "auto"/""
	// (default): bpf, falling back to nftables where it cannot load.
	Backend string
	// Table is the nftables table name (default "shoal_steer"); an existing
	// table of that name is replaced.
	Table string
	// MarkBase is OR-ed with node index+1 to form the flow's fwmark
	// (default 0x5e000000).
	MarkBase uint32
	// RouteTable is the first routing table id; node i uses RouteTable+i
	// (default 2000).
	RouteTable int
	// RulePref is the preference of the fwmark rules (default 10) and
	// LocalPref where the `local` table's rule is moved (default 100).
	RulePref, LocalPref int
}

func (c *SteerConfig) fill() {
	if c.Backend == "" {
		c.Backend = "auto"
	}
	if c.Table == "" {
		c.Table = "shoal_steer"
	}
	if c.MarkBase == 0 {
		c.MarkBase = 0x5e000000
	}
	if c.RouteTable == 0 {
		c.RouteTable = 2000
	}
	if c.RulePref == 0 {
		c.RulePref = 10
	}
	if c.LocalPref == 0 {
		c.LocalPref = 100
	}
}

// Backend names the kernel map in use: "bpf" or "nftables".
func (s *Steer) Backend() string { return s.cfg.Backend }

// Mark returns the fwmark used for node i.
func (s *Steer) Mark(i int) uint32 { return s.cfg.MarkBase | uint32(i+1) }

// NewSteer installs the nftables table in the current network namespace and
// moves the local routing rule. Close undoes both.
func NewSteer(cfg SteerConfig) (*Steer, error) {
	cfg.fill()
	if !cfg.VIP.Addr().Is4() || cfg.VIP.Port() == 0 || cfg.Dev == "" {
		return nil, fmt.Errorf("handoff: steer: need an IPv4 VIP:port and a device, got %v %q", cfg.VIP, cfg.Dev)
	}
	var m flowMap
	var err error
	switch cfg.Backend {
	case "nftables":
		m, err = newNftMap(cfg)
	case "bpf":
		m, err = newBPFMap(cfg)
	case "auto":
		cfg.Backend = "bpf"
		if m, err = newBPFMap(cfg); err != nil {
			cfg.Backend = "nftables"
			m, err = newNftMap(cfg)
		}
	default:
		err = fmt.Errorf("handoff: steer: backend %q: want nftables or bpf", cfg.Backend)
	}
	if err != nil {
		return nil, err
	}
	s := &Steer{cfg: cfg, m: m, flows: make(map[Flow]int), nodes: make(map[int]netip.Addr)}
	if err := s.moveLocal(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.noEarlyDemux(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// earlyDemuxPath is the namespace's TCP early-demultiplex switch.
const earlyDemuxPath = "/proc/sys/net/ipv4/tcp_early_demux"

// noEarlyDemux turns TCP early demultiplexing off in this namespace. With it
// on, a packet of an established flow is matched to its socket and given the
// socket's cached local route before the routing decision, so the fwmark
// rule never sees it: while the front's frozen socket still exists (from
// Steer.Add until the node has acknowledged the handoff and the front closes
// it) the client's ACKs would be swallowed by that socket instead of
// reaching the node, which then stalls for a retransmission timeout (seen
// as 1 s pauses on about 40 % of one-request connections). The cost is one
// route lookup per received packet of the front's own connections.
func (s *Steer) noEarlyDemux() error {
	old, err := os.ReadFile(earlyDemuxPath)
	if err != nil {
		return fmt.Errorf("handoff: steer: %w", err)
	}
	if err := os.WriteFile(earlyDemuxPath, []byte("0\n"), 0o644); err != nil {
		return fmt.Errorf("handoff: steer: disable tcp_early_demux: %w", err)
	}
	s.earlyDemux = bytes.TrimSpace(old)
	return nil
}

// flowMap is the kernel half of Steer: a map from a client's address and
// port to the node's fwmark, consulted for every packet to the VIP.
type flowMap interface {
	put(f Flow, mark uint32, node netip.Addr) error
	// putAll steers every flow of fs to one node (a batched report of
	// moves: the eBPF backend makes it one system call).
	putAll(fs []Flow, mark uint32, node netip.Addr) error
	del(fs []Flow) error
	count() (int, error)
	// setSlots writes the direct-accept table (Steer.SetSlots).
	setSlots(vals [][8]byte) error
	close() error
}

// flowKey is the 8-byte map key: client IPv4 address and port in network
// order, padded to 8 bytes (nftables pads each concatenated field to 4).
func flowKey(f Flow) []byte {
	a := f.Client.Addr().As4()
	k := make([]byte, 8)
	copy(k, a[:])
	binary.BigEndian.PutUint16(k[4:], f.Client.Port())
	return k
}

// nftMap is the nftables backend.
type nftMap struct {
	conn  *nftables.Conn
	table *nftables.Table
	set   *nftables.Set
}

func newNftMap(cfg SteerConfig) (*nftMap, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("handoff: steer: netlink: %w", err)
	}
	s := &nftMap{conn: c}
	if err := s.install(cfg); err != nil {
		c.CloseLasting()
		return nil, err
	}
	return s, nil
}

func (s *nftMap) install(cfg SteerConfig) error {
	c := s.conn
	// Replace a leftover table (a front that crashed) atomically in the
	// same batch: add (no-op if present), delete, add.
	old := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: cfg.Table}
	c.AddTable(old)
	c.DelTable(old)
	s.table = c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: cfg.Table})
	s.set = &nftables.Set{
		Table:         s.table,
		Name:          "flows",
		IsMap:         true,
		Concatenation: true,
		KeyType:       nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService),
		DataType:      nftables.TypeMark,
	}
	if err := c.AddSet(s.set, nil); err != nil {
		return fmt.Errorf("handoff: steer: map: %w", err)
	}
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{
		Name: "pre", Table: s.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle, Policy: &accept,
	})
	vip := cfg.VIP.Addr().As4()
	var port [2]byte
	binary.BigEndian.PutUint16(port[:], cfg.VIP.Port())
	c.AddRule(&nftables.Rule{Table: s.table, Chain: ch, Exprs: []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: vip[:]},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port[:]},
		// Never steer a SYN: a new connection that reuses a 4-tuple whose
		// entry is still present must reach the front, not the old node.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x02}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}},
		// key = saddr (reg32 8) . sport (reg32 9)
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: s.set.Name, SetID: s.set.ID, DestRegister: 1, IsDestRegSet: true},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("handoff: steer: install table %s: %w", cfg.Table, err)
	}
	return nil
}

func (s *nftMap) put(f Flow, mark uint32, _ netip.Addr) error {
	// meta mark is host order
	e := nftables.SetElement{Key: flowKey(f), Val: binary.NativeEndian.AppendUint32(nil, mark)}
	if err := s.conn.SetAddElements(s.set, []nftables.SetElement{e}); err != nil {
		return err
	}
	return s.conn.Flush()
}

func (s *nftMap) putAll(fs []Flow, mark uint32, _ netip.Addr) error {
	els := make([]nftables.SetElement, len(fs))
	for i, f := range fs {
		els[i] = nftables.SetElement{Key: flowKey(f), Val: binary.NativeEndian.AppendUint32(nil, mark)}
	}
	if err := s.conn.SetAddElements(s.set, els); err != nil {
		return err
	}
	return s.conn.Flush()
}

func (s *nftMap) del(fs []Flow) error {
	els := make([]nftables.SetElement, len(fs))
	for i, f := range fs {
		els[i] = nftables.SetElement{Key: flowKey(f)}
	}
	if err := s.conn.SetDeleteElements(s.set, els); err != nil {
		return err
	}
	return s.conn.Flush()
}

func (s *nftMap) count() (int, error) {
	els, err := s.conn.GetSetElements(s.set)
	return len(els), err
}

func (s *nftMap) setSlots([][8]byte) error { return errors.ErrUnsupported }

func (s *nftMap) close() error {
	s.conn.DelTable(s.table)
	err := s.conn.Flush()
	s.conn.CloseLasting()
	if err != nil {
		return fmt.Errorf("handoff: steer: delete table: %w", err)
	}
	return nil
}

// ip runs one iproute2 command in the current namespace. Routing setup
// happens once per node, so a process per change is acceptable; the
// per-flow path (Add/Remove) is netlink only.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("handoff: ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (s *Steer) moveLocal() error {
	out, err := exec.Command("ip", "-4", "rule", "show").CombinedOutput()
	if err != nil {
		return fmt.Errorf("handoff: ip rule show: %w: %s", err, out)
	}
	pref := strconv.Itoa(s.cfg.LocalPref)
	if !hasLocalRule(out, pref) {
		if err := ip("-4", "rule", "add", "pref", pref, "lookup", "local"); err != nil {
			return err
		}
	}
	if hasLocalRule(out, "0") && pref != "0" {
		if err := ip("-4", "rule", "del", "pref", "0", "lookup", "local"); err != nil {
			return err
		}
	}
	s.moved = true
	return nil
}

// hasLocalRule reports whether `ip rule show` output has the local table's
// rule at preference pref.
func hasLocalRule(out []byte, pref string) bool {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, pref+":") && strings.HasSuffix(strings.TrimSpace(l), "from all lookup local") {
			return true
		}
	}
	return false
}

// AddNode routes node i's mark to addr (replacing an earlier address).
func (s *Steer) AddNode(i int, addr netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := strconv.Itoa(s.cfg.RouteTable + i)
	mark := "0x" + strconv.FormatUint(uint64(s.Mark(i)), 16)
	if err := ip("-4", "route", "replace", "default", "via", addr.String(), "dev", s.cfg.Dev, "table", t); err != nil {
		return err
	}
	if _, ok := s.nodes[i]; !ok {
		ip("-4", "rule", "del", "pref", strconv.Itoa(s.cfg.RulePref), "fwmark", mark, "lookup", t) // leftover
		if err := ip("-4", "rule", "add", "pref", strconv.Itoa(s.cfg.RulePref), "fwmark", mark, "lookup", t); err != nil {
			return err
		}
	}
	s.nodes[i] = addr
	return nil
}

// held marks a flow in Steer.flows that Hold put on hold.
const held = -1

// Hold drops flow f's packets in the kernel until Add steers it or Remove
// releases it: CRIU's network lock for one flow. A socket frozen with
// TCP_REPAIR still takes segments and acknowledges them, and a node sends a
// reset for segments that arrive before it has rebuilt the socket. Holding
// the flow from before the freeze until the node has acknowledged the
// rebuild means a segment sent in that window is lost and retransmitted,
// never acknowledged by the wrong socket or answered with a reset. Only the
// eBPF backend can hold; with nftables Hold returns errors.ErrUnsupported
// and changes nothing.
func (s *Steer) Hold(f Flow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Backend != "bpf" {
		return errors.ErrUnsupported
	}
	if _, ok := s.flows[f]; ok {
		return fmt.Errorf("handoff: hold %v: the flow is already steered", f)
	}
	if err := s.m.put(f, 0, netip.IPv4Unspecified()); err != nil {
		s.Errors.Add(1)
		return fmt.Errorf("handoff: hold %v: %w", f, err)
	}
	s.flows[f] = held
	return nil
}

// ErrUnknownNode is returned by Add for a node without AddNode.
var ErrUnknownNode = errors.New("handoff: steer: node has no route")

// Add steers flow f to node i. It returns once the kernel has the entry.
func (s *Steer) Add(f Flow, node int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nodes[node]; !ok {
		return fmt.Errorf("%w: %d", ErrUnknownNode, node)
	}
	if old, ok := s.flows[f]; ok && old != node && old != held && s.cfg.Backend != "bpf" {
		s.m.del([]Flow{f})
	} // a held entry, or any eBPF entry, is overwritten in place: no moment without one
	if err := s.m.put(f, s.Mark(node), s.nodes[node]); err != nil {
		s.Errors.Add(1)
		return fmt.Errorf("handoff: steer %v: %w", f, err)
	}
	s.flows[f] = node
	s.Added.Add(1)
	return nil
}

// AddFlows steers every flow of fs to node i, in one kernel update where
// the backend allows (a node's batched report of the moves it took over:
// one bpf(2) call instead of one per move). It returns once the kernel has
// the entries; on error none of fs counts as steered here (the caller may
// retry them one by one with Add).
func (s *Steer) AddFlows(fs []Flow, node int) error {
	if len(fs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nodes[node]; !ok {
		return fmt.Errorf("%w: %d", ErrUnknownNode, node)
	}
	if s.cfg.Backend != "bpf" {
		var old []Flow
		for _, f := range fs {
			if n, ok := s.flows[f]; ok && n != node && n != held {
				old = append(old, f)
			}
		}
		if len(old) > 0 {
			s.m.del(old)
		}
	}
	if err := s.m.putAll(fs, s.Mark(node), s.nodes[node]); err != nil {
		s.Errors.Add(1)
		return fmt.Errorf("handoff: steer %d flows: %w", len(fs), err)
	}
	for _, f := range fs {
		s.flows[f] = node
	}
	s.Added.Add(uint64(len(fs)))
	return nil
}

// Remove stops steering f; its later packets reach the front again (which
// answers them with a reset, having no socket). It reports whether f was
// steered.
func (s *Steer) Remove(f Flow) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.flows[f]; !ok {
		return false, nil
	}
	delete(s.flows, f)
	if err := s.removeLocked([]Flow{f}); err != nil {
		return true, err
	}
	return true, nil
}

// RemoveFlows stops steering every flow in fs that is steered, in one
// netlink transaction (a FIN-HANDOFF burst costs one commit, not one each).
// It returns how many were steered.
func (s *Steer) RemoveFlows(fs []Flow) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var del []Flow
	for _, f := range fs {
		if _, ok := s.flows[f]; ok {
			delete(s.flows, f)
			del = append(del, f)
		}
	}
	return len(del), s.removeLocked(del)
}

func (s *Steer) removeLocked(fs []Flow) error {
	if len(fs) == 0 {
		return nil
	}
	if err := s.m.del(fs); err != nil {
		s.Errors.Add(1)
		return fmt.Errorf("handoff: unsteer: %w", err)
	}
	s.Removed.Add(uint64(len(fs)))
	return nil
}

// SetSlots makes the nodes in accept take new connections straight from
// the clients: every segment of a flow the map does not hold, SYN
// included, goes to the node of the flow's slot (steerProgram), which
// accepts it on the VIP and reports it; an empty accept gives new
// connections back to the front. Each of the SteerSlots slots goes to the
// node of accept or gone with the highest hash of (slot, node) —
// rendezvous hashing, so that a node joining or leaving moves only the
// slots it takes or had. The slots of a node in gone (it left recently)
// go to the front's own stack: its connections too young to be in the map
// meet the front's reset, not the silence of another node's guard, and
// new connections there are accepted by the front meanwhile. Only the
// eBPF backend has slots (errors.ErrUnsupported otherwise).
func (s *Steer) SetSlots(accept, gone []int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := slices.Concat(accept, gone)
	for _, i := range all {
		if _, ok := s.nodes[i]; !ok {
			return fmt.Errorf("%w: %d", ErrUnknownNode, i)
		}
	}
	vals := make([][8]byte, SteerSlots)
	for k, i := range slotOwners(all) {
		switch {
		case i < 0:
		case slices.Contains(gone, i):
			copy(vals[k][4:], []byte{255, 255, 255, 255})
		default:
			binary.NativeEndian.PutUint32(vals[k][:], s.Mark(i))
			a := s.nodes[i].As4()
			copy(vals[k][4:], a[:])
		}
	}
	if err := s.m.setSlots(vals); err != nil {
		return fmt.Errorf("handoff: steer: slots: %w", err)
	}
	s.slots, s.gone = slices.Clone(accept), slices.Clone(gone)
	return nil
}

// Slots is the node each slot names as SetSlots last wrote them: -1 when
// the front accepts there (no node accepts, or the slot's node left).
func (s *Steer) Slots() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slotOwners(slices.Concat(s.slots, s.gone))
	for k, i := range out {
		if slices.Contains(s.gone, i) {
			out[k] = -1
		}
	}
	return out
}

// slotOwners is the node of accept each slot goes to: the one with the
// highest slotHash (-1 when accept is empty).
func slotOwners(accept []int) []int {
	out := make([]int, SteerSlots)
	for k := range out {
		out[k] = -1
		best := uint64(0)
		for _, i := range accept {
			if h := slotHash(k, i); out[k] < 0 || h > best {
				out[k], best = i, h
			}
		}
	}
	return out
}

// slotHash is rendezvous hashing's weight of node i for slot k
// (splitmix64 of both).
func slotHash(k, i int) uint64 {
	x := uint64(k)<<32 | uint64(uint32(i))
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// passing marks a flow in Steer.flows that PassFlows sends to the
// front's own stack.
const passing = -2

// PassFlows sends the steered flows of fs to the front's own stack
// instead of dropping their entries (their node died or lost them): with
// nodes accepting (SetSlots), a flow the map does not hold goes to its
// slot's node, whose guard drops a segment that finds no connection, and
// the client would wait for its timeout; the front, which has no socket
// for it either, answers with a reset, as it does for every flow when it
// accepts itself. RemovePassing removes the entries later.
func (s *Steer) PassFlows(fs []Flow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pass []Flow
	for _, f := range fs {
		if _, ok := s.flows[f]; ok {
			s.flows[f] = passing
			pass = append(pass, f)
		}
	}
	if len(pass) == 0 {
		return nil
	}
	if err := s.m.putAll(pass, 0, netip.AddrFrom4([4]byte{255, 255, 255, 255})); err != nil {
		s.Errors.Add(1)
		return fmt.Errorf("handoff: steer: pass %d flows: %w", len(pass), err)
	}
	return nil
}

// NodeFlows lists the flows steered to node.
func (s *Steer) NodeFlows(node int) []Flow {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fs []Flow
	for f, n := range s.flows {
		if n == node {
			fs = append(fs, f)
		}
	}
	return fs
}

// RemovePassing removes the entries of the flows of fs that PassFlows
// passes still (not steered again since), and returns how many.
func (s *Steer) RemovePassing(fs []Flow) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var del []Flow
	for _, f := range fs {
		if s.flows[f] == passing {
			delete(s.flows, f)
			del = append(del, f)
		}
	}
	return len(del), s.removeLocked(del)
}

// Len is the number of steered flows.
func (s *Steer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.flows)
}

// KernelLen reads the number of entries in the kernel map (for tests and
// for checking that user space and kernel agree).
func (s *Steer) KernelLen() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.count()
}

// Close removes the table, the node routes and rules, and puts the local
// rule back at preference 0.
func (s *Steer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.m != nil {
		errs = append(errs, s.m.close())
		s.m = nil
	}
	for i := range s.nodes {
		t := strconv.Itoa(s.cfg.RouteTable + i)
		mark := "0x" + strconv.FormatUint(uint64(s.Mark(i)), 16)
		errs = append(errs, ip("-4", "rule", "del", "pref", strconv.Itoa(s.cfg.RulePref), "fwmark", mark, "lookup", t))
		errs = append(errs, ip("-4", "route", "flush", "table", t))
	}
	s.nodes = map[int]netip.Addr{}
	if s.moved {
		errs = append(errs, ip("-4", "rule", "add", "pref", "0", "lookup", "local"))
		errs = append(errs, ip("-4", "rule", "del", "pref", strconv.Itoa(s.cfg.LocalPref), "lookup", "local"))
		s.moved = false
	}
	if s.earlyDemux != nil {
		if err := os.WriteFile(earlyDemuxPath, append(s.earlyDemux, '\n'), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("handoff: steer: restore tcp_early_demux: %w", err))
		}
		s.earlyDemux = nil
	}
	s.flows = map[Flow]int{}
	return errors.Join(errs...)
}
