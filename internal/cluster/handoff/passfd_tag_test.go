package handoff

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"shoal/internal/testutil"

	"golang.org/x/sys/unix"
)

func TestTableAndNotesRoundTrip(t *testing.T) {
	var b []byte
	b = AppendTable(b, TableReset, 0, "")
	b = AppendTable(b, TablePeer, 2, "/tmp/x/n2.sock")
	b = AppendTable(b, TableFull, 1, "1")
	b = AppendTable(b, TableTag, -1, "/gone")
	b = AppendTable(b, TableTag, 3, "/a/b.html")
	var got []string
	err := ParseTable(b, func(op uint8, node int, text []byte) {
		got = append(got, string(rune('0'+op))+" "+string(rune('0'+node+1))+" "+string(text))
	})
	want := []string{"1 1 ", "2 3 /tmp/x/n2.sock", "3 2 1", "4 0 /gone", "4 4 /a/b.html"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseTable = %q, %v; want %q", got, err, want)
	}
	if err := ParseTable(b[:len(b)-1], func(uint8, int, []byte) {}); err == nil {
		t.Error("a truncated table parsed")
	}
	if err := ParseTable([]byte{9, 0, 0, 0, 0}, func(uint8, int, []byte) {}); err == nil {
		t.Error("an unknown table op parsed")
	}
	var n []byte
	n = AppendNote(n, NoteServed, 1, 4, 99, "/a")
	n = AppendNote(n, NoteMoved, 2, 5, 99, "/b")
	n = AppendNote(n, NoteEnded, -1, 5, 99, "")
	var notes []Note
	if err := ParseNotes(n, func(x Note) { x.URL = slices.Clone(x.URL); notes = append(notes, x) }); err != nil {
		t.Fatal(err)
	}
	wantN := []Note{{NoteServed, 1, 4, 99, []byte("/a")}, {NoteMoved, 2, 5, 99, []byte("/b")}, {NoteEnded, -1, 5, 99, []byte{}}}
	if len(notes) != 3 {
		t.Fatalf("notes %+v", notes)
	}
	for i := range notes {
		if notes[i].Op != wantN[i].Op || notes[i].Node != wantN[i].Node || notes[i].Seq != wantN[i].Seq ||
			notes[i].Conn != wantN[i].Conn || !bytes.Equal(notes[i].URL, wantN[i].URL) {
			t.Errorf("note %d = %+v, want %+v", i, notes[i], wantN[i])
		}
	}
	if err := ParseNotes(n[:len(n)-3], func(Note) {}); err == nil {
		t.Error("truncated notes parsed")
	}
}

// tagFront is a test front: a client of node sockets that records what
// comes back.
type tagFront struct {
	t       *testing.T
	mu      sync.Mutex
	notes   []Note
	returns chan FDMessage
}

func (f *tagFront) client(path string) *FDClient {
	return NewFDClient(FDClientConfig{Path: path,
		OnReturn: func(r FDMessage) { f.returns <- r },
		OnNotes: func(_ FDHeader, data []byte) {
			f.mu.Lock()
			defer f.mu.Unlock()
			ParseNotes(data, func(n Note) { n.URL = slices.Clone(n.URL); f.notes = append(f.notes, n) })
		}})
}

func (f *tagFront) waitNote(op uint8) Note {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		for _, n := range f.notes {
			if n.Op == op {
				f.mu.Unlock()
				return n
			}
		}
		f.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	f.t.Fatalf("no note of op %d; have %+v", op, f.notes)
	return Note{}
}

// tagSetup starts node A (index 0) on a handoff socket, tells it the table
// (peer 1 at peerSock, "/x" → node 1) as a front would, and hands it a live
// client connection in tag mode with "GET /a" already read. It returns the
// front, A's listener, A's side of the connection and the client's end.
func tagSetup(t *testing.T, dir, peerSock string) (*tagFront, *FDListener, *FDConn, net.Conn) {
	t.Helper()
	a, err := ListenFD(filepath.Join(dir, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	f := &tagFront{t: t, returns: make(chan FDMessage, 4)}
	fa := f.client(a.Path())
	t.Cleanup(func() { fa.Close() })
	var tbl []byte
	tbl = AppendTable(tbl, TablePeer, 1, peerSock)
	tbl = AppendTable(tbl, TableTag, 1, "/x")
	tbl = AppendTable(tbl, TableTag, 0, "/a")
	if err := fa.SendMsg(FDHeader{Kind: FDTable, Node: 0}, tbl); err != nil {
		t.Fatal(err)
	}
	client, server := testutil.TCPPair(t)
	h := FDHeader{Kind: FDHandoff, Flags: FDFlagTag, Node: 0, Moves: 1, Conn: 7}
	if err := fa.Send(h, server, []byte("GET /a HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	server.Close()
	nc, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*FDConn)
	if !c.TagMode() || c.Self() != 0 || c.Route("/a") != 0 || c.Route("/x") != 1 || c.Route("/unknown") != -1 {
		t.Fatalf("tag mode %v self %d routes /a %d /x %d /unknown %d", c.TagMode(), c.Self(), c.Route("/a"), c.Route("/x"),
			c.Route("/unknown"))
	}
	return f, a, c, client
}

// echoThrough writes msg on the client end and expects it to arrive on the
// other end, proving both are one live connection.
func echoThrough(t *testing.T, client, other net.Conn) {
	t.Helper()
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	other.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 4)
	if _, err := io.ReadFull(other, b); err != nil || string(b) != "ping" {
		t.Fatalf("read %q, %v through the moved connection", b, err)
	}
}

// TestTagMove: node A moves a connection to node B by the table; B gets it
// with the bytes, acknowledges, and A tells the front in a note.
func TestTagMove(t *testing.T) {
	dir := shortTempDir(t)
	b, err := ListenFD(filepath.Join(dir, "b.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f, a, c, client := tagSetup(t, dir, b.Path())
	c.Served("/a")
	if err := c.MoveTo(1, "/x", []byte("GET /x HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.Conn.Close()
	nc, err := b.Accept()
	if err != nil {
		t.Fatal(err)
	}
	moved := nc.(*FDConn)
	if !moved.TagMode() || moved.Header.Moves != 2 || moved.Header.Conn != 7 || string(moved.Preread()) != "GET /x HTTP/1.1\r\n\r\n" {
		t.Fatalf("moved connection: tag %v header %+v preread %q", moved.TagMode(), moved.Header, moved.Preread())
	}
	echoThrough(t, client, moved.Conn)
	n := f.waitNote(NoteMoved)
	if n.Node != 1 || n.Seq != 2 || n.Conn != 7 || string(n.URL) != "/x" {
		t.Errorf("move note %+v", n)
	}
	if s := f.waitNote(NoteServed); s.Node != 0 || s.Seq != 1 || string(s.URL) != "/a" {
		t.Errorf("served note %+v", s)
	}
	if st := a.Stats(); st.Moved != 1 || st.Rerouted != 0 {
		t.Errorf("A's stats %+v", st)
	}
	// B did not hear from the front yet, so it learned its index from the
	// move; its end note goes nowhere (no front), which it counts as nothing
	// sent.
	if moved.Self() != 1 {
		t.Errorf("B's index %d, want 1", moved.Self())
	}
}

// TestTagMoveRefused: the receiver knows it is not the node the sender's
// table names (a stale table): it refuses, and the sender hands the
// connection to the front with the bytes.
func TestTagMoveRefused(t *testing.T) {
	dir := shortTempDir(t)
	b, err := ListenFD(filepath.Join(dir, "b.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fb := NewFDClient(FDClientConfig{Path: b.Path()})
	defer fb.Close()
	if err := fb.SendMsg(FDHeader{Kind: FDTable, Node: 2}, nil); err != nil { // B is node 2
		t.Fatal(err)
	}
	waitFor(t, func() bool { return b.tag.selfIndex() == 2 })
	f, a, c, client := tagSetup(t, dir, b.Path())
	if err := c.MoveTo(1, "/x", []byte("GET /x HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.Conn.Close()
	r := recvReturn(t, f)
	if r.Header.Moves != 3 || r.Header.Node != 0 || string(r.Data) != "GET /x HTTP/1.1\r\n\r\n" {
		t.Fatalf("returned %+v %q", r.Header, r.Data)
	}
	echoThrough(t, client, r.Conn)
	waitFor(t, func() bool { return a.Stats().Rerouted == 1 })
	if st, sb := a.Stats(), b.Stats(); st.Rerouted != 1 || sb.Refused != 1 || sb.Received != 0 {
		t.Errorf("A %+v, B %+v", st, sb)
	}
}

// TestTagMoveReceiverDies: the receiver takes the message and dies before
// acknowledging it (the kernel closes the descriptor it held); the sender's
// copy keeps the client's connection open and goes to the front.
func TestTagMoveReceiverDies(t *testing.T) {
	path, ul := packetListener(t, "b.sock")
	go func() { // a node that reads one move and dies
		uc, err := ul.AcceptUnix()
		if err != nil {
			return
		}
		buf := make([]byte, FDHeaderLen+FDMaxData)
		if m, err := RecvRawFD(uc, buf); err == nil && m.FD >= 0 {
			unix.Close(m.FD)
		}
		uc.Close()
	}()
	f, a, c, client := tagSetup(t, filepath.Dir(path), path)
	if err := c.MoveTo(1, "/x", []byte("GET /x HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.Conn.Close()
	r := recvReturn(t, f)
	if r.Header.Moves != 3 || string(r.Data) != "GET /x HTTP/1.1\r\n\r\n" {
		t.Fatalf("returned %+v %q", r.Header, r.Data)
	}
	echoThrough(t, client, r.Conn)
	waitFor(t, func() bool { return a.Stats().Rerouted == 1 }) // counted after the send
	if st := a.Stats(); st.MoveLost != 0 {
		t.Errorf("A's stats %+v", st)
	}
}

func recvReturn(t *testing.T, f *tagFront) FDMessage {
	t.Helper()
	select {
	case r := <-f.returns:
		t.Cleanup(func() { r.Conn.Close() })
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the connection did not come back to the front")
	}
	return FDMessage{}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// shortTempDir is a folder for sockets (paths are limited to 107 bytes).
// packetListener listens on a unixpacket socket name in a short temporary
// folder, closed when the test ends, as a node's handoff socket does.
func packetListener(t *testing.T, name string) (string, *net.UnixListener) {
	t.Helper()
	path := filepath.Join(shortTempDir(t), name)
	ul, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ul.Close() })
	return path, ul
}

func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shoal-tag-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestPolledClient: a client made with PolledReads hands what the node sent
// back to its callbacks only in Poll, in order, and reads everything the
// node sent before its end of the socket closed before it calls
// OnDisconnect (an acknowledgement queued by a node that died after it
// still settles its move).
func TestPolledClient(t *testing.T) {
	path, ul := packetListener(t, "n.sock")
	acked, closeNode := make(chan struct{}), make(chan struct{})
	go func() { // a node that acknowledges two messages, then goes away
		uc, err := ul.AcceptUnix()
		if err != nil {
			return
		}
		defer uc.Close()
		buf := make([]byte, FDHeaderLen+FDMaxData)
		for i := range 2 {
			if _, err := RecvRawFD(uc, buf); err != nil {
				return
			}
			SendFD(uc, FDHeader{Kind: FDAck, Conn: uint64(i + 1)}, nil, 0, nil)
		}
		close(acked)
		<-closeNode
	}()
	var got []uint64
	disconnects := 0
	c := NewFDClient(FDClientConfig{Path: path, PolledReads: true,
		OnAck:        func(h FDHeader) { got = append(got, h.Conn) },
		OnDisconnect: func() { disconnects++ }})
	defer c.Close()
	for range 2 {
		if err := c.SendMsg(FDHeader{Kind: FDTable}, nil); err != nil {
			t.Fatal(err)
		}
	}
	<-acked
	if len(got) != 0 {
		t.Fatalf("acknowledgements %v handed over before Poll", got)
	}
	c.Poll()
	if !slices.Equal(got, []uint64{1, 2}) || disconnects != 0 {
		t.Fatalf("after Poll: acknowledgements %v, disconnects %d; want [1 2], 0", got, disconnects)
	}
	c.Poll() // nothing new
	close(closeNode)
	waitFor(t, func() bool { c.Poll(); return disconnects > 0 })
	if !slices.Equal(got, []uint64{1, 2}) || disconnects != 1 {
		t.Fatalf("after the node closed: acknowledgements %v, disconnects %d; want [1 2], 1", got, disconnects)
	}
}

// TestPolledClientSendToDeadNode: a send that fails because the node went
// away settles what the node had acknowledged first, then reports the
// disconnect once, as the reader goroutine of an unpolled client would.
func TestPolledClientSendToDeadNode(t *testing.T) {
	path, ul := packetListener(t, "n.sock")
	gone := make(chan struct{})
	go func() { // a node that acknowledges one message and dies
		defer close(gone)
		uc, err := ul.AcceptUnix()
		if err != nil {
			return
		}
		buf := make([]byte, FDHeaderLen+FDMaxData)
		if _, err := RecvRawFD(uc, buf); err == nil {
			SendFD(uc, FDHeader{Kind: FDAck, Conn: 1}, nil, 0, nil)
		}
		uc.Close()
	}()
	var got []uint64
	disconnects := 0
	c := NewFDClient(FDClientConfig{Path: path, PolledReads: true,
		OnAck:        func(h FDHeader) { got = append(got, h.Conn) },
		OnDisconnect: func() { disconnects++ }})
	defer c.Close()
	if err := c.SendMsg(FDHeader{Kind: FDTable}, nil); err != nil {
		t.Fatal(err)
	}
	<-gone
	ul.Close() // no redial either
	for i := 0; i < 100 && disconnects == 0; i++ {
		c.SendMsg(FDHeader{Kind: FDTable}, nil) // EPIPE once the close is seen
		time.Sleep(5 * time.Millisecond)
	}
	if !slices.Equal(got, []uint64{1}) || disconnects != 1 {
		t.Fatalf("after sends to a dead node: acknowledgements %v, disconnects %d; want [1], 1", got, disconnects)
	}
}

// TestTagRouteRoom: a node told the front has room for two connections
// hands back (route -1) the next two requests it would have moved to
// another node, never one it serves itself, then moves again; a new
// TableRoom replaces what is left.
func TestTagRouteRoom(t *testing.T) {
	r := &tagRouter{self: -1, table: map[string]int32{}, peers: map[int]string{}}
	room := func(n uint32) []byte {
		return AppendTable(nil, TableRoom, 0, string(binary.BigEndian.AppendUint32(nil, n)))
	}
	var b []byte
	b = AppendTable(b, TablePeer, 0, "/s/n0.sock")
	b = AppendTable(b, TablePeer, 1, "/s/n1.sock")
	b = AppendTable(b, TableTag, 0, "/here")
	b = AppendTable(b, TableTag, 1, "/there")
	if err := r.applyTable(nil, FDHeader{Node: 0}, append(b, room(2)...)); err != nil {
		t.Fatal(err)
	}
	got := []int{r.route("/here"), r.route("/there"), r.route("/here"), r.route("/there"), r.route("/there")}
	if want := []int{0, -1, 0, -1, 1}; !slices.Equal(got, want) {
		t.Fatalf("routes with room 2 = %v, want %v", got, want)
	}
	if err := r.applyTable(nil, FDHeader{Node: 0}, room(1)); err != nil {
		t.Fatal(err)
	}
	if err := r.applyTable(nil, FDHeader{Node: 0}, room(0)); err != nil {
		t.Fatal(err)
	}
	if got := r.route("/there"); got != 1 {
		t.Fatalf("route after room 0 = %d, want 1", got)
	}
}
