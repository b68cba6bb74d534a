package front

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"
)

// Tag mode: seed 000's TB-CCRD on one host (§2.2.2; the wire side is in
// internal/cluster/handoff's passfd_tag.go). Under a policy that shares its
// URL table (policy.Tagger: tbccrd) the front passes each new connection
// with handoff.FDFlagTag and pushes the table's changes to every node; the
// nodes route the connection's later requests by it — serve, move the
// connection to the tagged node, or hand it back when the table cannot
// tell — and report what they did in batched notes, which the front applies
// to the policy (control.Cluster.Tagged) and to its connection table and
// holds. The front is asked only about URLs the table cannot answer, and
// never takes a connection back only to pass it on.

// MoveMode says who moves a passed connection to the node its next request
// belongs to, under a policy that shares its table.
type MoveMode int

const (
	// MovesNodes (default): the nodes move connections among themselves
	// by the shared table (tag mode), when the policy shares one, no
	// virtual hosts are served (the nodes key requests by path) and no
	// rule other than Hybrid's chooses paths.
	MovesNodes MoveMode = iota
	// MovesFront: every later request goes back to the front, which
	// re-dispatches it (hand-back after each request).
	MovesFront
)

// ParseMoveMode reads "nodes" (or "") and "front".
func ParseMoveMode(s string) (MoveMode, error) {
	switch s {
	case "", "nodes":
		return MovesNodes, nil
	case "front":
		return MovesFront, nil
	}
	return MovesNodes, fmt.Errorf("moves %q: want nodes or front", s)
}

// DefaultTagFlush is how long the front gathers changes of the shared table
// before it pushes them to the nodes (PassFDConfig.TagFlush).
const DefaultTagFlush = time.Millisecond

// TagStats counts tag mode's work (HandoffStats.Tag).
type TagStats struct {
	// Served counts requests nodes served by the table without asking the
	// front (moves included); Moved the connections they moved to another
	// node; Asked the connections they handed back because the table could
	// not tell; Rehomed those of them the front then passed to another node
	// (a move through the front). Moves per request = (Moved + Rehomed) /
	// requests.
	Served, Moved, Asked, Rehomed uint64
	// Notes counts note messages from nodes; Stale the records that came
	// after the connection's end or a newer move the front already knew
	// (their URL is accounted, the connection is not); Refused the records
	// the front did not apply because a node spoke for a connection
	// another node holds; Ended the ends they reported; Pushes the table
	// messages sent to nodes.
	Notes, Stale, Refused, Ended, Pushes uint64
}

type tagCounters struct {
	served, moved, asked, rehomed, notes, stale, refused, ended, pushes atomic.Uint64
}

func (c *tagCounters) stats() TagStats {
	return TagStats{Served: c.served.Load(), Moved: c.moved.Load(), Asked: c.asked.Load(), Rehomed: c.rehomed.Load(),
		Notes: c.notes.Load(), Stale: c.stale.Load(), Refused: c.refused.Load(), Ended: c.ended.Load(), Pushes: c.pushes.Load()}
}

// tagState is one passfd path's tag mode.
type tagState struct {
	on   atomic.Int32 // 0 undecided, 1 tag mode, -1 not
	kick chan struct{}
	once sync.Once

	// conns: where each tag-mode connection is, guarded by passfdPath.mu.
	conns map[uint64]tagConn
	// nodeAt maps a socket path to its node and pathOf back, guarded by
	// passfdPath.mu.
	nodeAt map[string]int
	pathOf map[int]string

	// room is how many connections each node may hand back for the front
	// to relay (hybrid rule, TableRoom), set by the CPU sampler.
	room    atomic.Int64
	roomDue atomic.Bool // the room is to be pushed

	// The pusher's own state (one goroutine).
	upd   policy.TagUpdate
	full  []bool
	peers map[int]string
	gens  map[string]uint64
	// notes is the apply buffer, reused under notesMu.
	notesMu sync.Mutex
	notes   []control.TagNote
}

// tagConn is a tag-mode connection as the front knows it: the node holding
// it, that node's socket, and the connection's move count there.
type tagConn struct {
	node int
	path string
	seq  uint32
}

func newTagState() *tagState {
	return &tagState{kick: make(chan struct{}, 1), conns: map[uint64]tagConn{}, nodeAt: map[string]int{},
		pathOf: map[int]string{}, peers: map[int]string{}, gens: map[string]uint64{}}
}

// tagOn reports whether connections go out in tag mode (MoveMode).
func (p *passfdPath) tagOn(s *Server) bool {
	t := p.tag
	v := t.on.Load()
	if v == 0 {
		v = -1
		if p.cfg.Moves == MovesNodes && p.cfg.Return == ReturnAuto && s.cfg.VHosts == nil &&
			(s.cfg.Choose == nil || p.hybrid != nil) && s.cl.Tagger() {
			v = 1
			t.once.Do(func() { go p.pushLoop(s) })
		}
		t.on.Store(v)
	}
	return v > 0
}

// track records that tag-mode connection id is at node (socket path) with
// move count seq. Called with p.mu held.
func (p *passfdPath) track(id uint64, node int, path string, seq uint32) {
	p.tag.conns[id] = tagConn{node: node, path: path, seq: seq}
	p.tag.nodeAt[path], p.tag.pathOf[node] = node, path
}

// setRoom sets the connections the front has room to relay (the hybrid
// rule's share, relayShare.update) and pushes it when it changed or is
// not zero: the nodes use up their share as they hand connections back.
func (p *passfdPath) setRoom(n int64) {
	if p.tag.room.Swap(n) != n || n > 0 {
		p.tag.roomDue.Store(true)
		p.kickPush()
	}
}

// tagHeld is how many connections the nodes hold in tag mode.
func (p *passfdPath) tagHeld() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(len(p.tag.conns))
}

// kickPush asks the pusher to send the table's changes soon.
func (p *passfdPath) kickPush() {
	select {
	case p.tag.kick <- struct{}{}:
	default:
	}
}

// applyNotes applies a batch of notes from the node whose socket is path.
// The sender is the node the front dialled at path; a record about a
// connection counts only if the front tracks the connection and the record
// is not older than what it knows (its move count), and a request served
// "here" must come from the connection's holder.
func (p *passfdPath) applyNotes(s *Server, path string, data []byte) {
	t := p.tag
	t.ctr(s).notes.Add(1)
	t.notesMu.Lock()
	defer t.notesMu.Unlock()
	batch := t.notes[:0]
	var ended []uint64
	p.mu.Lock()
	from, ok := t.nodeAt[path]
	if !ok {
		p.mu.Unlock()
		return
	}
	handoff.ParseNotes(data, func(n handoff.Note) {
		tc, known := t.conns[n.Conn]
		switch n.Op {
		case handoff.NoteEnded:
			// From the holder, or from a node the connection moved to
			// whose move note is still on its way (a higher count).
			if known && (n.Seq > tc.seq || n.Seq == tc.seq && tc.node == from) {
				delete(t.conns, n.Conn)
				delete(p.out[tc.path], n.Conn)
				ended = append(ended, n.Conn)
			} else {
				t.ctr(s).stale.Add(1)
			}
			return
		case handoff.NoteServed:
			n.Node = from
		}
		tn := control.TagNote{URL: string(n.URL), Node: n.Node}
		switch {
		case !known || n.Seq < tc.seq:
			t.ctr(s).stale.Add(1) // after its end or a newer move: the URL only
		case n.Op == handoff.NoteServed && n.Seq == tc.seq && tc.node != from,
			n.Op == handoff.NoteMoved && n.Seq == tc.seq+1 && tc.node != from:
			t.ctr(s).refused.Add(1) // a node speaking for another's connection
		default:
			tn.Conn = n.Conn
			if n.Node != tc.node {
				tn.Move = true
				to, pathTo := n.Node, t.pathOf[n.Node]
				delete(p.out[tc.path], n.Conn)
				p.oweLocked(pathTo, n.Conn)
				t.conns[n.Conn] = tagConn{node: to, path: pathTo, seq: n.Seq}
			} else if n.Seq > tc.seq {
				tc.seq = n.Seq
				t.conns[n.Conn] = tc
			}
		}
		if n.Op == handoff.NoteMoved {
			t.ctr(s).moved.Add(1)
		}
		t.ctr(s).served.Add(1)
		batch = append(batch, tn)
	})
	p.mu.Unlock()
	s.cl.Tagged(batch)
	for _, id := range ended {
		t.ctr(s).ended.Add(1)
		s.cl.Release(id)
		s.cl.CloseConn(id)
	}
	clear(batch)
	t.notes = batch[:0]
	p.kickPush()
}

// ctr is the server's tag counters.
func (t *tagState) ctr(s *Server) *tagCounters { return &s.ctr.tag }

// untrack forgets tag-mode connection id (it came back, ended or was lost).
// Called with p.mu held.
func (p *passfdPath) untrack(id uint64) {
	if tc, ok := p.tag.conns[id]; ok {
		delete(p.out[tc.path], id)
		delete(p.tag.conns, id)
	}
}

// pushLoop pushes the shared table's changes to the nodes, at most once per
// TagFlush, when something may have changed (kickPush), until the server
// shuts down.
func (p *passfdPath) pushLoop(s *Server) {
	pushEvery(s.done, p.tag.kick, cmp.Or(max(p.cfg.TagFlush, 0), DefaultTagFlush), func() { p.push(s) })
}

// pushEvery calls push after each kick, at most once per every, until done
// closes: the tag paths' table pushes, batched.
func pushEvery(done, kick <-chan struct{}, every time.Duration, push func()) {
	for {
		select {
		case <-done:
			return
		case <-kick:
		}
		select {
		case <-done:
			return
		case <-time.After(every):
		}
		push()
	}
}

// push sends every node what changed: the table's entries and load flags,
// the nodes' sockets, and to a node newly connected the whole of the
// latter two (after a reset, so it asks about each URL once again).
func (p *passfdPath) push(s *Server) {
	t := p.tag
	t.upd = s.cl.TagUpdates(t.upd)
	var body []byte
	if t.upd.Reset {
		body = handoff.AppendTable(body, handoff.TableReset, 0, "")
	}
	for _, g := range t.upd.Tags {
		body = handoff.AppendTable(body, handoff.TableTag, g.Node, g.URL)
	}
	for i, f := range t.upd.Full {
		if i >= len(t.full) || t.full[i] != f {
			body = handoff.AppendTable(body, handoff.TableFull, i, fullText(f))
		}
	}
	t.full = append(t.full[:0], t.upd.Full...)
	backends := s.cl.Backends()
	if t.roomDue.Swap(false) {
		// Each node gets the whole room: a connection one too many costs
		// the front one handoff at its next request, a node without room
		// for a connection the front wants costs it the connection's moves
		// until the next sample.
		room := uint32(min(t.room.Load(), math.MaxUint32))
		body = handoff.AppendTable(body, handoff.TableRoom, 0, string(binary.BigEndian.AppendUint32(nil, room)))
	}
	peers := map[int]string{}
	for _, b := range backends {
		if sock := socket(b); sock != "" {
			peers[b.Index] = sock
			if t.peers[b.Index] != sock {
				body = handoff.AppendTable(body, handoff.TablePeer, b.Index, sock)
			}
		}
	}
	t.peers = peers
	var greet []byte
	for _, b := range backends {
		sock := peers[b.Index]
		if sock == "" {
			continue
		}
		c := p.client(s, sock)
		p.mu.Lock()
		p.tag.nodeAt[sock], p.tag.pathOf[b.Index] = b.Index, sock
		p.mu.Unlock()
		msg := body
		if g := c.Generation(); g == 0 || g != t.gens[sock] {
			if greet == nil {
				greet = p.greeting(peers)
			}
			msg = append(append([]byte(nil), greet...), body...)
		}
		if len(msg) == 0 {
			continue
		}
		if sendTable(c, b.Index, msg) == nil {
			t.ctr(s).pushes.Add(1)
		}
		t.gens[sock] = c.Generation()
	}
}

// greeting is what a node newly connected is told first: drop your table,
// these are the nodes' sockets and load flags.
func (p *passfdPath) greeting(peers map[int]string) []byte {
	b := handoff.AppendTable(nil, handoff.TableReset, 0, "")
	for i, sock := range peers {
		b = handoff.AppendTable(b, handoff.TablePeer, i, sock)
	}
	for i, f := range p.tag.full {
		b = handoff.AppendTable(b, handoff.TableFull, i, fullText(f))
	}
	return b
}

func fullText(f bool) string {
	if f {
		return "1"
	}
	return ""
}

// sendTable sends table records to node i in messages of at most
// handoff.FDMaxData bytes, cut between records.
func sendTable(c *handoff.FDClient, i int, b []byte) error {
	h := handoff.FDHeader{Kind: handoff.FDTable, Node: int32(i)}
	for len(b) > 0 {
		n := 0
		for n < len(b) {
			l := 5
			if b[n] != handoff.TableReset {
				l = handoff.TableRecordLen(int(b[n+5]) | int(b[n+6])<<8)
			}
			if n > 0 && n+l > handoff.FDMaxData {
				break
			}
			n += l
		}
		if err := c.SendMsg(h, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
