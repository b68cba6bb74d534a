package accept

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveLimited serves a tiny handler on a bounded loopback listener until
// the test ends.
func serveLimited(t *testing.T, l Limits, h http.HandlerFunc) (*Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := Bound(ln, l)
	srv := b.HTTPServer(h)
	go srv.Serve(b)
	t.Cleanup(func() { srv.Close() })
	return b, ln.Addr().String()
}

func ok(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }

// closedWithin reports whether the server closes c (EOF or reset) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	if ne, isNet := err.(net.Error); isNet && ne.Timeout() {
		return false
	}
	return err != nil
}

func get(t *testing.T, c net.Conn) {
	t.Helper()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
}

// TestLimitsIdleKeepAliveClosed: a keep-alive connection that sends no
// next request is closed after IdleTimeout (net/http keeps it for ever
// when neither IdleTimeout nor ReadTimeout is set).
func TestLimitsIdleKeepAliveClosed(t *testing.T) {
	_, addr := serveLimited(t, Limits{HeaderTimeout: 5 * time.Second, IdleTimeout: 200 * time.Millisecond}, ok)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get(t, c)
	if !closedWithin(c, 5*time.Second) {
		t.Fatal("an idle keep-alive connection stayed open past IdleTimeout")
	}
}

// TestLimitsBounds: a connection over MaxPerIP from one address is closed
// at once; at MaxConns the connection idle the longest is closed to make
// room, and with every connection busy the new one is closed at once;
// both are counted.
func TestLimitsBounds(t *testing.T) {
	release := make(chan struct{})
	b, addr := serveLimited(t, Limits{MaxConns: 4, MaxPerIP: 3, HeaderTimeout: 10 * time.Second}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release
		}
		io.WriteString(w, "ok")
	})
	var conns []net.Conn
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		return c
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// The server marks a connection idle after its answer went out, which a
	// loaded machine may delay past the client's read, and past the next
	// connection's: each waits for it, so that the idle times go in the
	// order of the connections and conns[0] is the longest idle.
	for range 3 {
		get(t, dial("127.0.0.1"))
		waitBusy(t, b, 0)
	}
	if c := dial("127.0.0.1"); !closedWithin(c, 5*time.Second) {
		t.Error("a fourth connection from one address was kept (MaxPerIP 3)")
	}
	get(t, dial("127.0.0.2"))
	waitBusy(t, b, 0)
	time.Sleep(2 * shedMinIdle)
	get(t, dial("127.0.0.3")) // the fifth: the longest idle one makes room
	if !closedWithin(conns[0], 5*time.Second) {
		b.mu.Lock()
		for c := range b.conns { // what the listener holds, to tell which one it shed
			t.Logf("open: %v busy %v, idle since %v", c.RemoteAddr(), c.busy.Load(), time.Since(time.Unix(0, c.since.Load())))
		}
		b.mu.Unlock()
		for i, c := range conns {
			t.Logf("client conns[%d]: %v", i, c.LocalAddr())
		}
		t.Logf("shed %d, refused %d", b.Shed.Load(), b.Refused.Load())
		t.Error("at MaxConns the longest idle connection was not closed")
	}
	if n := b.Shed.Load(); n != 1 {
		t.Errorf("shed %d, want 1", n)
	}
	// Every connection busy: a new one is refused.
	for _, c := range []net.Conn{conns[1], conns[2], conns[4], conns[5]} {
		io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	waitBusy(t, b, 4)
	if c := dial("127.0.0.4"); !closedWithin(c, 5*time.Second) {
		t.Error("a connection was kept with every slot busy (MaxConns 4)")
	}
	close(release)
	if n := b.Refused.Load(); n != 2 {
		t.Errorf("refused %d, want 2", n)
	}
}

// waitBusy waits up to 5 s until want of b's connections are serving a
// request.
func waitBusy(t *testing.T, b *Listener, want int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		b.mu.Lock()
		busy := 0
		for c := range b.conns {
			if c.busy.Load() {
				busy++
			}
		}
		b.mu.Unlock()
		if busy == want {
			return
		}
	}
}

// TestLimitsWriteTimeout: a client that stops reading a large response is
// closed once a write waits WriteTimeout, and its slot is freed.
func TestLimitsWriteTimeout(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	done := make(chan error, 1)
	b, addr := serveLimited(t, Limits{WriteTimeout: 200 * time.Millisecond}, func(w http.ResponseWriter, r *http.Request) {
		var err error
		for range 64 {
			if _, err = io.WriteString(w, big); err != nil {
				break
			}
		}
		done <- err
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("64 MiB written to a client that reads nothing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a write to a client that stopped reading never timed out")
	}
	for end := time.Now().Add(5 * time.Second); b.Open() > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.Open(); n != 0 {
		t.Errorf("%d connections still counted open", n)
	}
}
