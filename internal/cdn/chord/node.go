package chord

import (
	"errors"
	"slices"
	"time"
)

// Kind is the type of a message.
type Kind uint8

// Chord's messages (Stoica et al. §4, iterative style).
const (
	KindQuery    Kind = 1 + iota // who is the successor of Key? (one lookup hop)
	KindReply                    // Done: Node owns Key; else ask Node next
	KindGetState                 // stabilise: what are your predecessor and successors?
	KindState                    // Pred (HasPred), Succs
	KindNotify                   // I may be your predecessor
	KindPing                     // check-predecessor
	KindPong
	KindLeave // graceful leave: to the successor with Pred, to the predecessor with Succs
)

// Msg is one Chord message.
type Msg struct {
	Kind    Kind
	From    Peer
	To      Peer
	Req     uint64
	Key     ID
	Done    bool
	Node    Peer
	HasPred bool
	Pred    Peer
	Succs   []Peer
}

// Result is the end of a lookup started with Lookup.
type Result struct {
	Lookup uint64
	Key    ID
	Owner  Peer
	Hops   int // Query messages sent: nodes asked
	Err    error
}

// ErrLookup is wrapped by a failed lookup's error.
var ErrLookup = errors.New("chord: lookup failed")

// Stats counts what a node did.
type Stats struct {
	Lookups, Hops, Timeouts, Suspected uint64
}

type purpose uint8

const (
	forUser purpose = iota
	forJoin
	forFinger
	forStabilise
	forPing
)

type lookup struct {
	id      uint64
	key     ID
	purpose purpose
	finger  int
	hops    int
	cur     Peer
}

type request struct {
	to       Peer
	deadline time.Time
	purpose  purpose
	lookup   *lookup
}

// Node is one member of the ring. It is not safe for concurrent use.
type Node struct {
	cfg       Config
	pred      Peer
	hasPred   bool
	succ      []Peer // succ[0] is the successor; empty until joined
	finger    [Bits]Peer
	hasFinger [Bits]bool
	next      int

	reqs    map[uint64]*request
	seq     uint64
	suspect map[ID]time.Time

	stabDue, fixDue, predDue time.Time
	results                  []Result
	stats                    Stats
	contacts                 []Peer // the nodes a joiner asks, first the current one
	joinFailed               bool
	tries                    int // contacts that failed in a row
}

func newNode(cfg Config, now time.Time) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, reqs: map[uint64]*request{}, suspect: map[ID]time.Time{},
		stabDue: now.Add(cfg.Stabilise), fixDue: now.Add(cfg.FixFingers), predDue: now.Add(cfg.CheckPredecessor)}, nil
}

// Create starts a new ring of one node.
func Create(cfg Config, now time.Time) (*Node, error) {
	n, err := newNode(cfg, now)
	if err != nil {
		return nil, err
	}
	n.succ = []Peer{cfg.Self}
	return n, nil
}

// Join starts a node that joins the ring through one of contacts (tried
// in turn): it looks up its own ID to find its successor; stabilise does
// the rest (Chord §4.3).
func Join(cfg Config, contacts []Peer, now time.Time) (*Node, []Msg, error) {
	if len(contacts) == 0 {
		return nil, nil, errors.New("chord: join needs a contact")
	}
	n, err := newNode(cfg, now)
	if err != nil {
		return nil, nil, err
	}
	n.contacts = slices.Clone(contacts)
	l := &lookup{key: cfg.Self.ID, purpose: forJoin, cur: contacts[0]}
	return n, n.ask(now, l), nil
}

func (n *Node) joining() bool { return n.pending(forJoin) }

func (n *Node) pending(p purpose) bool {
	for _, r := range n.reqs {
		if r.purpose == p {
			return true
		}
	}
	return false
}

// JoinFailed reports whether every contact failed to answer a joiner.
func (n *Node) JoinFailed() bool { return n.joinFailed }

// Joined reports whether the node knows a successor.
func (n *Node) Joined() bool { return len(n.succ) > 0 }

// Self returns this node.
func (n *Node) Self() Peer { return n.cfg.Self }

// Successor returns the first live successor.
func (n *Node) Successor() Peer {
	if len(n.succ) == 0 {
		return n.cfg.Self
	}
	return n.succ[0]
}

// Successors returns the successor list.
func (n *Node) Successors() []Peer { return slices.Clone(n.succ) }

// Predecessor returns the predecessor, if known.
func (n *Node) Predecessor() (Peer, bool) { return n.pred, n.hasPred }

// Owns reports whether key falls in (predecessor, self], the keys this node
// is the home of (Chord §4: a key belongs to its successor). With no
// predecessor known it claims the key: a lone node owns everything, and a
// claim made during repair is corrected when the registering PoP's next
// refresh asks again.
func (n *Node) Owns(key ID) bool {
	if !n.hasPred {
		return true
	}
	return betweenIncl(n.pred.ID, key, n.cfg.Self.ID)
}

// Fingers returns the distinct finger table entries with their index.
func (n *Node) Fingers() map[int]Peer {
	out := map[int]Peer{}
	for i := range n.finger {
		if n.hasFinger[i] {
			out[i] = n.finger[i]
		}
	}
	return out
}

// Stats returns the counters.
func (n *Node) Stats() Stats { return n.stats }

// TakeResults returns the lookups finished since the last call.
func (n *Node) TakeResults() []Result {
	r := n.results
	n.results = nil
	return r
}

// Lookup starts finding the owner of key (the first node at or after it)
// and returns its number; the Result comes from TakeResults.
func (n *Node) Lookup(now time.Time, key ID) (uint64, []Msg) {
	n.seq++
	l := &lookup{id: n.seq, key: key, purpose: forUser, cur: n.cfg.Self}
	n.stats.Lookups++
	return l.id, n.step(now, l)
}

// step runs the lookup l from the node it is at: locally while that is this
// node, else by asking it.
func (n *Node) step(now time.Time, l *lookup) []Msg {
	if l.cur.ID != n.cfg.Self.ID {
		return n.ask(now, l)
	}
	if !n.Joined() {
		n.finish(now, l, Peer{}, ErrLookup)
		return nil
	}
	if betweenIncl(n.cfg.Self.ID, l.key, n.succ[0].ID) || n.succ[0].ID == n.cfg.Self.ID {
		n.finish(now, l, n.succ[0], nil)
		return nil
	}
	l.cur = n.closestPreceding(l.key)
	if l.cur.ID == n.cfg.Self.ID {
		n.finish(now, l, n.succ[0], nil)
		return nil
	}
	return n.ask(now, l)
}

func (n *Node) ask(now time.Time, l *lookup) []Msg {
	if l.hops >= n.cfg.MaxHops {
		n.finish(now, l, Peer{}, ErrLookup)
		return nil
	}
	l.hops++
	n.stats.Hops++
	n.seq++
	n.reqs[n.seq] = &request{to: l.cur, deadline: now.Add(n.cfg.Timeout), purpose: l.purpose, lookup: l}
	return []Msg{{Kind: KindQuery, From: n.cfg.Self, To: l.cur, Req: n.seq, Key: l.key}}
}

func (n *Node) finish(now time.Time, l *lookup, owner Peer, err error) {
	switch l.purpose {
	case forUser:
		if err != nil {
			err = errors.Join(err, errors.New("no route to the key"))
		}
		n.results = append(n.results, Result{Lookup: l.id, Key: l.key, Owner: owner, Hops: l.hops, Err: err})
	case forJoin:
		if err != nil {
			n.joinFailed = true
		} else if !n.Joined() {
			n.succ, n.tries = []Peer{owner}, 0
			n.stabDue = now // stabilise at once
		}
	case forFinger:
		if err == nil {
			n.finger[l.finger], n.hasFinger[l.finger] = owner, true
		}
	}
}

// closestPreceding is the known live node closest before key (Chord's
// closest_preceding_node), from fingers and successors; self if none.
func (n *Node) closestPreceding(key ID) Peer {
	best := n.cfg.Self
	self := n.cfg.Self.ID
	consider := func(p Peer) {
		if _, bad := n.suspect[p.ID]; bad {
			return
		}
		if between(self, p.ID, key) && p.ID-self > best.ID-self {
			best = p
		}
	}
	for i := Bits - 1; i >= 0; i-- {
		if n.hasFinger[i] {
			consider(n.finger[i])
		}
	}
	for _, p := range n.succ {
		consider(p)
	}
	return best
}

// Handle processes one received message and returns the messages to send.
func (n *Node) Handle(now time.Time, m Msg) []Msg {
	delete(n.suspect, m.From.ID)
	reply := Msg{From: n.cfg.Self, To: m.From, Req: m.Req}
	switch m.Kind {
	case KindQuery:
		if !n.Joined() {
			return nil
		}
		reply.Kind, reply.Key = KindReply, m.Key
		if betweenIncl(n.cfg.Self.ID, m.Key, n.succ[0].ID) || n.succ[0].ID == n.cfg.Self.ID {
			reply.Done, reply.Node = true, n.succ[0]
		} else if p := n.closestPreceding(m.Key); p.ID != n.cfg.Self.ID {
			reply.Node = p
		} else {
			reply.Done, reply.Node = true, n.succ[0]
		}
		return []Msg{reply}
	case KindReply:
		r := n.reqs[m.Req]
		if r == nil || r.to.ID != m.From.ID || r.lookup == nil {
			return nil
		}
		delete(n.reqs, m.Req)
		l := r.lookup
		if m.Done {
			n.finish(now, l, m.Node, nil)
			return nil
		}
		l.cur = m.Node
		return n.step(now, l)
	case KindGetState:
		reply.Kind, reply.HasPred, reply.Pred, reply.Succs = KindState, n.hasPred, n.pred, n.succ
		return []Msg{reply}
	case KindState:
		r := n.reqs[m.Req]
		if r == nil || r.to.ID != m.From.ID || r.purpose != forStabilise {
			return nil
		}
		delete(n.reqs, m.Req)
		return n.stabilised(now, m)
	case KindNotify:
		n.notified(m.From)
	case KindPing:
		reply.Kind = KindPong
		return []Msg{reply}
	case KindPong:
		if r := n.reqs[m.Req]; r != nil && r.to.ID == m.From.ID {
			delete(n.reqs, m.Req)
		}
	case KindLeave:
		n.forget(m.From.ID)
		if m.HasPred && m.Pred.ID != n.cfg.Self.ID {
			n.pred, n.hasPred = m.Pred, true
		}
		if len(m.Succs) > 0 {
			n.setSuccs(m.Succs[0], m.Succs[1:])
		}
	}
	return nil
}

func (n *Node) notified(p Peer) {
	if p.ID == n.cfg.Self.ID {
		return
	}
	if !n.hasPred || between(n.pred.ID, p.ID, n.cfg.Self.ID) {
		n.pred, n.hasPred = p, true
	}
	if len(n.succ) > 0 && n.succ[0].ID == n.cfg.Self.ID {
		n.succ = []Peer{p}
	}
}

// Consider tells the node that p is a live member of the ring, as the PoP
// layer knows every member from MBPP's view: when p lies between this node
// and its successor it becomes the successor, and stabilise does the rest.
// Chord alone cannot join two rings a partition made: once each side has
// forgotten the other, no successor, finger or predecessor crosses. MBPP
// heals its ring (its heal.go); fed the healed membership, every node finds
// its true successor and the two Chord rings become one in a few
// stabilise rounds. A node suspected of failure is not taken.
func (n *Node) Consider(p Peer) {
	if !n.Joined() || p.ID == n.cfg.Self.ID || p.ID == 0 {
		return
	}
	if _, bad := n.suspect[p.ID]; bad {
		return
	}
	if s := n.succ[0]; s.ID == n.cfg.Self.ID || between(n.cfg.Self.ID, p.ID, s.ID) {
		n.setSuccs(p, n.succ)
	}
}

// stabilised is the second half of stabilise: adopt the successor's
// predecessor if it sits between, rebuild the successor list from the
// successor's, and notify the successor.
func (n *Node) stabilised(now time.Time, m Msg) []Msg {
	self := n.cfg.Self.ID
	s := m.From
	if m.HasPred && between(self, m.Pred.ID, s.ID) {
		if _, bad := n.suspect[m.Pred.ID]; !bad {
			// A closer successor: adopt it and stabilise again with it
			// at once, so that a node that joined far off walks back
			// in round trips, not in stabilise periods.
			n.setSuccs(m.Pred, append([]Peer{s}, m.Succs...))
			return []Msg{{Kind: KindNotify, From: n.cfg.Self, To: n.succ[0]}, n.getState(now, n.succ[0])}
		}
	}
	n.setSuccs(s, m.Succs)
	return []Msg{{Kind: KindNotify, From: n.cfg.Self, To: n.succ[0]}}
}

func (n *Node) setSuccs(first Peer, rest []Peer) {
	list := []Peer{first}
	for _, p := range rest {
		if len(list) == n.cfg.Successors || p.ID == n.cfg.Self.ID {
			break
		}
		if _, bad := n.suspect[p.ID]; bad || slices.ContainsFunc(list, func(q Peer) bool { return q.ID == p.ID }) {
			continue
		}
		list = append(list, p)
	}
	n.succ = list
}

// forget removes a failed or departed node from every table.
func (n *Node) forget(id ID) {
	if id == n.cfg.Self.ID {
		return
	}
	had := len(n.succ) > 0
	n.succ = slices.DeleteFunc(n.succ, func(p Peer) bool { return p.ID == id })
	for i := range n.finger {
		if n.hasFinger[i] && n.finger[i].ID == id {
			n.hasFinger[i] = false
		}
	}
	if n.hasPred && n.pred.ID == id {
		n.hasPred = false
	}
	if had && len(n.succ) == 0 {
		// Every successor failed: fall back on the nearest finger, else
		// the predecessor, else alone; stabilise repairs the rest.
		self := n.cfg.Self.ID
		best, ok := Peer{}, false
		for i := range n.finger {
			if f := n.finger[i]; n.hasFinger[i] && f.ID != self && (!ok || f.ID-self < best.ID-self) {
				best, ok = f, true
			}
		}
		switch {
		case ok:
			n.succ = []Peer{best}
		case n.hasPred:
			n.succ = []Peer{n.pred}
		case len(n.contacts) > 0:
			n.succ = nil // cut off: Tick joins again through the contacts
		default:
			n.succ = []Peer{n.cfg.Self}
		}
	}
}

// Leave returns the messages of a graceful departure: the successor gets
// this node's predecessor, the predecessor its successors.
func (n *Node) Leave() []Msg {
	var out []Msg
	if len(n.succ) > 0 && n.succ[0].ID != n.cfg.Self.ID {
		out = append(out, Msg{Kind: KindLeave, From: n.cfg.Self, To: n.succ[0], HasPred: n.hasPred, Pred: n.pred})
	}
	if n.hasPred && n.pred.ID != n.cfg.Self.ID {
		out = append(out, Msg{Kind: KindLeave, From: n.cfg.Self, To: n.pred, Succs: n.succ})
	}
	return out
}

// Next returns the earliest time Tick has something to do.
func (n *Node) Next() time.Time {
	t := n.stabDue
	for _, d := range []time.Time{n.fixDue, n.predDue} {
		if d.Before(t) {
			t = d
		}
	}
	for _, r := range n.reqs {
		if r.deadline.Before(t) {
			t = r.deadline
		}
	}
	return t
}

// Tick runs what is due at now: request timeouts, stabilise, fix-fingers
// and check-predecessor.
func (n *Node) Tick(now time.Time) []Msg {
	var out []Msg
	for id, r := range n.reqs {
		if now.Before(r.deadline) {
			continue
		}
		delete(n.reqs, id)
		n.stats.Timeouts++
		if r.to.ID != n.cfg.Self.ID {
			n.suspect[r.to.ID] = now
			n.stats.Suspected++
			n.forget(r.to.ID)
		}
		if l := r.lookup; l != nil {
			if l.purpose == forJoin && !n.Joined() {
				// A joiner has no table to route round a failure: ask
				// its contact again, which will have repaired its own;
				// if the contact itself is silent, give up.
				if r.to.ID == n.contacts[0].ID {
					n.contacts = append(n.contacts[1:], n.contacts[0])
					if n.tries++; n.tries >= len(n.contacts) {
						n.joinFailed = true
						continue
					}
				}
				l.cur, l.hops = n.contacts[0], 0 // the contact repairs its tables meanwhile
				out = append(out, n.ask(now, l)...)
				continue
			}
			l.cur = n.cfg.Self // route round the failed node
			out = append(out, n.step(now, l)...)
		}
	}
	for id, t := range n.suspect {
		if now.Sub(t) > 4*n.cfg.Stabilise {
			delete(n.suspect, id)
		}
	}
	if !n.Joined() && !n.joinFailed && !n.joining() && len(n.contacts) > 0 {
		out = append(out, n.ask(now, &lookup{key: n.cfg.Self.ID, purpose: forJoin, cur: n.contacts[0]})...)
	}
	if !n.Joined() {
		n.stabDue, n.fixDue, n.predDue = now.Add(n.cfg.Stabilise), now.Add(n.cfg.FixFingers), now.Add(n.cfg.CheckPredecessor)
		return out
	}
	if !now.Before(n.stabDue) {
		n.stabDue = now.Add(n.cfg.Stabilise)
		if s := n.succ[0]; s.ID != n.cfg.Self.ID {
			if !n.pending(forStabilise) { // one at a time, so that a silent successor times out
				out = append(out, n.getState(now, s))
			}
		} else if n.hasPred {
			n.succ = []Peer{n.pred}
		}
	}
	if !now.Before(n.fixDue) {
		n.fixDue = now.Add(n.cfg.FixFingers)
		out = append(out, n.fixFinger(now)...)
	}
	if !now.Before(n.predDue) {
		n.predDue = now.Add(n.cfg.CheckPredecessor)
		if n.hasPred {
			n.seq++
			n.reqs[n.seq] = &request{to: n.pred, deadline: now.Add(n.cfg.Timeout), purpose: forPing}
			out = append(out, Msg{Kind: KindPing, From: n.cfg.Self, To: n.pred, Req: n.seq})
		}
	}
	return out
}

func (n *Node) getState(now time.Time, s Peer) Msg {
	n.seq++
	n.reqs[n.seq] = &request{to: s, deadline: now.Add(n.cfg.Timeout), purpose: forStabilise}
	return Msg{Kind: KindGetState, From: n.cfg.Self, To: s, Req: n.seq}
}

// fixFinger refreshes the next finger whose start is beyond the successor
// (those before it are the successor, set without a message).
func (n *Node) fixFinger(now time.Time) []Msg {
	self := n.cfg.Self.ID
	for range Bits {
		i := n.next
		n.next = (n.next + 1) % Bits
		start := self + ID(1)<<i
		if betweenIncl(self, start, n.succ[0].ID) || n.succ[0].ID == self {
			n.finger[i], n.hasFinger[i] = n.succ[0], true
			continue
		}
		l := &lookup{key: start, purpose: forFinger, finger: i, cur: n.cfg.Self}
		return n.step(now, l)
	}
	return nil
}
