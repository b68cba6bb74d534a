// Package handoff moves accepted client TCP connections from the front-end to
// a node, so that the node answers the client directly and the response bytes
// never pass through the front (SPEC §4; seeds 000 §2.2 and 002). It has two
// transports, one per deployment:
//
//	same host  (passfd)   front ──SCM_RIGHTS over a Unix socket──▶ node
//	across hosts (repair) front ──TCP_REPAIR state, sealed──▶ node (+ per-flow steering)
//
//	          client
//	            │ TCP (one connection, kept end to end)
//	            ▼
//	  ┌──────── front ────────┐  reads the request head, asks the policy,
//	  │ accept, parse, Pick   │  then moves the socket instead of relaying
//	  └──┬─────────────────▲──┘
//	     │ fd + bytes read │ fd + next request (content-aware policies)
//	     ▼                 │
//	   node A ──────────────┘      node A writes the response straight
//	     │                         to the client socket
//	     └────────▶ client
//
// # passfd: same host
//
// The front sends the client socket's descriptor in an SCM_RIGHTS control
// message TOGETHER WITH the bytes it has already read from it (the request
// head and anything pipelined after it) and a fixed 24-byte header (magic
// "shf1", kind, flags, node index, move count, the front's connection id),
// all in ONE sendmsg(2) on a SOCK_SEQPACKET Unix socket. SEQPACKET because it
// is connection-oriented (each side sees the other go away), reliable, and
// keeps record boundaries: one record is one move, so the descriptor can
// never be separated from its bytes or split across reads as on SOCK_STREAM
// (where ancillary data rides on an arbitrary byte of a stream), and a
// connected socket (unlike SOCK_DGRAM) gives the node a way back to the
// front without knowing its address. A send is atomic: nil error means the
// descriptor is queued in the kernel and the sender closes its own copy
// (close(2) of one copy does not end the TCP connection); an error means
// nothing left and the sender still owns the connection, so the front falls
// back to relay for that request. If the node dies with descriptors still
// queued, the kernel closes them and the client sees its connection end.
//
// The node (ListenFD, a net.Listener) reads with recvmsg into a buffer of
// FDHeaderLen+FDMaxData bytes and a control buffer with room for several
// descriptors; a truncated record or control part (MSG_TRUNC, MSG_CTRUNC),
// a malformed header or a move without a descriptor is refused and
// counted, and every descriptor that came with it closed; extra descriptors
// on a good message are closed and counted (no leak, and no client is left
// hanging). The socket file is mode 0600: only the node's user may hand it
// connections. The received descriptor
// (MSG_CMSG_CLOEXEC) is wrapped with net.FileConn and yielded by Accept as an
// *FDConn; the node's server unwraps it, processes Preread first, then reads
// further requests from the socket itself and writes every response to it
// (sendfile included).
//
// Keep-alive after a handoff. The policy lives in the front, so a node cannot
// tell whether the next request on a connection is its own. The design is
// the simplest one that is always correct:
//
//   - content-blind policies (rr, wrr, lc, …): the front hands off without
//     FDFlagReturn and the node keeps and serves the connection to its end,
//     exactly as a client connected to it directly; with FDFlagEnded (the
//     front always sets it) the node reports that end with FDEnded, so the
//     front counts the connection against the node meanwhile, as LVS counts
//     a real server's connections for lc;
//   - content-aware policies (lard, tbccrd, urlhash, weblins, …): the front
//     sets FDFlagReturn; the node serves that one request, then waits for the
//     next one and hands the connection BACK on the same SEQPACKET socket
//     (FDReturn: same one-message format, descriptor + the bytes it read),
//     and the front re-dispatches it — to the same node or to another one:
//     tbccrd's repeated handoffs (seed 000 §2.2). When such a connection ends
//     at the node, the node sends FDEnded (no descriptor) with the front's
//     connection id — seed 002's FIN-HANDOFF — so the front drops it from
//     its connection table;
//   - tag mode (FDFlagTag; passfd_tag.go), under a policy that shares its
//     URL table (tbccrd): the front pushes the table to every node, and the
//     node holding a connection routes each later request by it — serves
//     it, moves the connection straight to the node the table names
//     (FDMove, acknowledged with FDAck), or hands it back when the table
//     cannot tell — and reports what it did in batched FDNote messages:
//     seed 000's handoffs between back-ends, with the front asked only
//     about what it alone can answer.
//
// If a node dies, the kernel closes the descriptors it held or had queued,
// so its clients see a reset or end of file at once; the front sees the
// SEQPACKET connection end, drops the connections it expected back from
// that node from its connection table, and the health check marks the node
// down.
//
// Every move is counted on both sides (FDListener.Stats, and the front's
// handoff counters). A returned connection whose bytes hold a complete head
// costs the front one recvmsg, a head parse, a policy call and one sendmsg
// of the bare descriptor (RecvRawFD, SendRawFD: it is never wrapped in a
// net.Conn) — O(head) rather than O(response) work; a partial head is
// wrapped (WrapFD) and read like a new connection's.
//
// # repair: across hosts
//
// The front and the nodes share a virtual IP held by the nodes on a
// non-ARPing interface (as LVS direct routing). The front accepts, reads the
// head, freezes the socket with TCP_REPAIR and sends its full state
// (4-tuple, sequence numbers, window, MSS, window scale, timestamps, SACK,
// unread and unsent data) to the node in one AES-GCM-sealed message (per-node key); it
// then steers the flow's later packets to the node in the kernel and closes
// its copy silently. The node rebuilds the socket in repair mode and replies
// from the virtual IP straight to the client; at the end it tells the front
// to drop the flow. Forged, replayed or stale messages are refused and
// counted. See repair*.go, steer*.go, guard.go and lab*.go (the
// network-namespace test topology).
//
// Tag mode across hosts (repair_tagmsg.go, repair_tag.go,
// repair_tagconn.go): under tbccrd the front also pushes its URL table to
// the nodes, and the node holding a connection moves it to the node the
// table names with the same sealed state message, node to node; the old
// holder's guard holds the flow while it freezes and then forwards it to
// the new holder until the front's flow map follows the new holder's
// batched report.
//
// RepairMover is the one implementation of those front-side steps (the HTTP
// front and internal/cluster/l4 both use it). While a flow moves, the client may
// still send: the rest of a request of several segments, pipelined
// requests, and the ACKs of the node's first answer bytes. Seed 002's
// front-end keeps forwarding a migrated connection's packets to its new
// server and relies on TCP to retransmit what the server was not ready
// for; shoal does the same, and makes "not ready" mean a drop instead of a
// reset: each node attaches a Guard (a TCX ingress program) that drops a
// segment to its virtual IP when no connection matches it, where the
// kernel would reset the client. A node tells the front whether it guards
// the front's VIP when the control channel opens (MsgHello) and in each
// acknowledgement; the mover then steers the flow to the node BEFORE it
// freezes the socket, so nothing lands in the frozen copy, early segments
// are retransmitted to the rebuilt socket, and the answer's ACKs reach the
// node at once. Only towards a node that cannot guard (no CAP_BPF, no TCX)
// does the mover hold the flow at the front (Steer.Hold, eBPF) until the
// node has acknowledged, which is safe but drops the client's early ACKs:
// an answer that fits in one window then waits for the node's
// retransmission timer (about 1 s for a rebuilt socket, which has no RTT
// estimate). Holding the flow for the whole move, rather than steering
// early, was the alternative; it costs every large answer that second.
package handoff

// DefaultRepairMaxConns is the default bound on a node's handoff-port
// control connections (RepairListenerConfig.MaxConns): one per front, with
// room for reconnects and a few fronts.
const DefaultRepairMaxConns = 16
