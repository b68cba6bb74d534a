package node

import (
	"net"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/testutil"
)

// TestServeLocal: a front in the process hands a fresh hit to the node,
// which answers it on the client's connection with the bytes it would have
// sent over its own socket; a miss, a first hit (not yet decoded), a stale
// response and a request with caching fields are declined with nothing
// written and nothing counted.
func TestServeLocal(t *testing.T) {
	c := edgeBenchConn(t) // /f.bin stored, host "bench"
	s := c.s
	cc := &captureConn{}
	c.nc = cc
	now := time.Now()
	parse := func(raw string) *httpwire.Request {
		var req httpwire.Request
		if _, err := s.parser.Parse([]byte(raw), &req); err != nil {
			t.Fatal(err)
		}
		return &req
	}
	viaSocket := func(raw string) string {
		cc.out.Reset()
		c.r, c.w = 0, copy(c.buf, raw)
		c.process(now)
		return cc.out.String()
	}
	local := func(raw string, closeAfter bool) (LocalResult, string) {
		out := &captureConn{}
		res := s.ServeLocal(out, parse(raw), now, closeAfter, time.Second)
		return res, out.out.String()
	}
	get := "GET /f.bin HTTP/1.1\r\nHost: bench\r\n\r\n"
	if res, out := local(get, false); res.Handled || out != "" {
		t.Fatalf("before any hit: handled %v, wrote %q; want declined (not decoded yet)", res.Handled, out)
	}
	viaSocket(get) // the first hit decodes the entry
	before := s.EdgeStats().Hits
	want := viaSocket(get)
	res, out := local(get, false)
	if !res.Handled || out != want || res.Status != 200 || res.Size != 1024 || res.Body != 1024 || res.Sent != int64(len(want)) || !res.Keep {
		t.Fatalf("hit: %+v\n%q\nwant the socket's answer\n%q", res, out, want)
	}
	if got := s.EdgeStats().Hits; got != before+2 {
		t.Errorf("hits %d → %d, want two more", before, got)
	}
	var nc net.Conn = discardConn{}
	req := parse(get)
	if n := testing.AllocsPerRun(100, func() { s.ServeLocal(nc, req, now, false, time.Second) }); n != 0 && !testutil.RaceEnabled {
		t.Errorf("local hit: %v allocations", n)
	}
	if res, out := local("HEAD /f.bin HTTP/1.1\r\nHost: bench\r\n\r\n", true); !res.Handled || res.Body != 0 || res.Keep ||
		!strings.Contains(out, "Connection: close\r\n") || !strings.HasSuffix(out, "\r\n\r\n") {
		t.Errorf("HEAD, closing: %+v %q", res, out)
	}
	before = s.EdgeStats().Hits
	for _, raw := range []string{
		"GET /other HTTP/1.1\r\nHost: bench\r\n\r\n",                            // never stored
		"GET /f.bin HTTP/1.1\r\nHost: bench\r\nCache-Control: no-cache\r\n\r\n", // a request directive
		"GET /f.bin HTTP/1.1\r\nHost: bench\r\nRange: bytes=0-1\r\n\r\n",
		"GET /.shoal/status HTTP/1.1\r\nHost: bench\r\n\r\n",
	} {
		if res, out := local(raw, false); res.Handled || out != "" {
			t.Errorf("%q: handled %v, wrote %q; want declined", raw, res.Handled, out)
		}
	}
	res = s.ServeLocal(&captureConn{}, parse(get), now.Add(86401*time.Second), false, time.Second)
	if res.Handled {
		t.Error("stale response served locally")
	}
	if got := s.EdgeStats().Hits; got != before {
		t.Errorf("declined requests counted %d hits", got-before)
	}
}
