package loadgen

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestResponseReader(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		head   bool
		status int
		body   int64
		close  bool
		err    error // sentinel expected (nil = success)
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, 200, 5, false, nil},
		{"case and spaces", "HTTP/1.1 200 OK\r\ncontent-LENGTH:   3  \r\n\r\nabc", false, 200, 3, false, nil},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 2\n\nhi", false, 200, 2, false, nil},
		{"no reason", "HTTP/1.1 204\r\n\r\n", false, 204, 0, false, nil},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n", false, 200, 15, false, nil},
		{"chunked beats length", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", false, 200, 2, false, nil},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", false, 200, 0, true, nil},
		{"http/1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 200, 1, true, nil},
		{"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", false, 200, 1, false, nil},
		{"close-delimited", "HTTP/1.1 200 OK\r\n\r\nuntil the end", false, 200, 13, true, nil},
		{"head ignores length", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", true, 200, 0, false, nil},
		{"304 has no body", "HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\n\r\n", false, 304, 0, false, nil},
		{"100 continue skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 200, 1, false, nil},
		{"5xx parsed", "HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy", false, 503, 4, false, nil},

		{"empty stream", "", false, 0, 0, false, errPeerClosed},
		{"garbage", "SSH-2.0-OpenSSH\r\n\r\n", false, 0, 0, false, errProtocol},
		{"bad status digits", "HTTP/1.1 2x0 OK\r\n\r\n", false, 0, 0, false, errProtocol},
		{"http/2 status", "HTTP/2.0 200 OK\r\n\r\n", false, 0, 0, false, errProtocol},
		{"header without colon", "HTTP/1.1 200 OK\r\nbogus\r\n\r\n", false, 0, 0, false, errProtocol},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, 0, 0, false, errProtocol},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", false, 0, 0, false, errProtocol},
		{"huge length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", false, 0, 0, false, errProtocol},
		{"gzip only", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false, 0, 0, false, errProtocol},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, 0, 0, false, errProtocol},
		{"chunk without CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhiX\r\n0\r\n\r\n", false, 0, 0, false, errProtocol},
		{"truncated headers", "HTTP/1.1 200 OK\r\nContent-Len", false, 0, 0, false, errProtocol},
		{"101", "HTTP/1.1 101 Switching Protocols\r\n\r\n", false, 0, 0, false, errProtocol},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false, 0, 0, false, errShortBody},
		{"short chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", false, 0, 0, false, errShortBody},
		{"missing last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n", false, 0, 0, false, errShortBody},
		{"header too large", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 20000) + "\r\n\r\n", false, 0, 0, false, errProtocol},
	}
	for _, c := range cases {
		for _, oneByte := range []bool{false, true} {
			var rd io.Reader = strings.NewReader(c.in)
			if oneByte {
				rd = iotest.OneByteReader(rd)
			}
			p := newRespReader(rd, 0)
			resp, err := p.read(c.head)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Errorf("%s (oneByte=%v): err %v, want %v", c.name, oneByte, err, c.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s (oneByte=%v): %v", c.name, oneByte, err)
				continue
			}
			if resp.status != c.status || resp.bodyBytes != c.body || resp.close != c.close {
				t.Errorf("%s (oneByte=%v): status %d body %d close %v, want %d %d %v",
					c.name, oneByte, resp.status, resp.bodyBytes, resp.close, c.status, c.body, c.close)
			}
			// Everything but a 100 Continue prefix is counted as wire bytes.
			if want := int64(len(c.in)); resp.wireBytes != want && !strings.HasPrefix(c.in, "HTTP/1.1 100") {
				t.Errorf("%s: wire bytes %d, want %d", c.name, resp.wireBytes, want)
			}
		}
	}
}

// Pipelined/back-to-back responses must be split exactly at their ends.
func TestResponseReaderSequence(t *testing.T) {
	one := "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
	two := "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
	p := newRespReader(strings.NewReader(one+two+one), 64) // small buffer forces compaction
	for i, want := range []int{200, 404, 200} {
		resp, err := p.read(false)
		if err != nil || resp.status != want {
			t.Fatalf("response %d: status %d err %v, want %d", i, resp.status, err, want)
		}
	}
	if _, err := p.read(false); !errors.Is(err, errPeerClosed) {
		t.Fatalf("after the last response: %v, want errPeerClosed", err)
	}
}

func BenchmarkParseResponse(b *testing.B) {
	resp := "HTTP/1.1 200 OK\r\nServer: nginx/1.26.0\r\nDate: Sun, 29 Nov 2026 20:00:00 GMT\r\n" +
		"Content-Type: text/html\r\nContent-Length: 1024\r\nLast-Modified: Sun, 29 Nov 2026 19:00:00 GMT\r\n" +
		"Connection: keep-alive\r\nETag: \"5f3a-400\"\r\nAccept-Ranges: bytes\r\n\r\n" + strings.Repeat("x", 1024)
	r := strings.NewReader(resp)
	p := newRespReader(r, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		r.Reset(resp)
		p.reset(r)
		if _, err := p.read(false); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzResponseReader: arbitrary server bytes must never panic the reader,
// and a parsed response can never claim more bytes than were sent.
func FuzzResponseReader(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.0 100 Continue\r\n\r\nHTTP/1.0 304 NM\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		p := newRespReader(bytes.NewReader(in), 256)
		for i := 0; i < 4; i++ {
			resp, err := p.read(head)
			if err != nil {
				return
			}
			if resp.bodyBytes < 0 || resp.wireBytes > int64(len(in)) || resp.bodyBytes > resp.wireBytes {
				t.Fatalf("response %+v from %d input bytes", resp, len(in))
			}
		}
	})
}

// dropReader is a strings.Reader that can also drop bytes (a discarder)
// and records how it was asked to.
type dropReader struct {
	*strings.Reader
	reads, drops int
	asked        []int
}

func (d *dropReader) Read(p []byte) (int, error) { d.reads++; return d.Reader.Read(p) }

func (d *dropReader) discard(n int) (int, error) {
	d.drops++
	d.asked = append(d.asked, n)
	k := min(n, 1000) // a socket hands over what has arrived
	skipped, err := io.CopyN(io.Discard, d.Reader, int64(k))
	if err == io.EOF && skipped > 0 {
		err = nil
	}
	return int(skipped), err
}

// TestResponseReaderDiscards: once the buffer is empty a body's remainder
// is dropped by the reader (no copy), asked for exactly what is left, and
// the next response is read whole; a chunked body's chunks too. A body
// cut short is a short body.
func TestResponseReaderDiscards(t *testing.T) {
	first := "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + strings.Repeat("b", 5000)
	second := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + "fa0\r\n" + strings.Repeat("c", 4000) + "\r\n0\r\n\r\n"
	d := &dropReader{Reader: strings.NewReader(first + second)}
	p := newRespReader(d, 1024)
	resp, err := p.read(false)
	// The first read takes 1024 bytes: the 41-byte head and 983 body bytes;
	// 4017 are left, dropped at most 1000 at a time.
	if err != nil || resp.bodyBytes != 5000 || d.reads != 1 || d.drops != 5 || d.asked[0] != 4017 || d.asked[4] != 17 {
		t.Fatalf("first: body %d err %v, reads %d drops %d asked %v; want 5000 bytes, 1 read, 5 drops from 4017 to 17",
			resp.bodyBytes, err, d.reads, d.drops, d.asked)
	}
	resp, err = p.read(false)
	if err != nil || resp.bodyBytes != 4000 || resp.wireBytes != int64(len(second)) {
		t.Fatalf("second: body %d wire %d err %v, want 4000 and %d", resp.bodyBytes, resp.wireBytes, err, len(second))
	}
	cut := &dropReader{Reader: strings.NewReader(first[:3000])}
	if _, err := newRespReader(cut, 1024).read(false); !errors.Is(err, errShortBody) {
		t.Fatalf("a body cut short: %v, want errShortBody", err)
	}
}
