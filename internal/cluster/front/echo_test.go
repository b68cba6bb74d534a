package front

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/testutil"
)

func TestEchoOf(t *testing.T) {
	for _, tc := range []struct {
		heads  []string // name: value
		tok    uint64
		wantOK bool
	}{
		{nil, 0, false},
		{[]string{"Shoal-Seq: 1f"}, 0x1f, true},
		{[]string{"shoal-seq: ffffffffffffffff"}, 1<<64 - 1, true},
		{[]string{"Shoal-Seq: 1", "Shoal-Seq: 2"}, 2, true},   // the last one counts
		{[]string{"Shoal-Seq: 1ffffffffffffffff"}, 0, false},  // 17 digits
		{[]string{"Shoal-Seq: 1F"}, 0, false},                 // fronts write lowercase
		{[]string{"Shoal-Seq: "}, 0, false},                   // empty
		{[]string{"Shoal-Sex: 1"}, 0, false},                  // another field
		{[]string{"X-Shoal-Seq: 1", "Shoal-Seq: 0"}, 0, true}, // 0 parses; no request has it
	} {
		var hs []httpwire.Header
		for _, h := range tc.heads {
			n, v, _ := strings.Cut(h, ": ")
			hs = append(hs, httpwire.Header{Name: []byte(n), Value: []byte(v)})
		}
		tok, ok := echoOf(hs)
		if tok != tc.tok || ok != tc.wantOK {
			t.Errorf("%q: %x %v, want %x %v", tc.heads, tok, ok, tc.tok, tc.wantOK)
		}
	}
	if got := string(appendSeq(nil, 0xab)); got != "Shoal-Seq: ab\r\n" {
		t.Errorf("appendSeq: %q", got)
	}
}

// TestAnswered is nodeConn.answered's table: whether an answer is the
// request's, by its token and by whether the connection was peeked.
func TestAnswered(t *testing.T) {
	const tok = 0x2a
	for _, tc := range []struct {
		name             string
		echo             string // the answer's Shoal-Seq, "" for none
		echoes, unpeeked bool   // before
		want, wantEchoes bool
	}{
		{"token, fresh", "2a", false, false, true, true},
		{"token, unpeeked", "2a", true, true, true, true},
		{"other token, peeked", "2b", true, false, false, true},
		{"other token, unpeeked", "2b", true, true, false, true},
		{"none, fresh or peeked", "", false, false, true, false},
		{"none, peeked, echoed before", "", true, false, true, false},
		{"none, unpeeked", "", true, true, false, true},
	} {
		nc := &nodeConn{echoes: tc.echoes, unpeeked: tc.unpeeked}
		if tc.echo != "" {
			nc.resp.Headers = []httpwire.Header{{Name: []byte("Shoal-Seq"), Value: []byte(tc.echo)}}
		}
		if got := nc.answered(tok); got != tc.want || nc.echoes != tc.wantEchoes {
			t.Errorf("%s: answered %v echoes %v, want %v %v", tc.name, got, nc.echoes, tc.want, tc.wantEchoes)
		}
	}
}

// TestFitSkipsPeekOnlyForEchoes: a pooled connection with bytes waiting
// on its socket is fit for a replayable request once its node echoes
// tokens (the answer will tell), and unfit otherwise (the peek sees them).
func TestFitSkipsPeekOnlyForEchoes(t *testing.T) {
	c, srv := testutil.TCPPair(t)
	nc := newNodeConn(c)
	if !nc.fit(true) || !nc.fit(false) {
		t.Fatal("a quiet connection is unfit")
	}
	io.WriteString(srv, "HTTP/1.1 200 OK\r\n")
	for deadline := time.Now().Add(5 * time.Second); nc.quiet(); {
		if time.Now().After(deadline) {
			t.Fatal("stray bytes never became readable")
		}
		time.Sleep(time.Millisecond)
	}
	for _, tc := range []struct {
		echoes, replayable, want bool
	}{
		{false, true, false},
		{false, false, false},
		{true, false, false},
		{true, true, true},
	} {
		nc.echoes = tc.echoes
		if got := nc.fit(tc.replayable); got != tc.want || nc.unpeeked != tc.want {
			t.Errorf("echoes %v replayable %v: fit %v unpeeked %v, want %v", tc.echoes, tc.replayable, got, nc.unpeeked, tc.want)
		}
	}
}

// TestStrayAnswerNotRelayed: a node that echoes tokens sends a second,
// unasked answer after each one, while the connection sits in the pool.
// The next request on that connection skips the peek, so the stray answer
// is what it reads first: the missing token must close the connection and
// send the request again on a fresh one, so that no client ever gets
// another request's answer.
func TestStrayAnswerNotRelayed(t *testing.T) {
	stray := make(chan struct{}, 16)
	node := reqBackend(t, func(c net.Conn, req *http.Request) bool {
		tok := req.Header.Get("Shoal-Seq")
		if tok == "" {
			t.Errorf("request without a token: %v", req.Header)
		}
		body := req.URL.Path
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nShoal-Seq: %s\r\n\r\n%s", len(body), tok, body)
		time.Sleep(20 * time.Millisecond) // the front pools the connection meanwhile
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nSTRAY")
		stray <- struct{}{}
		return true
	})
	addr, s, _ := startFront(t, Config{}, node)
	cl := dialFront(t, addr)
	for i := 0; i < 4; i++ {
		path := fmt.Sprintf("/f%d", i)
		resp, body := cl.do(get(path))
		if resp.StatusCode != 200 || body != path || resp.Header.Get("Shoal-Seq") != "" {
			t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
		<-stray
	}
	// Requests 2–4 each found a stray answer on the pooled connection.
	if st := s.Stats(); st.FreshRedials != 3 || st.Retries != 0 {
		t.Fatalf("fresh redials %d retries %d, want 3 and 0", st.FreshRedials, st.Retries)
	}
}

// TestClientTokenDropped: a Shoal-Seq from a client never reaches a node.
func TestClientTokenDropped(t *testing.T) {
	seen := make(chan []string, 1)
	node := reqBackend(t, func(c net.Conn, req *http.Request) bool {
		seen <- req.Header.Values("Shoal-Seq")
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	addr, _, _ := startFront(t, Config{}, node)
	resp, _ := dialFront(t, addr).do("GET / HTTP/1.1\r\nHost: x\r\nShoal-Seq: 1234\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if v := <-seen; len(v) != 1 || v[0] == "1234" {
		t.Fatalf("node got Shoal-Seq %q, want only the front's", v)
	}
}
