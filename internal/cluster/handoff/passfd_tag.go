package handoff

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Tag mode: the same-host half of seed 000's TB-CCRD (§2.2.2). There the
// front tags every URL request with the back-end that caches the URL and the
// back-end holding the connection hands it straight to that one; the front
// never answers and never takes a connection back. shoal's passfd front
// cannot see the requests that follow on a connection it passed, so it
// shares the part of its URL table whose answer does not depend on the
// connection (policy.Tagger) with the nodes, and the nodes do the tagging:
//
//	front ──FDTable (peers' sockets, load flags, URL → node)──▶ every node
//	front ──FDHandoff+FDFlagTag──▶ node A
//	node A, next request for a URL the table gives node B:
//	    A ──FDMove (descriptor + bytes read)──▶ B ──FDAck──▶ A
//	    A ──FDNote (batched: moved to B, seq, URL)──▶ front
//	node A, a URL the table gives A: serve it, FDNote "served"
//	node A, a URL the table cannot tell: FDReturn to the front, which picks
//	    (and pushes the URL's entry, so A asks once per URL)
//
// A move's sender keeps a duplicate of the descriptor until the receiver
// acknowledges it, so a receiver that dies mid-move (its queued descriptor
// closed by the kernel) loses nothing: the sender hands the connection and
// its bytes back to the front instead. Notes are authenticated by the
// channel they come on: the front dialled that socket after checking it
// (SocketTrust: inside the handoff folder, served by the expected user), so
// it knows which node speaks, and it applies a note only to a connection
// its table holds, only if the note's sequence number (FDHeader.Moves, one
// more per move) is not older than the one it knows.

// Table operations (FDTable payload): a sequence of records, each an op
// byte, a little-endian int32 node and, for ops with text, a uint16 length
// and the bytes.
const (
	// TableReset: drop every URL entry (node and text unused).
	TableReset uint8 = 1
	// TablePeer: node's handoff socket is the text.
	TablePeer uint8 = 2
	// TableFull: node is at its load limit (text "1") or not (text "").
	TableFull uint8 = 3
	// TableTag: requests for the URL in the text go to node (-1: ask).
	TableTag uint8 = 4
	// TableHolders: the URL in the text is cached by the nodes of the bit
	// set in node (policy.Tag.Holders); the node holding a connection
	// picks the least loaded of them below the load limit. Only the
	// repair path's nodes use it (passfd's ignore it and ask).
	TableHolders uint8 = 5
	// TableLoad: node's open connections are the text (4 bytes, big
	// endian); TableLimit: the load limit is the text (node unused).
	TableLoad  uint8 = 6
	TableLimit uint8 = 7
	// TableRoom: the front has room to relay connections itself (the
	// hybrid rule, seed 002 §3: a front that is not loaded keeps the
	// work): the receiving node hands back, instead of moving to another
	// node, up to the text's count of connections (4 bytes, big endian)
	// until the next TableRoom. Node unused.
	TableRoom uint8 = 8
)

// Note operations (FDNote payload): op byte, int32 node, uint32 seq, uint64
// connection id, uint16 URL length and the URL.
const (
	// NoteServed: the sender served a request for URL on the connection
	// itself, by the table.
	NoteServed uint8 = 1
	// NoteMoved: the sender moved the connection to node for a request for
	// URL; seq is the connection's move count after the move.
	NoteMoved uint8 = 2
	// NoteEnded: the connection ended at the sender.
	NoteEnded uint8 = 3
)

// DefaultNoteDelay is how long a node gathers notes before it sends them to
// the front in one FDNote: the front's tables lag the nodes by at most that
// much, and under load one message carries many requests.
const DefaultNoteDelay = 2 * time.Millisecond

// maxTagText bounds the text of one table or note record.
const maxTagText = 8 << 10

// AppendTable appends one table record to dst.
func AppendTable(dst []byte, op uint8, node int, text string) []byte {
	dst = append(dst, op)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(int32(node)))
	if op == TableReset {
		return dst
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(text)))
	return append(dst, text...)
}

// TableRecordLen is the size of a table record with text of n bytes.
func TableRecordLen(n int) int { return 7 + n }

// ParseTable calls f for each record of an FDTable payload; text aliases b.
// Records after a malformed one are not read.
func ParseTable(b []byte, f func(op uint8, node int, text []byte)) error {
	for len(b) > 0 {
		if len(b) < 5 {
			return fmt.Errorf("%w: table record of %d bytes", ErrFDMessage, len(b))
		}
		op, node := b[0], int(int32(binary.LittleEndian.Uint32(b[1:])))
		b = b[5:]
		var text []byte
		switch op {
		case TableReset:
		case TablePeer, TableFull, TableTag, TableHolders, TableLoad, TableLimit, TableRoom:
			if len(b) < 2 {
				return fmt.Errorf("%w: table record without its length", ErrFDMessage)
			}
			n := int(binary.LittleEndian.Uint16(b))
			if n > maxTagText || len(b) < 2+n {
				return fmt.Errorf("%w: table text of %d bytes", ErrFDMessage, n)
			}
			text, b = b[2:2+n], b[2+n:]
		default:
			return fmt.Errorf("%w: table op %d", ErrFDMessage, op)
		}
		f(op, node, text)
	}
	return nil
}

// Note is one record of an FDNote.
type Note struct {
	Op   uint8
	Node int    // NoteMoved: the node the connection went to
	Seq  uint32 // the connection's move count (FDHeader.Moves) after the event
	Conn uint64 // the front's connection id
	URL  []byte // the request's content key (NoteServed, NoteMoved); aliases the payload
}

// noteHead is a note record's fixed part.
const noteHead = 1 + 4 + 4 + 8 + 2

// AppendNote appends one note record to dst; a URL longer than maxTagText
// is cut (the front then accounts a URL it does not know, harmlessly).
func AppendNote(dst []byte, op uint8, node int, seq uint32, conn uint64, url string) []byte {
	if len(url) > maxTagText {
		url = url[:maxTagText]
	}
	dst = append(dst, op)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(int32(node)))
	dst = binary.LittleEndian.AppendUint32(dst, seq)
	dst = binary.LittleEndian.AppendUint64(dst, conn)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(url)))
	return append(dst, url...)
}

// ParseNotes calls f for each record of an FDNote payload.
func ParseNotes(b []byte, f func(n Note)) error {
	for len(b) > 0 {
		if len(b) < noteHead {
			return fmt.Errorf("%w: note of %d bytes", ErrFDMessage, len(b))
		}
		n := Note{Op: b[0], Node: int(int32(binary.LittleEndian.Uint32(b[1:]))), Seq: binary.LittleEndian.Uint32(b[5:]),
			Conn: binary.LittleEndian.Uint64(b[9:])}
		l := int(binary.LittleEndian.Uint16(b[17:]))
		if n.Op < NoteServed || n.Op > NoteEnded || l > maxTagText || len(b) < noteHead+l {
			return fmt.Errorf("%w: note op %d with %d URL bytes", ErrFDMessage, n.Op, l)
		}
		n.URL, b = b[noteHead:noteHead+l], b[noteHead+l:]
		f(n)
	}
	return nil
}
