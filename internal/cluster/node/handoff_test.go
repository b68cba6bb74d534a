package node

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// fakeHanded is a Handed over a real TCP connection, recording what the
// server does with it instead of talking to a front.
type fakeHanded struct {
	net.Conn
	pre      []byte
	oneShot  bool
	failBack bool
	back     chan []byte
	ended    chan struct{}
}

func (f *fakeHanded) NetConn() net.Conn { return f.Conn }
func (f *fakeHanded) Preread() []byte   { return f.pre }
func (f *fakeHanded) OneRequest() bool  { return f.oneShot }
func (f *fakeHanded) HandBack(rest []byte) error {
	if f.failBack {
		return io.ErrClosedPipe
	}
	f.back <- append([]byte(nil), rest...)
	return nil
}
func (f *fakeHanded) Ended() { close(f.ended) }

// handedPair serves a fakeHanded through a listener, as handoff.ListenFD
// would deliver it, and returns the client side.
func handedPair(t *testing.T, f *fakeHanded) (*Server, net.Conn) {
	t.Helper()
	return servePair(t, f, f)
}

// servePair is handedPair serving h, a wrapper of f (tag mode, say).
func servePair(t *testing.T, f *fakeHanded, h net.Conn) (*Server, net.Conn) {
	t.Helper()
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("AAAA"), 0o644)
	os.WriteFile(filepath.Join(root, "b.txt"), []byte("BBBBBBBB"), 0o644)
	s, err := New(Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	client, server := testutil.TCPPair(t)
	f.Conn = server
	f.back, f.ended = make(chan []byte, 1), make(chan struct{})
	one := &oneConnListener{c: h, done: make(chan struct{})}
	go s.Serve(one)
	t.Cleanup(func() {
		client.Close()
		close(one.done)
		s.Shutdown(t.Context())
	})
	client.SetDeadline(time.Now().Add(10 * time.Second))
	return s, client
}

// oneConnListener yields one connection, then blocks until closed.
type oneConnListener struct {
	c    net.Conn
	done chan struct{}
	sent bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.sent {
		l.sent = true
		return l.c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}
func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

func readBody(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

const twoRequests = "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a"

// TestHandedServesAll: the node serves the preread requests and the ones
// that follow on the socket itself, handing nothing back, when the front
// does not ask for one request only (keep) and when it asks but cannot take
// the connection back (back fails).
func TestHandedServesAll(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *fakeHanded
	}{
		{"keep", &fakeHanded{pre: []byte(twoRequests)}},
		{"back fails", &fakeHanded{pre: []byte(twoRequests), oneShot: true, failBack: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := handedPair(t, tc.f)
			io.WriteString(c, ".txt HTTP/1.1\r\nHost: x\r\n\r\n")
			r := bufio.NewReader(c)
			for _, want := range []string{"AAAA", "BBBBBBBB", "AAAA"} {
				if got := readBody(t, r); got != want {
					t.Fatalf("body %q, want %q", got, want)
				}
			}
			select {
			case <-tc.f.back:
				t.Fatal("handed back")
			default:
			}
		})
	}
}

// TestHandedOneRequest: with OneRequest the node answers the first request
// only and hands the connection back with every byte after it.
func TestHandedOneRequest(t *testing.T) {
	f := &fakeHanded{pre: []byte(twoRequests), oneShot: true}
	_, c := handedPair(t, f)
	r := bufio.NewReader(c)
	if got := readBody(t, r); got != "AAAA" {
		t.Fatalf("body %q", got)
	}
	select {
	case rest := <-f.back:
		if want := twoRequests[len("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"):]; string(rest) != want {
			t.Fatalf("handed back %q, want %q", rest, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not handed back")
	}
	// The node closed its copy without writing more; Ended is not sent
	// after a hand-back.
	select {
	case <-f.ended:
		t.Fatal("Ended after HandBack")
	case <-time.After(50 * time.Millisecond):
	}
}

// TestHandedWaitsForNext: after its one request the node waits for the
// next request's bytes before handing back; a client that closes instead
// ends the connection at the node, which says so (Ended).
func TestHandedWaitsForNext(t *testing.T) {
	f := &fakeHanded{pre: []byte("GET /b.txt HTTP/1.1\r\nHost: x\r\n\r\n"), oneShot: true}
	_, c := handedPair(t, f)
	r := bufio.NewReader(c)
	if got := readBody(t, r); got != "BBBBBBBB" {
		t.Fatalf("body %q", got)
	}
	io.WriteString(c, "GET /a.txt HTT")
	select {
	case rest := <-f.back:
		if string(rest) != "GET /a.txt HTT" {
			t.Fatalf("handed back %q", rest)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not handed back")
	}

	g := &fakeHanded{pre: []byte("GET /b.txt HTTP/1.1\r\nHost: x\r\n\r\n"), oneShot: true}
	_, c2 := handedPair(t, g)
	readBody(t, bufio.NewReader(c2))
	c2.Close()
	select {
	case <-g.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Ended not called")
	}
}

// TestServeConn serves a connection with preread bytes directly.
func TestServeConn(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("AAAA"), 0o644)
	s, err := New(Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(t.Context())
	a, b := net.Pipe()
	go s.ServeConn(a, []byte("GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	b.SetDeadline(time.Now().Add(5 * time.Second))
	if got := readBody(t, bufio.NewReader(b)); got != "AAAA" {
		t.Fatalf("body %q", got)
	}
}
