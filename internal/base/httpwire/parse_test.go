package httpwire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

const simpleGET = "GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: wrk\r\n\r\n"

func TestParseValid(t *testing.T) {
	var r Request
	n, err := ParseRequest([]byte(simpleGET), &r)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(simpleGET) || r.HeadLen != n {
		t.Fatalf("n = %d, want %d", n, len(simpleGET))
	}
	if string(r.Method) != "GET" || string(r.Target) != "/index.html" || r.Minor != 1 {
		t.Fatalf("request line = %q %q 1.%d", r.Method, r.Target, r.Minor)
	}
	if string(r.Host) != "example.com" || !r.HasHost || r.Close || r.ContentLength != -1 || r.Chunked {
		t.Fatalf("fields: %+v", r)
	}
	if len(r.Headers) != 2 || string(r.Headers[1].Name) != "User-Agent" || string(r.Headers[1].Value) != "wrk" {
		t.Fatalf("headers: %q", r.Headers)
	}
}

func TestParseFields(t *testing.T) {
	cases := []struct {
		name, in string
		check    func(r *Request) bool
	}{
		{"http10 closes", "GET / HTTP/1.0\r\n\r\n", func(r *Request) bool { return r.Close && r.Minor == 0 && !r.HasHost }},
		{"http10 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", func(r *Request) bool { return !r.Close && r.KeepAlive }},
		{"http11 close", "GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, CLOSE\r\n\r\n", func(r *Request) bool { return r.Close }},
		{"content-length", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n", func(r *Request) bool { return r.ContentLength == 42 && r.HasBody() }},
		{"chunked", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", func(r *Request) bool { return r.Chunked && r.ContentLength == -1 }},
		{"conditionals", "GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\"\r\nif-modified-since: Sun, 06 Nov 1994 08:49:37 GMT\r\nRANGE: bytes=0-1\r\n\r\n",
			func(r *Request) bool {
				return string(r.IfNoneMatch) == `"x"` && string(r.IfModifiedSince) == "Sun, 06 Nov 1994 08:49:37 GMT" && string(r.Range) == "bytes=0-1"
			}},
		{"ows trimmed, empty value", "GET / HTTP/1.1\r\nHost: \t [::1]:80 \t\r\nX-Empty:\r\nX: a b\r\n\r\n", func(r *Request) bool {
			return string(r.Host) == "[::1]:80" && len(r.Headers[1].Value) == 0 && string(r.Headers[2].Value) == "a b"
		}},
		{"leading blank line", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Method) == "GET" && r.HeadLen == 29 }},
		{"query path", "GET /a/b?c=d HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Path()) == "/a/b" }},
		{"absolute-form path", "GET http://h:80/a/b?c=d HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Path()) == "/a/b" }},
		{"absolute-form no path", "GET HTTPS://h?c=/d HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Path()) == "/" }},
		{"absolute-form bare", "GET http://h HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Path()) == "/" }},
		{"asterisk path", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Path()) == "*" }},
		{"absolute-form http", "GET HTTP://a:8080/x?y HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Target) == "HTTP://a:8080/x?y" }},
		{"absolute-form https no path", "GET https://a?q HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Target) == "https://a?q" }},
		{"asterisk on OPTIONS", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", func(r *Request) bool { return string(r.Target) == "*" }},
		{"authority-form on CONNECT", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", func(r *Request) bool { return string(r.Target) == "a:443" }},
		{"Connection names other fields", "GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Forwarded-For, Upgrade, TE, Content-Type\r\n\r\n", func(r *Request) bool { return !r.Close }},
		{"obs-text value", "GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n", func(r *Request) bool { return string(r.Headers[1].Value) == "caf\xc3\xa9" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r Request
			if _, err := ParseRequest([]byte(c.in), &r); err != nil {
				t.Fatal(err)
			}
			if !c.check(&r) {
				t.Fatalf("unexpected fields: %+v", r)
			}
		})
	}
}

func TestParseRefusals(t *testing.T) {
	cases := []struct {
		name, in string
		want     *Error
	}{
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", ErrLengthAndChunked},
		{"TE and CL", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", ErrLengthAndChunked},
		{"duplicate CL same", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", ErrDupContentLength},
		{"duplicate CL differing", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", ErrDupContentLength},
		{"CL list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", ErrBadContentLength},
		{"CL sign", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\n", ErrBadContentLength},
		{"CL overflow", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", ErrBadContentLength},
		{"CL empty", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", ErrBadContentLength},
		{"TE not final chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", ErrBadTE},
		{"TE chunked twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", ErrBadTE},
		{"TE unknown", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", ErrUnknownTE},
		{"TE on 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", ErrTEOnHTTP10},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n  b\r\n\r\n", ErrObsFold},
		{"obs-fold tab", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n", ErrObsFold},
		{"bare LF end", "GET / HTTP/1.1\r\nHost: a\r\n\n", ErrBareLF},
		{"bare LF header", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", ErrBareLF},
		{"bare LF request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", ErrBareLF},
		{"bare LF leading", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", ErrBareLF},
		{"bare CR", "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", ErrBareCR},
		{"NUL in target", "GET /a\x00b HTTP/1.1\r\nHost: a\r\n\r\n", ErrNUL},
		{"NUL in value", "GET / HTTP/1.1\r\nHost: a\x00\r\n\r\n", ErrNUL},
		{"NUL in name", "GET / HTTP/1.1\r\nHo\x00st: a\r\n\r\n", ErrNUL},
		{"ctl in value", "GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", ErrBadHeaderValue},
		{"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", ErrBadHeaderName},
		{"invalid name char", "GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", ErrBadHeaderName},
		{"empty name", "GET / HTTP/1.1\r\n: a\r\n\r\n", ErrBadHeaderName},
		{"invalid method char", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", ErrBadMethod},
		{"empty method", " / HTTP/1.1\r\nHost: a\r\n\r\n", ErrBadMethod},
		{"double space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", ErrBadRequestLine},
		{"ctl in target", "GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", ErrBadTarget},
		{"http/0.9", "GET /\r\n\r\n", ErrBadTarget},
		{"bad version", "GET / HTTX/1.1\r\nHost: a\r\n\r\n", ErrBadVersion},
		{"bad version digits", "GET / HTTP/1.x\r\nHost: a\r\n\r\n", ErrBadVersion},
		{"version 2", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", ErrVersion},
		{"missing host", "GET / HTTP/1.1\r\nX: a\r\n\r\n", ErrMissingHost},
		{"host with space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ErrBadHost},
		{"host with slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", ErrBadHost},
		{"host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", ErrBadHost},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", ErrDupHost},
		{"too large", "GET /" + strings.Repeat("a", DefaultMaxHead) + " HTTP/1.1\r\nHost: a\r\n\r\n", ErrTooLarge},
		{"too large incomplete", "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", DefaultMaxHead), ErrTooLarge},
		{"too many headers", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: y\r\n", DefaultMaxHeaders) + "\r\n", ErrTooManyHeaders},
		// Connection naming a field that frames or routes.
		{"Connection names CL", "POST / HTTP/1.1\r\nHost: a\r\nConnection: Content-Length\r\nContent-Length: 3\r\n\r\n", ErrConnectionOption},
		{"Connection names CL in list", "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, x, content-length\r\n\r\n", ErrConnectionOption},
		{"Connection names TE", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: TRANSFER-ENCODING\r\n\r\n", ErrConnectionOption},
		{"Connection names Host", "GET / HTTP/1.1\r\nConnection: Host\r\nHost: a\r\n\r\n", ErrConnectionOption},
		{"Connection names Host 1.0", "GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: host\r\n\r\n", ErrConnectionOption},
		// Request-target forms (RFC 9112 §3.2).
		{"absolute-form ftp", "GET ftp://a/x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTargetForm},
		{"absolute-form empty host", "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTargetForm},
		{"absolute-form userinfo", "GET http://u@a/x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTargetForm},
		{"absolute-form no slashes", "GET http:a/x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTargetForm},
		{"authority-form on GET", "GET a:80 HTTP/1.1\r\nHost: a\r\n\r\n", ErrTargetForm},
		{"asterisk on GET", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", ErrTargetForm},
		{"origin-form on CONNECT", "CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTargetForm},
		{"relative path", "GET x/y HTTP/1.1\r\nHost: a\r\n\r\n", ErrTargetForm},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r Request
			_, err := ParseRequest([]byte(c.in), &r)
			if err != c.want {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Status != c.want.Status {
				t.Fatalf("status mismatch")
			}
		})
	}
}

func TestParseNeedMore(t *testing.T) {
	// Every proper prefix of a valid head is incomplete, never an error.
	full := "\r\nGET /a?b HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n"
	var r Request
	for i := 0; i < len(full); i++ {
		if _, err := ParseRequest([]byte(full[:i]), &r); err != ErrNeedMore {
			t.Fatalf("prefix %q: err = %v, want ErrNeedMore", full[:i], err)
		}
	}
	// A prefix that is already wrong is refused before the head completes.
	if _, err := ParseRequest([]byte("GET / HTTQ"), &r); err != ErrBadVersion {
		t.Fatalf("early refusal: %v", err)
	}
}

func TestParseConfigurableLimit(t *testing.T) {
	p := Parser{MaxHead: 64}
	var r Request
	if _, err := p.Parse([]byte(simpleGET), &r); err != nil {
		t.Fatalf("small head under 64 bytes refused: %v (len %d)", err, len(simpleGET))
	}
	long := "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("b", 60) + "\r\n\r\n"
	if _, err := p.Parse([]byte(long), &r); err != ErrTooLarge {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestParsePipelined(t *testing.T) {
	in := []byte(simpleGET + "HEAD /b HTTP/1.1\r\nHost: x\r\n\r\n" + "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /d")
	var r Request
	var got []string
	for {
		n, err := ParseRequest(in, &r)
		if err == ErrNeedMore {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(r.Method)+" "+string(r.Target))
		in = in[n:]
	}
	want := "GET /index.html|HEAD /b|GET /c"
	if strings.Join(got, "|") != want || string(in) != "GET /d" {
		t.Fatalf("got %q rest %q", got, in)
	}
}

func TestAppendRequestRoundTrip(t *testing.T) {
	in := "GET  /x HTTP/1.1\r\n"
	var r Request
	if _, err := ParseRequest([]byte(in), &r); err == nil {
		t.Fatal("double space accepted")
	}
	if _, err := ParseRequest([]byte("GET /x HTTP/1.1\r\nHost:a  \r\nA:\tb c\r\n\r\n"), &r); err != nil {
		t.Fatal(err)
	}
	out := AppendRequest(nil, &r)
	if string(out) != "GET /x HTTP/1.1\r\nHost: a\r\nA: b c\r\n\r\n" {
		t.Fatalf("serialised %q", out)
	}
}

func TestHTTPDate(t *testing.T) {
	tm := time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC)
	got := string(AppendHTTPDate(nil, tm))
	if got != "Sun, 06 Nov 1994 08:49:37 GMT" || got != tm.Format(TimeFormat) {
		t.Fatalf("AppendHTTPDate = %q", got)
	}
	for _, s := range []string{"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"} {
		p, ok := ParseHTTPDate([]byte(s))
		if !ok || !p.Equal(tm) {
			t.Errorf("ParseHTTPDate(%q) = %v, %v", s, p, ok)
		}
	}
	for _, s := range []string{"", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "yesterday"} {
		if _, ok := ParseHTTPDate([]byte(s)); ok {
			t.Errorf("ParseHTTPDate(%q) accepted", s)
		}
	}
	var dc DateCache
	l1 := dc.Line(tm)
	l2 := dc.Line(tm.Add(500 * time.Millisecond))
	if &l1[0] != &l2[0] || string(l1) != "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" {
		t.Fatalf("DateCache not reused within a second: %q", l1)
	}
	if l3 := dc.Line(tm.Add(time.Second)); string(l3) != "Date: Sun, 06 Nov 1994 08:49:38 GMT\r\n" {
		t.Fatalf("DateCache next second: %q", l3)
	}
}

func TestParseRange(t *testing.T) {
	cases := []struct {
		v           string
		size        int64
		first, last int64
		kind        RangeKind
	}{
		{"bytes=0-499", 1000, 0, 499, RangeSingle},
		{"bytes=500-", 1000, 500, 999, RangeSingle},
		{"bytes=-200", 1000, 800, 999, RangeSingle},
		{"bytes=-2000", 1000, 0, 999, RangeSingle},
		{"bytes=900-5000", 1000, 900, 999, RangeSingle},
		{"Bytes=0-0", 1, 0, 0, RangeSingle},
		{"bytes=1000-", 1000, 0, 0, RangeUnsatisfiable},
		{"bytes=-0", 1000, 0, 0, RangeUnsatisfiable},
		{"bytes=0-", 0, 0, 0, RangeUnsatisfiable},
		{"bytes=0-1,5-6", 1000, 0, 0, RangeMulti},
		{"bytes=0-1, 2000-3000", 1000, 0, 0, RangeMulti},
		{"bytes=5-1", 1000, 0, 0, RangeNone},
		{"bytes=a-b", 1000, 0, 0, RangeNone},
		{"items=0-1", 1000, 0, 0, RangeNone},
		{"bytes=", 1000, 0, 0, RangeNone},
	}
	for _, c := range cases {
		f, l, k := ParseRange([]byte(c.v), c.size)
		if f != c.first || l != c.last || k != c.kind {
			t.Errorf("ParseRange(%q,%d) = %d,%d,%d want %d,%d,%d", c.v, c.size, f, l, k, c.first, c.last, c.kind)
		}
	}
}

func TestMatchETag(t *testing.T) {
	cases := []struct {
		h, etag string
		want    bool
	}{
		{`"abc"`, `"abc"`, true},
		{`W/"abc"`, `"abc"`, true},
		{`"x", "abc"`, `"abc"`, true},
		{`*`, `"abc"`, true},
		{`"abd"`, `"abc"`, false},
		{`abc`, `"abc"`, false},
		{``, `"abc"`, false},
	}
	for _, c := range cases {
		if got := MatchETag([]byte(c.h), c.etag); got != c.want {
			t.Errorf("MatchETag(%q,%q) = %v", c.h, c.etag, got)
		}
	}
}

func TestAppendStatus(t *testing.T) {
	b := AppendStatusLine(nil, 404)
	b = AppendHeaderInt(b, "Content-Length", 12)
	b = AppendContentRange(b, 0, 9, 100)
	if !bytes.Equal(b, []byte("HTTP/1.1 404 Not Found\r\nContent-Length: 12\r\nContent-Range: bytes 0-9/100\r\n")) {
		t.Fatalf("%q", b)
	}
}

func BenchmarkParseRequest(b *testing.B) {
	in := []byte("GET /images/ksclogo-medium.gif HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/120.0\r\n" +
		"Accept: image/avif,image/webp,*/*\r\nAccept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\n" +
		"If-None-Match: \"5f3a-1c2b\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n")
	var r Request
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := ParseRequest(in, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseSmall(b *testing.B) {
	in := []byte("GET /1k.bin HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
	var r Request
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(in, &r); err != nil {
			b.Fatal(err)
		}
	}
}
