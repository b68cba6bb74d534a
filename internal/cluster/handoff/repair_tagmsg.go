//go:build linux

package handoff

import (
	"encoding/binary"
	"fmt"
)

// Tag mode across hosts: the repair path's messages for seed 000's TB-CCRD
// (§2.2.2), in which the node holding a connection hands it straight to the
// node the front's URL table names. They travel in the same sealed frames
// as the handoff itself (repair_msg.go), on the front's channels and on
// node-to-node channels (a node dials another node's handoff port as the
// front does):
//
//	front ──MsgTable (this node's index, peers' handoff ports, load flags, URL → node)──▶ node
//	front ──MsgTagHandoff (seq 0)──▶ node A
//	node A, a request the table gives node B:
//	    A holds the flow (Guard.Hold), freezes the socket,
//	    A ──MsgTagHandoff (seq n+1, the same sealed state)──▶ B
//	    B rebuilds, B ──MsgHandoffAck──▶ A
//	    B ──MsgFlowMoved (batched ≤ 20 ms)──▶ front, which steers the flow to B
//	    A's guard forwards to B whatever segments of the flow still reach A
//	    until the front's map follows; A drops its frozen copy silently,
//	    A ──MsgForwarding──▶ B, which only now serves the connection
//	B dies before its MsgFlowMoved left (A's channel to B breaks):
//	    A ──MsgFlowLeft (batched)──▶ front, which unsteers the flow unless
//	    a later move of it arrives within LeftGrace
//	node A, a request the table gives A: serve it, MsgNotes "served" (batched)
//	node A, a URL the table cannot tell: A ──MsgAsk──▶ front ──MsgAnswer──▶ A (the front picks)
//
// The frame's per-node key names the sender of every message to the front
// (the channel's node), so a MsgFlowMoved can only steer a flow to the node
// that sent it; the front applies it only to a flow it moved (the
// incarnation tag of its own handoff) and only if its move count is newer
// than the last it applied. Holding the cluster key is what lets a node
// move connections at all: see docs/security.md.
const (
	// MsgTagHandoff (to a node) is MsgHandoff in tag mode: id, the tag
	// header (AppendTagHandoff) and the state.
	MsgTagHandoff MsgKind = 6
	// MsgTable (front → node): the receiver's index (int32) and table
	// records (AppendTable; TablePeer's text is the node's handoff port).
	MsgTable MsgKind = 7
	// MsgFlowMoved (node → front): the sender took over flows from other
	// nodes (records of flow and TagMove, batched like notes: the old
	// holder forwards the flow meanwhile); the front steers them to it.
	MsgFlowMoved MsgKind = 8
	// MsgNotes (node → front): note records (AppendNote), NoteServed only.
	MsgNotes MsgKind = 9
	// MsgAsk (node → front): ask id, connection id and URL; the front
	// picks a node for the request and answers with MsgAnswer (ask id,
	// int32 node, -1 for none).
	MsgAsk    MsgKind = 10
	MsgAnswer MsgKind = 11
	// MsgForwarding (old holder → new holder, after the acknowledgement):
	// the flow and the move count. The old holder's guard now forwards
	// the flow's segments to the new holder, so the new holder may answer:
	// the client's next request, sent as soon as it has the answer, reaches
	// it even if the front's flow map has not followed yet. Answering
	// earlier let that request reach the old node while it still held the
	// flow, where it waited for a retransmission (200 ms).
	MsgForwarding MsgKind = 12
	// MsgFlowLeft (node → front): records of flow, incarnation and move
	// count (AppendFlowLeft) for flows the sender moved away whose new
	// holder may never report them: its channel broke before or after the
	// acknowledgement (most likely the node died, and its batched
	// MsgFlowMoved with it). The front unsteers such a flow if, after
	// RepairMoverConfig.LeftGrace, its map still names the sender with an
	// older move count (no later move came): the connection is gone, and
	// without this its entry would stay for ever.
	MsgFlowLeft MsgKind = 13
)

// flowLeftLen is one MsgFlowLeft record: flow, incarnation, move count.
const flowLeftLen = 12 + 4 + 4

// AppendFlowLeft appends one MsgFlowLeft record: flow f of incarnation inc
// left the sender with move seq (the move count of the move away).
func AppendFlowLeft(b []byte, f Flow, inc, seq uint32) []byte {
	b = binary.BigEndian.AppendUint32(f.AppendBinary(b), inc)
	return binary.BigEndian.AppendUint32(b, seq)
}

// ParseFlowLeft decodes the first MsgFlowLeft record of b and returns the
// rest.
func ParseFlowLeft(b []byte) (f Flow, inc, seq uint32, rest []byte, err error) {
	if len(b) < flowLeftLen {
		return Flow{}, 0, 0, nil, fmt.Errorf("%w: flow left record of %d bytes", ErrMalformed, len(b))
	}
	if f, err = UnmarshalFlow(b); err != nil {
		return Flow{}, 0, 0, nil, err
	}
	return f, binary.BigEndian.Uint32(b[12:]), binary.BigEndian.Uint32(b[16:]), b[flowLeftLen:], nil
}

// AppendForwarding appends a MsgForwarding payload.
func AppendForwarding(b []byte, f Flow, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(f.AppendBinary(b), seq)
}

// ParseForwarding decodes a MsgForwarding payload.
func ParseForwarding(b []byte) (Flow, uint32, error) {
	f, err := UnmarshalFlow(b)
	if err != nil || len(b) < 16 {
		return Flow{}, 0, fmt.Errorf("%w: forwarding of %d bytes", ErrMalformed, len(b))
	}
	return f, binary.BigEndian.Uint32(b[12:]), nil
}

// TagMove is what a tag-mode handoff says beyond the state, and what the new
// holder repeats to the front in MsgFlowMoved.
type TagMove struct {
	// Conn is the front's connection id; Seq the connection's move count
	// after this move (0: the front's own handoff); Inc the incarnation
	// tag the front gave the flow (the RcvSeq of its handoff), which stays
	// the same across node moves and names the flow in FIN-HANDOFF.
	Conn     uint64
	Seq, Inc uint32
	// Node is the receiver's index in the front's cluster.
	Node int
	// Counted: the front already accounted the request (it answered an
	// ask for it), so MsgFlowMoved must not count it again.
	Counted bool
	// URL is the request's content key that caused the move.
	URL string
}

// tagMoveFixed is a TagMove's fixed part: conn, seq, inc, node, flags, URL
// length.
const tagMoveFixed = 8 + 4 + 4 + 4 + 1 + 2

// AppendBinary appends t's encoding.
func (t TagMove) AppendBinary(b []byte) []byte {
	url := t.URL
	if len(url) > maxTagText {
		url = url[:maxTagText]
	}
	b = binary.BigEndian.AppendUint64(b, t.Conn)
	b = binary.BigEndian.AppendUint32(b, t.Seq)
	b = binary.BigEndian.AppendUint32(b, t.Inc)
	b = binary.BigEndian.AppendUint32(b, uint32(int32(t.Node)))
	var fl byte
	if t.Counted {
		fl = 1
	}
	b = append(b, fl)
	b = binary.BigEndian.AppendUint16(b, uint16(len(url)))
	return append(b, url...)
}

// UnmarshalTagMove decodes a TagMove at the start of b and returns the rest.
func UnmarshalTagMove(b []byte) (TagMove, []byte, error) {
	if len(b) < tagMoveFixed {
		return TagMove{}, nil, fmt.Errorf("%w: tag move of %d bytes", ErrMalformed, len(b))
	}
	t := TagMove{Conn: binary.BigEndian.Uint64(b), Seq: binary.BigEndian.Uint32(b[8:]), Inc: binary.BigEndian.Uint32(b[12:]),
		Node: int(int32(binary.BigEndian.Uint32(b[16:]))), Counted: b[20]&1 != 0}
	n := int(binary.BigEndian.Uint16(b[21:]))
	if n > maxTagText || len(b) < tagMoveFixed+n {
		return TagMove{}, nil, fmt.Errorf("%w: tag move URL of %d bytes", ErrMalformed, n)
	}
	t.URL = string(b[tagMoveFixed : tagMoveFixed+n])
	return t, b[tagMoveFixed+n:], nil
}

// AppendFlowMoved appends one MsgFlowMoved record: the flow, then the
// move. A MsgFlowMoved carries one or more records.
func AppendFlowMoved(b []byte, f Flow, t TagMove) []byte {
	return t.AppendBinary(f.AppendBinary(b))
}

// ParseFlowMoved decodes the first record of a MsgFlowMoved payload.
func ParseFlowMoved(b []byte) (Flow, TagMove, error) {
	f, t, _, err := parseFlowMoved(b)
	return f, t, err
}

// parseFlowMoved decodes one record and returns the rest.
func parseFlowMoved(b []byte) (Flow, TagMove, []byte, error) {
	f, err := UnmarshalFlow(b)
	if err != nil {
		return Flow{}, TagMove{}, nil, err
	}
	t, rest, err := UnmarshalTagMove(b[12:])
	return f, t, rest, err
}

// AppendAsk appends a MsgAsk payload.
func AppendAsk(b []byte, id, conn uint64, url string) []byte {
	if len(url) > maxTagText {
		url = url[:maxTagText]
	}
	b = binary.BigEndian.AppendUint64(b, id)
	b = binary.BigEndian.AppendUint64(b, conn)
	return append(b, url...)
}

// ParseAsk decodes a MsgAsk payload; url aliases b.
func ParseAsk(b []byte) (id, conn uint64, url []byte, err error) {
	if len(b) < 16 || len(b) > 16+maxTagText {
		return 0, 0, nil, fmt.Errorf("%w: ask of %d bytes", ErrMalformed, len(b))
	}
	return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), b[16:], nil
}

// AppendAnswer appends a MsgAnswer payload.
func AppendAnswer(b []byte, id uint64, node int) []byte {
	b = binary.BigEndian.AppendUint64(b, id)
	return binary.BigEndian.AppendUint32(b, uint32(int32(node)))
}

// AppendTableMsg appends a MsgTable payload's head: the receiver's index.
// Table records (AppendTable) follow.
func AppendTableMsg(b []byte, self int) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(int32(self)))
}
