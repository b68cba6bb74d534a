package httpwire

import (
	"bytes"
	"testing"
)

func TestParseResponse(t *testing.T) {
	type want struct {
		status     int
		cl         int64
		chunked    bool
		untilClose bool
		close      bool
		headers    int
		err        error
	}
	cases := []struct {
		name string
		in   string
		want want
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", want{200, 5, false, false, false, 1, nil}},
		{"no reason", "HTTP/1.1 204\r\n\r\n", want{204, -1, false, false, false, 0, nil}},
		{"empty reason", "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", want{200, 0, false, false, false, 1, nil}},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", want{200, -1, true, false, false, 1, nil}},
		{"te not chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", want{200, -1, false, true, true, 1, nil}},
		{"until close", "HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", want{200, -1, false, true, true, 1, nil}},
		{"304 no length", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", want{304, -1, false, false, false, 1, nil}},
		{"100 continue", "HTTP/1.1 100 Continue\r\n\r\n", want{100, -1, false, false, false, 0, nil}},
		{"conn close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", want{200, 0, false, false, true, 2, nil}},
		{"http10", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", want{200, 0, false, false, true, 1, nil}},
		{"http10 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", want{200, 0, false, false, false, 2, nil}},
		{"incomplete", "HTTP/1.1 200 OK\r\nContent-Len", want{err: ErrNeedMore}},
		{"incomplete line", "HTTP/1.1 20", want{err: ErrNeedMore}},
		{"not http", "HTTX/1.1 200 OK\r\n\r\n", want{err: ErrBadStatusLine}},
		{"status 99", "HTTP/1.1 099 X\r\n\r\n", want{err: ErrBadStatus}},
		{"status alpha", "HTTP/1.1 2x0 X\r\n\r\n", want{err: ErrBadStatus}},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", want{err: ErrBareLF}},
		{"bare LF header", "HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", want{err: ErrBareLF}},
		{"obs fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", want{err: ErrObsFold}},
		{"dup CL", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", want{err: ErrDupContentLength}},
		{"bad CL", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", want{err: ErrBadContentLength}},
		{"CL and TE", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", want{err: ErrLengthAndChunked}},
		{"chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", want{err: ErrBadTE}},
		{"space before colon", "HTTP/1.1 200 OK\r\nX : y\r\n\r\n", want{err: ErrBadHeaderName}},
		// Framing the relay could not honour.
		{"Connection names CL", "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 2\r\n\r\nok", want{err: ErrRespConnectionOption}},
		{"Connection names TE", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close, transfer-encoding\r\n\r\n", want{err: ErrRespConnectionOption}},
		{"chunked then gzip fields", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", want{err: ErrBadTE}},
		{"chunked in two fields", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", want{err: ErrBadTE}},
		{"gzip then chunked fields", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", want{200, -1, true, false, false, 2, nil}},
		{"Connection names other field", "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nContent-Length: 0\r\n\r\n", want{200, 0, false, false, false, 2, nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r ResponseHead
			n, err := ParseResponse([]byte(c.in), &r, 0)
			if err != c.want.err {
				t.Fatalf("err = %v, want %v", err, c.want.err)
			}
			if err != nil {
				return
			}
			if r.Status != c.want.status || r.ContentLength != c.want.cl || r.Chunked != c.want.chunked ||
				r.UntilClose != c.want.untilClose || r.Close != c.want.close || len(r.Headers) != c.want.headers {
				t.Fatalf("got %+v, want %+v", r, c.want)
			}
			if end := bytes.Index([]byte(c.in), []byte("\r\n\r\n")) + 4; n != end || r.HeadLen != end {
				t.Fatalf("n = %d, HeadLen %d, want %d", n, r.HeadLen, end)
			}
		})
	}
}

func TestParseResponseReusesHeaders(t *testing.T) {
	in := []byte("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n")
	var r ResponseHead
	if _, err := ParseResponse(in, &r, 0); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() { _, _ = ParseResponse(in, &r, 0) })
	if allocs != 0 {
		t.Fatalf("%v allocs per parse, want 0", allocs)
	}
	if _, err := ParseResponse(in, &r, 2); err != ErrTooManyHeaders {
		t.Fatalf("maxHeaders 2: err = %v", err)
	}
}

// FuzzParseResponse checks that ParseResponse never panics, never reports a
// head longer than its input, that every prefix of an accepted head is
// ErrNeedMore (so a relay reading in pieces sees the same answer), and that
// the framing it reports is self-consistent. More seeds are in
// testdata/fuzz/FuzzParseResponse.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 304 Not Modified\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var r ResponseHead
		n, err := ParseResponse(in, &r, 0)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if n <= 0 || n > len(in) || n != r.HeadLen {
			t.Fatalf("n = %d, HeadLen %d for input of %d bytes", n, r.HeadLen, len(in))
		}
		if r.Chunked && (r.ContentLength >= 0 || r.UntilClose) {
			t.Fatalf("inconsistent framing %+v", r)
		}
		if r.UntilClose && !r.Close {
			t.Fatalf("until-close body on a reusable connection: %+v", r)
		}
		for k := 0; k < n; k++ {
			var p ResponseHead
			if _, err := ParseResponse(in[:k], &p, 0); err != ErrNeedMore {
				t.Fatalf("prefix %d of accepted head: err = %v", k, err)
			}
		}
	})
}

// BenchmarkParseResponse parses a typical node answer as the relay sees it.
func BenchmarkParseResponse(b *testing.B) {
	in := []byte("HTTP/1.1 200 OK\r\nServer: shoal\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Type: image/gif\r\n" +
		"Content-Length: 12345\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nETag: \"5f3a-1c2b\"\r\nAccept-Ranges: bytes\r\n" +
		"Connection: keep-alive\r\n\r\n")
	var r ResponseHead
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := ParseResponse(in, &r, 0); err != nil {
			b.Fatal(err)
		}
	}
}
