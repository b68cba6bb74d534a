package front

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/cluster/policy"
	"shoal/internal/testutil"
)

// echoAnswer writes the answer a shoal node would: the path as the body,
// the request's token echoed.
func echoAnswer(w io.Writer, req *http.Request) {
	body := req.URL.Path
	fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nShoal-Seq: %s\r\n\r\n%s", len(body), req.Header.Get("Shoal-Seq"), body)
}

// pipeNode is a node that reads every request that arrived together
// (one segment) before answering them, in order or, with reverse, last
// first, and counts the requests that came more than one to a read.
func pipeNode(t *testing.T, reverse bool, together *int64, mu *sync.Mutex) string {
	return rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			reqs := []*http.Request{req}
			for br.Buffered() > 0 {
				if req, err = http.ReadRequest(br); err != nil {
					return
				}
				reqs = append(reqs, req)
			}
			if len(reqs) > 1 {
				mu.Lock()
				*together += int64(len(reqs))
				mu.Unlock()
			}
			out := bufio.NewWriter(c)
			for i := range reqs {
				if reverse {
					i = len(reqs) - 1 - i
				}
				echoAnswer(out, reqs[i])
			}
			if out.Flush() != nil {
				return
			}
		}
	})
}

// burst runs clients keep-alive connections of rounds GETs each over
// paths against addr and returns every answer that was not the request's
// own (status and body) or failed.
func burst(addr string, clients, rounds int, paths []string) []string {
	var mu sync.Mutex
	var wrong []string
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bad := func(s string) { mu.Lock(); wrong = append(wrong, s); mu.Unlock() }
			c, err := net.Dial("tcp", addr)
			if err != nil {
				bad(err.Error())
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(c)
			for j := 0; j < rounds; j++ {
				p := paths[(i*7+j)%len(paths)]
				if _, err := io.WriteString(c, get(p)); err != nil {
					bad(err.Error())
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					bad(err.Error())
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != p || resp.Header.Get("Shoal-Seq") != "" {
					bad(fmt.Sprintf("%s: %d %q", p, resp.StatusCode, body))
				}
			}
		}()
	}
	wg.Wait()
	return wrong
}

func pipePaths(n int) []string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("/p%d", i)
	}
	return paths
}

// pipeBurst starts a front with batching from the first request in front
// of a pipeNode, warms the size table with one request for each of 16
// paths, then runs 32 clients of 50 requests each. It fails the test on a
// wrong answer and returns the front's counters and how many requests
// the node read more than one at a time.
func pipeBurst(t *testing.T, reverse bool) (Stats, int64) {
	var together int64
	var mu sync.Mutex
	node := pipeNode(t, reverse, &together, &mu)
	addr, s, _ := startFront(t, Config{batchMin: 1}, node)
	paths := pipePaths(16)
	if wrong := burst(addr, 1, len(paths), paths); len(wrong) > 0 { // the sizes become known
		t.Fatalf("warm-up: %q", wrong)
	}
	if wrong := burst(addr, 32, 50, paths); len(wrong) > 0 {
		t.Fatalf("%d wrong answers, first %q", len(wrong), wrong[0])
	}
	mu.Lock()
	defer mu.Unlock()
	return s.Stats(), together
}

// TestPipelinedAnswersReachTheirClients: concurrent requests for small
// objects of known size share node connections (the node reads several in
// one read, HeadsPiped counts them), and every client gets its own answer.
func TestPipelinedAnswersReachTheirClients(t *testing.T) {
	st, together := pipeBurst(t, false)
	if st.HeadsPiped == 0 || together == 0 {
		t.Fatalf("no request was pipelined: HeadsPiped %d, node read %d requests more than one at a time", st.HeadsPiped, together)
	}
	if st.FreshRedials != 0 || st.Retries != 0 {
		t.Errorf("fresh redials %d retries %d, want 0", st.FreshRedials, st.Retries)
	}
	t.Logf("%d heads pipelined beside %d batched; the node read %d requests in reads of several", st.HeadsPiped, st.HeadsBatched, together)
}

// TestPipelineOutOfOrderNodeBreaks: a node that answers pipelined requests
// last first. Each answer carries another request's token, so the
// connection breaks at the first and every request on it goes again on a
// fresh connection of its own: no client ever gets another's answer.
func TestPipelineOutOfOrderNodeBreaks(t *testing.T) {
	st, _ := pipeBurst(t, true)
	if st.HeadsPiped == 0 || st.FreshRedials == 0 {
		t.Fatalf("HeadsPiped %d, fresh redials %d: no pipeline was tried and broken", st.HeadsPiped, st.FreshRedials)
	}
	t.Logf("%d heads pipelined, %d fresh redials", st.HeadsPiped, st.FreshRedials)
}

// TestPipelineOnlyGetsSmallInside: which requests may share a connection,
// and which may have others queued behind them.
func TestPipelineOnlyGetsSmallInside(t *testing.T) {
	for _, tc := range []struct {
		head                string
		size                int64
		wantJoin, wantSmall bool
	}{
		{"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", 100, true, true},
		{"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", pipeSmall, true, true},
		{"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", pipeSmall + 1, true, false},
		{"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", -1, true, false}, // size unknown
		{"HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n", -1, true, true},
		{"DELETE /a HTTP/1.1\r\nHost: x\r\n\r\n", 100, false, false},
		{"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n", 100, false, false},
	} {
		x := parseExchange(t, tc.head)
		x.Policy.Size = tc.size
		if join, small := pipeable(x); join != tc.wantJoin || small != tc.wantSmall {
			t.Errorf("%q size %d: join %v small %v, want %v %v", tc.head, tc.size, join, small, tc.wantJoin, tc.wantSmall)
		}
	}
}

// parseExchange parses head into an Exchange with an empty policy request.
func parseExchange(t *testing.T, head string) *Exchange {
	t.Helper()
	var req httpwire.Request
	if _, err := httpwire.ParseRequest([]byte(head), &req); err != nil {
		t.Fatalf("%q: %v", head, err)
	}
	return &Exchange{Req: &req, Policy: &policy.Request{Size: -1}}
}

// TestSendPipedPassesBeforeASlowClient: a client that reads nothing does
// not hold up the request queued behind its answer on a pipelined node
// connection: the turn passes while the rest of the answer waits for the
// client.
func TestSendPipedPassesBeforeASlowClient(t *testing.T) {
	_, s, _ := startFront(t, Config{}, "http://127.0.0.1:1")
	client, peer := testutil.TCPPair(t) // peer reads nothing
	client.SetWriteBuffer(1)
	peer.SetReadBuffer(1)
	cc := s.getClientConn(client)
	nodeSide, _ := testutil.TCPPair(t)
	nc := newNodeConn(nodeSide)
	nc.u = &upstream{}
	next := &clientConn{turn: make(chan struct{}, 1)}
	nc.piped, nc.pq = true, []*clientConn{next}
	body := make([]byte, 8<<20) // far more than the socket buffers hold
	nc.in.b = body
	nc.in.w = len(body)
	done := make(chan error, 1)
	go func() { done <- cc.sendPiped(nc.u, nc, []byte("HTTP/1.1 200 OK\r\n\r\n"), len(body), true) }()
	select {
	case <-next.turn:
	case err := <-done:
		t.Fatalf("sendPiped returned (%v) before passing the turn, with a client that reads nothing", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the next request never got its turn: a slow client holds up the node connection")
	}
	if nc.broken || nc.in.len() != 0 || len(nc.pq) != 0 {
		t.Fatalf("after the pass: broken %v, %d bytes buffered, %d waiting", nc.broken, nc.in.len(), len(nc.pq))
	}
	peer.Close() // the rest of the write fails now
	if err := <-done; err == nil {
		t.Fatal("the write to a client that closed succeeded")
	}
}

// TestJoinLargeLast: a request that may be large joins as the last one;
// nobody joins behind it.
func TestJoinLargeLast(t *testing.T) {
	u := &upstream{}
	nc := &nodeConn{u: u}
	nc.openPipe()
	a, b, c := &clientConn{}, &clientConn{}, &clientConn{}
	if got := u.join(a, []byte("A"), true); got != nc {
		t.Fatal("a small request did not join the open connection")
	}
	if got := u.join(b, []byte("B"), false); got != nc {
		t.Fatal("a large request did not join as the last")
	}
	if got := u.join(c, []byte("C"), true); got != nil {
		t.Fatal("a request joined behind a large one")
	}
	if string(nc.wbuf) != "AB" || len(nc.pq) != 2 || nc.pq[0] != a || nc.pq[1] != b {
		t.Fatalf("heads %q, %d queued", nc.wbuf, len(nc.pq))
	}
	nc.pq, nc.wbuf = nil, nil // a fresh window holds pipeMax requests, the leader's included
	nc.openPipe()
	n := 0
	for u.join(a, nil, true) != nil {
		n++
	}
	if n != pipeMax-1 {
		t.Fatalf("%d joined behind the leader, want %d", n, pipeMax-1)
	}
}
