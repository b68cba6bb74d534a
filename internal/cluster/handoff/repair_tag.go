//go:build linux

package handoff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// repairRouter is a node's side of tag mode across hosts (repair_tagmsg.go),
// one per RepairListener: its copy of the front's shared table, the front's
// channel (where notes, asks and flow moves go), its channels to the other
// nodes' handoff ports, the flows its guard holds or forwards, and the notes
// and move reports not yet sent. It is the repair twin of passfd's
// tagRouter; the table's records are the same, plus the cache holders and
// loads of TableHolders, TableLoad and TableLimit. When the channel to a
// node breaks, the flows this node moved there recently are reported to the
// front as left (MsgFlowLeft, repair_left.go): the dead node's own report
// of them may have died with it.
type repairRouter struct {
	l *RepairListener

	mu      sync.Mutex
	self    int               // this node's index, -1 until the front says
	table   map[string]int32  // URL → node
	holders map[string]uint32 // URL → its cache holders (TableHolders)
	loads   []int             // by node: open connections (TableLoad)
	limit   int               // the policy's load limit (TableLimit)
	full    []bool            // by node: at its load limit
	peers   map[int]netip.AddrPort
	clients map[int]*RepairClient
	front   *channel
	asks    map[uint64]chan int
	askID   uint64
	fwd     map[Flow]fwdEntry // flows this node moved away recently (forwarded, then passed)
	gen     uint64
	downs   map[int]uint64            // by node: how often its channel broke (forward checks it)
	waits   map[flowSeq]chan struct{} // moves here waiting for MsgForwarding
	notes   []byte
	moves   []byte            // MsgFlowMoved records not yet sent
	left    []byte            // MsgFlowLeft records not yet sent
	acks    []pendingAckFrame // acknowledgements of the front's handoffs not yet sent
	fins    []byte            // FIN-HANDOFF records not yet sent
	armed   bool
	timer   *time.Timer
	closed  bool
}

// RepairNoteDelay is how long a node gathers its notes and move reports
// before it sends them to the front in tag mode across hosts: the period
// of the front's table pushes (DefaultRepairTagFlush in
// internal/cluster/front), so that state crosses each way at most every
// 20 ms. Every frame costs the front a wake-up and a read, which at a
// fixed request rate is most of what a front whose nodes accept costs
// (docs/benchmarks.md: 10 ms cost it 17–20 µs a request, 20 ms 11–17, 40
// ms 7–9); a report's only urgency is the front's flow map (the old
// holder forwards the flow meanwhile), a note's and an end's the policy's
// accounting, which lags by at most this much.
const RepairNoteDelay = 20 * time.Millisecond

// untilTick is how long from now to the next multiple of period on the
// wall clock (a full period when now is on one). Every node flushes its
// batch at these ticks rather than a period after its first record, so the
// frames of all nodes reach the front together, in one of its wake-ups
// instead of one per node (nodes' clocks agree within far less than a
// period; where they do not, this is no worse than a timer per node). A
// record still waits at most one period.
func untilTick(now time.Time, period time.Duration) time.Duration {
	return period - time.Duration(now.UnixNano()%int64(period))
}

// askTimeout bounds the wait for the front's answer to an ask; without one
// the node serves the request itself.
const askTimeout = time.Second

// maxNotesFrame bounds one MsgNotes frame.
const maxNotesFrame = 32 << 10

func newRepairRouter(l *RepairListener) *repairRouter {
	r := &repairRouter{l: l, self: -1, table: map[string]int32{}, holders: map[string]uint32{}, peers: map[int]netip.AddrPort{},
		clients: map[int]*RepairClient{}, asks: map[uint64]chan int{}, fwd: map[Flow]fwdEntry{},
		waits: map[flowSeq]chan struct{}{}, downs: map[int]uint64{}}
	r.timer = time.AfterFunc(time.Hour, r.flush)
	r.timer.Stop()
	return r
}

// setFront records the front's channel and this node's index (a MsgTable,
// or the front's own tag handoff).
func (r *repairRouter) setFront(ch *channel, self int) {
	r.mu.Lock()
	r.front, r.self = ch, self
	r.mu.Unlock()
}

// frontChannel is the front's channel, nil until the front spoke.
func (r *repairRouter) frontChannel() *channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.front
}

// applyTable applies a MsgTable from the front on ch.
func (r *repairRouter) applyTable(ch *channel, p []byte) error {
	if len(p) < 4 {
		return fmt.Errorf("%w: table of %d bytes", ErrMalformed, len(p))
	}
	self := int(int32(binary.BigEndian.Uint32(p)))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.front, r.self = ch, self
	var drop []*RepairClient
	err := ParseTable(p[4:], func(op uint8, node int, text []byte) {
		switch op {
		case TableReset:
			clear(r.table)
			clear(r.holders)
		case TablePeer:
			ap, err := netip.ParseAddrPort(string(text))
			if err != nil || !ap.Addr().Is4() {
				return
			}
			if old, ok := r.peers[node]; ok && old != ap {
				if c := r.clients[node]; c != nil {
					drop = append(drop, c)
					delete(r.clients, node)
				}
			}
			r.peers[node] = ap
		case TableFull:
			if node >= 0 && node < 1<<16 {
				for len(r.full) <= node {
					r.full = append(r.full, false)
				}
				r.full[node] = len(text) > 0
			}
		case TableTag:
			delete(r.holders, string(text))
			if node < 0 {
				delete(r.table, string(text))
				return
			}
			if len(r.table) >= maxTableEntries {
				clear(r.table)
			}
			r.table[string(text)] = int32(node)
		case TableHolders:
			delete(r.table, string(text))
			if len(r.holders) >= maxTableEntries {
				clear(r.holders)
			}
			r.holders[string(text)] = uint32(node)
		case TableLoad:
			if node >= 0 && node < 1<<16 && len(text) == 4 {
				for len(r.loads) <= node {
					r.loads = append(r.loads, 0)
				}
				r.loads[node] = int(binary.BigEndian.Uint32(text))
			}
		case TableLimit:
			if len(text) == 4 {
				r.limit = int(binary.BigEndian.Uint32(text))
			}
		}
	})
	for _, c := range drop {
		go c.Close()
	}
	return err
}

// route is the node the table names for url (its one cache holder, or the
// least loaded of its holders) and true, or false when the front must be
// asked (no entry, a full node, or one without a known handoff port).
func (r *repairRouter) route(url string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.self < 0 {
		return -1, false
	}
	n, ok := r.table[url]
	if !ok {
		if m := r.holders[url]; m != 0 {
			return r.leastLoaded(m)
		}
		return -1, false
	}
	i := int(n)
	if i < len(r.full) && r.full[i] {
		return -1, false
	}
	if _, known := r.peers[i]; i != r.self && !known {
		return -1, false
	}
	return i, true
}

// leastLoaded is step (1) of seed 000 §2.2.2 as tbccrd's Pick takes it
// (policy.TBCCRD.leastLoaded, load): of the cache holders in m with a known
// handoff port, the one with the fewest open connections, scanning from
// this node so that a tie keeps the connection here, and not counting the
// connection itself against this node; false when that node is at the
// load limit (step (2) then needs the front). Called with r.mu held.
func (r *repairRouter) leastLoaded(m uint32) (int, bool) {
	load := func(i int) int {
		l := 0
		if i < len(r.loads) {
			l = r.loads[i]
		}
		if i == r.self {
			l--
		}
		return l
	}
	best := -1
	for k := range 32 {
		i := (r.self + k) % 32
		if m&(1<<i) == 0 {
			continue
		}
		if _, known := r.peers[i]; i != r.self && !known {
			continue
		}
		if best < 0 || load(i) < load(best) {
			best = i
		}
	}
	if best < 0 || r.limit <= 0 || load(best) >= r.limit {
		return -1, false
	}
	return best, true
}

// movedAway counts a connection this node moved to node in its copy of
// the loads until the front's next push says what they are: without it,
// every node that read the same least loaded holder from one push would
// send it connections until the next one, and the connections would swing
// back and forth between the nodes.
func (r *repairRouter) movedAway(node int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if node >= 0 && node < len(r.loads) {
		r.loads[node]++
	}
	if r.self >= 0 && r.self < len(r.loads) && r.loads[r.self] > 0 {
		r.loads[r.self]--
	}
}

// movedHere counts a connection another node moved here, as movedAway
// does on the sender.
func (r *repairRouter) movedHere() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.self >= 0 && r.self < len(r.loads) {
		r.loads[r.self]++
	}
}

// usable reports whether node i can take a move from here: this node, or
// one whose handoff port the table gave.
func (r *repairRouter) usable(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, known := r.peers[i]
	return i >= 0 && (i == r.self || known)
}

// selfIndex is this node's index, -1 while unknown.
func (r *repairRouter) selfIndex() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.self
}

// ask asks the front which node should serve url on connection conn and
// waits for the answer; -1 when there is none in time.
func (r *repairRouter) ask(conn uint64, url string) int {
	r.mu.Lock()
	front := r.front
	r.askID++
	id := r.askID
	ch := make(chan int, 1)
	r.asks[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.asks, id)
		r.mu.Unlock()
	}()
	if front == nil || front.send(MsgAsk, AppendAsk(nil, id, conn, url)) != nil {
		return -1
	}
	t := time.NewTimer(askTimeout)
	defer t.Stop()
	select {
	case n := <-ch:
		return n
	case <-t.C:
		return -1
	}
}

// answer delivers a MsgAnswer to its ask.
func (r *repairRouter) answer(p []byte) {
	if len(p) < 12 {
		return
	}
	id, n := binary.BigEndian.Uint64(p), int(int32(binary.BigEndian.Uint32(p[8:])))
	r.mu.Lock()
	ch := r.asks[id]
	r.mu.Unlock()
	if ch != nil {
		select {
		case ch <- n:
		default:
		}
	}
}

// forwardLinger is how long a node forwards a flow it moved away: the
// front's flow map follows the new holder's batched report within
// RepairNoteDelay and a message's time; the rest covers a front or node
// slowed down by load.
const forwardLinger = 2 * time.Second

// fwdEntry is a flow this node moved away: the move (its generation here,
// the new holder, the flow's incarnation and the move count) that a
// MsgFlowLeft names if the new holder's channel breaks.
type fwdEntry struct {
	gen      uint64
	node     int
	inc, seq uint32
}

// forward has the guard send f's segments on to node's host for
// forwardLinger (Guard.Forward), then let them reset for passLinger
// (Guard.Pass); a newer hold or forward of f, or f's rebuild here
// (unforward), cancels both. Until then the move (incarnation inc, move
// count seq) is remembered for peerDown; epoch is downEpoch(node) from
// before the move, so that a channel that broke while the move was under
// way reports the flow as left at once.
func (r *repairRouter) forward(f Flow, node int, inc, seq uint32, epoch uint64) {
	g := r.l.guard
	r.mu.Lock()
	ap, ok := r.peers[node]
	r.gen++
	gen := r.gen
	r.fwd[f] = fwdEntry{gen: gen, node: node, inc: inc, seq: seq}
	if r.downs[node] != epoch {
		r.queueLeft(f, inc, seq)
	}
	r.mu.Unlock()
	if !ok || g.Forward(f, ap.Addr()) != nil {
		g.Unhold(f)
		time.AfterFunc(forwardLinger+passLinger, func() { r.endForward(f, gen) })
		return
	}
	time.AfterFunc(forwardLinger, func() {
		r.mu.Lock()
		mine := r.fwd[f].gen == gen
		r.mu.Unlock()
		if !mine || g.Pass(f) != nil {
			return
		}
		time.AfterFunc(passLinger, func() {
			if r.endForward(f, gen) {
				g.Unhold(f)
			}
		})
	})
}

// endForward forgets the move of f of generation gen and reports whether it
// was still the latest.
func (r *repairRouter) endForward(f Flow, gen uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fwd[f].gen != gen {
		return false
	}
	delete(r.fwd, f)
	return true
}

// downEpoch counts the breaks of node's channel so far.
func (r *repairRouter) downEpoch(node int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.downs[node]
}

// peerDown is the OnDown of the channel to node: every flow this node moved
// there and still remembers is reported to the front as left. If node died
// with its MsgFlowMoved for them still batched, the front's map names this
// node for ever otherwise; if the report did arrive, or a later move of the
// flow, the front ignores this one.
func (r *repairRouter) peerDown(node int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.downs[node]++
	for f, e := range r.fwd {
		if e.node == node {
			r.queueLeft(f, e.inc, e.seq)
		}
	}
}

// reportLeft queues a MsgFlowLeft record: f (incarnation inc) left this
// node with move seq and its new holder may never report it.
func (r *repairRouter) reportLeft(f Flow, inc, seq uint32) {
	r.mu.Lock()
	r.queueLeft(f, inc, seq)
	r.mu.Unlock()
}

// queueLeft queues a MsgFlowLeft record, sent with the notes within
// RepairNoteDelay (not urgent: the front waits LeftGrace anyway). The queue
// is bounded by r.fwd, of which it names each flow at most once per break
// of its new holder's channel; flush cuts it into frames of at most
// maxNotesFrame. Called with r.mu held.
func (r *repairRouter) queueLeft(f Flow, inc, seq uint32) {
	r.left = AppendFlowLeft(r.left, f, inc, seq)
	r.l.Left.Add(1)
	if !r.armed && !r.closed {
		r.armed = true
		r.timer.Reset(untilTick(time.Now(), RepairNoteDelay))
	}
}

// passLinger is how long, after forwardLinger, the guard lets a flow this
// node moved away through to the kernel (Guard.Pass), which resets the
// client: only a flow whose new holder died before its report reached the
// front still arrives here then, and without it the client would wait for
// its own timeout.
const passLinger = 10 * time.Second

// unforward ends any hold or forward of f at once: f is (again) this
// node's, or a move of it is starting (Hold follows).
func (r *repairRouter) unforward(f Flow) {
	r.mu.Lock()
	delete(r.fwd, f)
	r.mu.Unlock()
	r.l.guard.Unhold(f)
}

// flowSeq names one move of a flow.
type flowSeq struct {
	f   Flow
	seq uint32
}

// expectForwarding registers a move here that waits for the old holder's
// MsgForwarding.
func (r *repairRouter) expectForwarding(f Flow, seq uint32) chan struct{} {
	ch := make(chan struct{})
	r.mu.Lock()
	r.waits[flowSeq{f, seq}] = ch
	r.mu.Unlock()
	return ch
}

// forwarding handles a MsgForwarding: the move it names may be served.
func (r *repairRouter) forwarding(p []byte) {
	f, seq, err := ParseForwarding(p)
	if err != nil {
		return
	}
	r.mu.Lock()
	ch := r.waits[flowSeq{f, seq}]
	delete(r.waits, flowSeq{f, seq})
	r.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// forgetForwarding drops a wait that ended otherwise.
func (r *repairRouter) forgetForwarding(f Flow, seq uint32) {
	r.mu.Lock()
	delete(r.waits, flowSeq{f, seq})
	r.mu.Unlock()
}

// note queues a NoteServed record for the front, sent within
// RepairNoteDelay together with the others.
func (r *repairRouter) note(seq uint32, conn uint64, url string) {
	r.mu.Lock()
	r.notes = AppendNote(r.notes, NoteServed, r.self, seq, conn, url)
	now := len(r.notes) >= maxNotesFrame
	if !now && !r.armed && !r.closed {
		r.armed = true
		r.timer.Reset(untilTick(time.Now(), RepairNoteDelay))
	}
	r.mu.Unlock()
	if now {
		r.flush()
	}
}

// reportMove queues a MsgFlowMoved record for the front, sent with the
// notes within RepairNoteDelay: until the front's flow map follows, the
// old holder's guard forwards the flow here.
func (r *repairRouter) reportMove(f Flow, t TagMove) {
	r.mu.Lock()
	r.moves = AppendFlowMoved(r.moves, f, t)
	now := len(r.moves) >= maxNotesFrame
	if !now && !r.armed && !r.closed {
		r.armed = true
		r.timer.Reset(untilTick(time.Now(), RepairNoteDelay))
	}
	r.mu.Unlock()
	if now {
		r.flush()
	}
}

// queue appends a record to one of the router's queues (under r.mu) and
// arms the flush timer; it reports whether the queue is big enough to be
// flushed at once.
func (r *repairRouter) queue(add func()) bool {
	r.mu.Lock()
	add()
	now := len(r.notes) >= maxNotesFrame || len(r.moves) >= maxNotesFrame || len(r.fins) >= maxNotesFrame ||
		len(r.acks) >= maxNotesFrame/16
	if !now && !r.armed && !r.closed {
		r.armed = true
		r.timer.Reset(untilTick(time.Now(), RepairNoteDelay))
	}
	r.mu.Unlock()
	return now
}

// ackLater queues the acknowledgement of one of the front's tag-mode
// handoffs to a guarded flow, sent with the notes within RepairNoteDelay
// rather than at once: the front only closes its frozen copy on it (the
// flow already reaches this node, and a segment the front's copy takes
// meanwhile is dropped there, never acknowledged), so one frame of
// acknowledgements, move reports, notes and ends per period costs the
// front one wake-up instead of one per connection for each.
func (r *repairRouter) ackLater(ch *channel, ack []byte) {
	if r.queue(func() { r.acks = append(r.acks, pendingAckFrame{ch, ack}) }) {
		r.flush()
	}
}

// pendingAckFrame is a queued acknowledgement and the channel its handoff
// came on.
type pendingAckFrame struct {
	ch *channel
	p  []byte
}

// finLater queues the FIN-HANDOFF of a connection in tag mode, sent after
// the reports and notes queued before it (the front must steer the flow
// here before it can end it here) within RepairNoteDelay. The flow is fully
// closed, so the entry that stays on the front meanwhile steers nothing
// (and a new connection on the same 4-tuple is a new incarnation, which
// this notice cannot end).
func (r *repairRouter) finLater(f Flow, tag uint32) {
	if r.queue(func() { r.fins = AppendFin(r.fins, f, tag) }) {
		r.flush()
	}
}

// flush sends the queued acknowledgements, move reports, flows left, notes
// and FIN-HANDOFFs to the front in one write, in that order: moves before
// notes and ends (a note may be about a connection a report brings here, a
// flow that came here and left again must be steered here before it can be
// found left, and a flow must be steered here before its end here counts).
// The channel's send lock keeps them ahead of any later frame.
func (r *repairRouter) flush() {
	r.mu.Lock()
	acks, b, mv, left, fins, front := r.acks, r.notes, r.moves, r.left, r.fins, r.front
	r.acks, r.notes, r.moves, r.left, r.fins, r.armed = nil, nil, nil, nil, nil, false
	r.mu.Unlock()
	if front == nil {
		return
	}
	// All in one write: one wake-up of the front for the period.
	fs := make([]frame, 0, len(acks)+4)
	for _, a := range acks {
		if a.ch != front { // the front's channel changed meanwhile: on the handoff's own
			a.ch.send(MsgHandoffAck, a.p)
			continue
		}
		fs = append(fs, frame{MsgHandoffAck, a.p})
	}
	if len(mv) > 0 {
		fs = append(fs, frame{MsgFlowMoved, mv})
	}
	fs = appendRecordFrames(fs, MsgFlowLeft, left, flowLeftLen)
	if len(b) > 0 {
		fs = append(fs, frame{MsgNotes, b})
	}
	fs = appendRecordFrames(fs, MsgFinHandoff, fins, finLen)
	if len(fs) == 0 || front.sendFrames(fs) != nil {
		return
	}
	for _, f := range fs {
		switch f.k {
		case MsgFlowMoved, MsgFlowLeft, MsgNotes:
			r.l.Notes.Add(1)
		case MsgFinHandoff:
			r.l.Fins.Add(uint64(len(f.p) / finLen))
		}
	}
}

// client returns the channel to node's handoff port, made on first use.
func (r *repairRouter) client(node int) (*RepairClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[node]; c != nil {
		return c, nil
	}
	ap, ok := r.peers[node]
	if !ok || r.closed {
		return nil, fmt.Errorf("handoff: no handoff port for node %d", node)
	}
	c := NewRepairClient(RepairClientConfig{Addr: ap.String(), Auth: r.l.auth, OnDown: func(error) { r.peerDown(node) }})
	r.clients[node] = c
	return c, nil
}

// close stops the router: notes are flushed and node channels closed.
func (r *repairRouter) close() {
	r.mu.Lock()
	r.closed = true
	r.timer.Stop()
	cs := make([]*RepairClient, 0, len(r.clients))
	for _, c := range r.clients {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	r.flush()
	for _, c := range cs {
		c.Close()
	}
}

// errNoFront refuses a node-to-node move to a node the front has not spoken
// to: it could not tell the front to steer the flow.
var errNoFront = errors.New("handoff: no front channel to report the move to")

// appendRecordFrames appends frames of kind carrying b, a run of records of
// recLen bytes each, cut between records so no frame is over maxNotesFrame.
func appendRecordFrames(fs []frame, kind MsgKind, b []byte, recLen int) []frame {
	for len(b) > 0 {
		n := min(len(b), maxNotesFrame/recLen*recLen)
		fs = append(fs, frame{kind, b[:n]})
		b = b[n:]
	}
	return fs
}
