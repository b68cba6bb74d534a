//go:build linux

package front

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"
)

// Tag mode across hosts: seed 000's TB-CCRD (§2.2.2) on the repair path
// (the wire side is internal/cluster/handoff's repair_tagmsg.go). Under a
// policy that shares its URL table (policy.Tagger: tbccrd) the front hands
// each new connection over in tag mode and pushes the table's changes to
// every node on its control channel; the node holding a connection routes
// each later request by it: serves it, or moves the connection with
// TCP_REPAIR straight to the node the table names, which reports the move
// in a batched MsgFlowMoved so that the flow's steering follows (the old
// holder forwards the flow meanwhile). A URL the table cannot tell is asked
// about (MsgAsk): the front picks as it would for a relayed request and
// answers. The front's per-request work is thus a share of a batched frame
// (notes and move reports), one flow-map update per move and one ask per
// step (2), instead of relaying every request and answer.
//
// This is the intermediate design, not the seed's: the seed's
// front reads every request in the packet path and tags it (an eBPF parser
// would); here the node reads the request and consults its copy of the
// table. The decisions are the policy's either way; what differs is who
// parses the request line, that a node's table and loads lag the front's
// by at most TagFlush plus a message, and that the front's flow map lags a
// move by at most handoff.RepairNoteDelay.
type repairTag struct {
	on   atomic.Int32 // 0 undecided, 1 tag mode, -1 not
	kick chan struct{}
	once sync.Once

	// The pusher's own state (one goroutine).
	upd   policy.TagUpdate
	full  []bool
	loads []int
	limit int
	peers map[int]string
	gens  map[int]uint64
	// accepting is the nodes new connections go to (NodesAccept); left,
	// when each node that stopped accepting did, gone those of them
	// whose slots still go to the front.
	accepting, gone []int
	left            map[int]time.Time
}

// tagOn reports whether connections go out in tag mode: the policy shares
// its table, RepairConfig.Moves is MovesNodes, and neither virtual hosts
// nor a hybrid rule need the front to see every request.
func (p *RepairPath) tagOn(s *Server) bool {
	t := &p.tag
	v := t.on.Load()
	if v == 0 {
		v = -1
		if p.cfg.Moves == MovesNodes && s.cfg.VHosts == nil && s.cfg.Choose == nil && s.cl.Tagger() {
			v = 1
			t.kick = make(chan struct{}, 1)
			t.peers, t.gens = map[int]string{}, map[int]uint64{}
			p.mover.SetTag(true)
			t.once.Do(func() { go p.pushLoop(s) })
			p.kickPush()
		}
		t.on.Store(v)
	}
	return v > 0
}

// kickPush asks the pusher to send the table's changes soon.
func (p *RepairPath) kickPush() {
	if p.tag.kick == nil {
		return
	}
	select {
	case p.tag.kick <- struct{}{}:
	default:
	}
}

// DefaultRepairTagFlush is how long the repair front gathers table changes
// before it pushes them (RepairConfig.TagFlush). Longer than passfd's
// DefaultTagFlush: the repair table carries every node's load, which
// changes at nearly every move, and each push costs the front one sealed
// message per node; nodes' loads lag by at most this much.
const DefaultRepairTagFlush = 20 * time.Millisecond

// pushLoop pushes the table's changes at most once per TagFlush, when
// something may have changed, until the server shuts down.
func (p *RepairPath) pushLoop(s *Server) {
	pushRiding(s.done, p.tag.kick, cmp.Or(max(p.cfg.TagFlush, 0), DefaultRepairTagFlush), func() { p.push(s) })
}

// pushRiding calls push after a kick once every has passed since the last
// push: at the first kick after that, or by a timer 2×every after the last
// push if no kick comes sooner. Kicks come from what changes the table —
// an accepted connection, a node's frame — so the front is awake for them
// anyway; pushEvery's timer woke it once more per push (a wake-up costs
// the front more than the push itself). A change waits at most 2×every.
func pushRiding(done, kick <-chan struct{}, every time.Duration, push func()) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	var last time.Time
	armed := false
	for {
		select {
		case <-done:
			t.Stop()
			return
		case <-kick:
			since := time.Since(last)
			if since < every {
				if !armed {
					armed = true
					t.Reset(2*every - since)
				}
				continue
			}
		case <-t.C:
		}
		t.Stop()
		armed = false
		last = time.Now()
		push()
	}
}

// push sends every node what changed: URL entries, load flags, the nodes'
// handoff ports, and to a node whose channel is new the whole of the
// latter two after a reset.
func (p *RepairPath) push(s *Server) {
	t := &p.tag
	t.upd = s.cl.TagUpdates(t.upd)
	var body []byte
	if t.upd.Reset {
		body = handoff.AppendTable(body, handoff.TableReset, 0, "")
	}
	for _, g := range t.upd.Tags {
		if g.Node < 0 && g.Holders != 0 {
			body = handoff.AppendTable(body, handoff.TableHolders, int(int32(g.Holders)), g.URL)
		} else {
			body = handoff.AppendTable(body, handoff.TableTag, g.Node, g.URL)
		}
	}
	for i, f := range t.upd.Full {
		if i >= len(t.full) || t.full[i] != f {
			body = handoff.AppendTable(body, handoff.TableFull, i, fullText(f))
		}
	}
	t.full = append(t.full[:0], t.upd.Full...)
	for i, l := range t.upd.Loads {
		if i >= len(t.loads) || t.loads[i] != l {
			body = handoff.AppendTable(body, handoff.TableLoad, i, countText(l))
		}
	}
	t.loads = append(t.loads[:0], t.upd.Loads...)
	if t.upd.LoadLimit != t.limit {
		t.limit = t.upd.LoadLimit
		body = handoff.AppendTable(body, handoff.TableLimit, 0, countText(t.limit))
	}
	backends := s.cl.Backends()
	peers := map[int]string{}
	for _, b := range backends {
		ap, err := p.handoffAddr(b.Addr)
		if err != nil || p.node(s, b.Index, b.Addr) != nil {
			continue
		}
		peers[b.Index] = ap.String()
		if t.peers[b.Index] != peers[b.Index] {
			body = handoff.AppendTable(body, handoff.TablePeer, b.Index, peers[b.Index])
		}
	}
	t.peers = peers
	defer p.setAccepting(s)
	for i := range peers {
		cl := p.mover.Client(i)
		if cl == nil || cl.Dial() != nil {
			continue
		}
		msg := body
		if g := cl.Generation(); g != t.gens[i] {
			msg = append(p.greeting(peers), body...)
			t.gens[i] = g
		}
		if len(msg) > 0 && sendRepairTable(cl, i, msg) == nil {
			s.ctr.tag.pushes.Add(1)
		}
	}
}

// setAccepting sends new connections to the nodes that accept them
// (RepairConfig.NodesAccept): up, with some weight, their channel up and
// greeted with the table on it (so that they know their index, which their
// reports carry). A node that stops accepting leaves its slots to the
// front for handoff.DeadFlowsPass first (its connections too young to be
// reported meet the front's reset rather than another node's silence). It
// changes the steering program's slots only when that set changes; an
// empty set gives new connections back to the front.
func (p *RepairPath) setAccepting(s *Server) {
	if !p.cfg.NodesAccept {
		return
	}
	t := &p.tag
	var acc []int
	for _, n := range s.cl.Nodes() {
		cl := p.mover.Client(n.Index)
		if n.Up && n.Weight > 0 && cl != nil && p.mover.Accepts(n.Index) && t.gens[n.Index] == cl.Generation() {
			acc = append(acc, n.Index)
		}
	}
	now := time.Now()
	if t.left == nil {
		t.left = map[int]time.Time{}
	}
	for _, i := range t.accepting {
		if !slices.Contains(acc, i) {
			t.left[i] = now
		}
	}
	var gone []int
	for i, at := range t.left {
		if slices.Contains(acc, i) || now.Sub(at) > handoff.DeadFlowsPass {
			delete(t.left, i)
			continue
		}
		gone = append(gone, i)
	}
	slices.Sort(gone)
	if slices.Equal(acc, t.accepting) && slices.Equal(gone, t.gone) {
		return
	}
	if err := p.mover.SetAccepting(acc, gone); err != nil {
		s.logf("front: repair: nodes accepting %v: %v", acc, err)
		return
	}
	if len(gone) > 0 {
		s.logf("front: repair: nodes accepting new connections: %v (the front takes those of %v for now)", acc, gone)
	} else {
		s.logf("front: repair: nodes accepting new connections: %v", acc)
	}
	t.accepting, t.gone = acc, gone
}

// greeting is what a node on a new channel is told first: drop your table,
// these are the nodes' handoff ports and load flags.
func (p *RepairPath) greeting(peers map[int]string) []byte {
	b := handoff.AppendTable(nil, handoff.TableReset, 0, "")
	for i, a := range peers {
		b = handoff.AppendTable(b, handoff.TablePeer, i, a)
	}
	for i, f := range p.tag.full {
		b = handoff.AppendTable(b, handoff.TableFull, i, fullText(f))
	}
	for i, l := range p.tag.loads {
		b = handoff.AppendTable(b, handoff.TableLoad, i, countText(l))
	}
	return handoff.AppendTable(b, handoff.TableLimit, 0, countText(p.tag.limit))
}

// countText is a TableLoad or TableLimit record's text.
func countText(n int) string {
	return string(binary.BigEndian.AppendUint32(nil, uint32(max(n, 0))))
}

// maxTableFrame bounds one MsgTable's records.
const maxTableFrame = 1 << 20

// sendRepairTable sends table records to node i in MsgTable frames cut
// between records.
func sendRepairTable(cl *handoff.RepairClient, i int, b []byte) error {
	for len(b) > 0 {
		n := 0
		for n < len(b) {
			l := 5
			if b[n] != handoff.TableReset {
				l = handoff.TableRecordLen(int(b[n+5]) | int(b[n+6])<<8)
			}
			if n > 0 && n+l > maxTableFrame {
				break
			}
			n += l
		}
		if err := cl.SendMsg(handoff.MsgTable, append(handoff.AppendTableMsg(nil, i), b[:n]...)); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// tagMsg is the mover's OnTag: node i's notes (requests it served by the
// table) and asks (requests it could not route).
func (p *RepairPath) tagMsg(i int, k handoff.MsgKind, b []byte) {
	s := p.s.Load()
	if s == nil {
		return
	}
	switch k {
	case handoff.MsgNotes:
		s.ctr.tag.notes.Add(1)
		var batch []control.TagNote
		handoff.ParseNotes(b, func(n handoff.Note) {
			if n.Op != handoff.NoteServed {
				return
			}
			conn := n.Conn
			if !p.mover.Live(conn) {
				conn = 0 // after the connection's end: the URL only
				s.ctr.tag.stale.Add(1)
			}
			batch = append(batch, control.TagNote{URL: string(n.URL), Node: i, Conn: conn})
		})
		s.ctr.tag.served.Add(uint64(len(batch)))
		s.cl.Tagged(batch)
		p.kickPush()
	case handoff.MsgAsk:
		id, conn, url, err := handoff.ParseAsk(b)
		if err != nil {
			return
		}
		s.ctr.tag.asked.Add(1)
		if !p.mover.Live(conn) {
			conn = 0
		}
		r := policy.Request{URL: string(url), Size: -1, Conn: conn, Holder: i}
		node := -1
		if _, be := s.cl.Pick(&r); be != nil {
			node = be.Index
			be.Requests.Add(1)
		}
		s.cl.TagAsked(r.URL)
		if cl := p.mover.Client(i); cl != nil {
			cl.SendMsg(handoff.MsgAnswer, handoff.AppendAnswer(nil, id, node))
		}
		p.kickPush()
	}
}

// tagMoved is the mover's OnMoved: node i took connections over from other
// nodes and their flows now go there. The policy hears of the requests that
// caused the moves (unless it answered an ask for one), in one batch, and
// each connection's hold moves with it.
func (p *RepairPath) tagMoved(i int, ts []handoff.TagMove) {
	s := p.s.Load()
	if s == nil {
		return
	}
	s.ctr.tag.moved.Add(uint64(len(ts)))
	s.ctr.tag.served.Add(uint64(len(ts)))
	var batch []control.TagNote
	var be *control.Backend
	for _, t := range ts {
		switch {
		case t.Conn == 0: // stale report: the request only
			if !t.Counted {
				batch = append(batch, control.TagNote{URL: t.URL, Node: i})
			}
		case t.Counted:
			if be == nil {
				be = backendOf(s, i)
			}
			if be != nil {
				s.cl.Hold(be, t.Conn)
			}
		default:
			batch = append(batch, control.TagNote{URL: t.URL, Node: i, Conn: t.Conn, Move: true})
		}
	}
	if len(batch) > 0 {
		s.cl.Tagged(batch)
	}
	p.kickPush()
}

// backendOf is node i's backend, nil if there is none.
func backendOf(s *Server, i int) *control.Backend {
	for _, b := range s.cl.Backends() {
		if b.Index == i {
			return b
		}
	}
	return nil
}

// handoffAddr is the handoff port of the node whose HTTP address is
// hostport: its host and RepairConfig.Port.
func (p *RepairPath) handoffAddr(hostport string) (netip.AddrPort, error) {
	return resolveHandoff(hostport, p.cfg.Port)
}
