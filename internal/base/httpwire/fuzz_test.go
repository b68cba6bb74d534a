package httpwire

import (
	"bytes"
	"testing"
)

// FuzzParseRequest checks that Parse never panics, never reports a head
// longer than its input, and that every accepted head re-serialises (with
// AppendRequest) into bytes that parse to the same fields. The seed corpus in
// testdata/fuzz/FuzzParseRequest holds valid, pipelined and refused heads.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(simpleGET))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Request
		n, err := ParseRequest(in, &r)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if n <= 0 || n > len(in) {
			t.Fatalf("n = %d for input of %d bytes", n, len(in))
		}
		out := AppendRequest(nil, &r)
		var r2 Request
		n2, err := ParseRequest(out, &r2)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", out, err)
		}
		if n2 != len(out) {
			t.Fatalf("re-parse consumed %d of %d", n2, len(out))
		}
		if !sameRequest(&r, &r2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", r, r2)
		}
	})
}

func sameRequest(a, b *Request) bool {
	if !bytes.Equal(a.Method, b.Method) || !bytes.Equal(a.Target, b.Target) || a.Minor != b.Minor ||
		a.ContentLength != b.ContentLength || a.Chunked != b.Chunked || a.Close != b.Close ||
		a.KeepAlive != b.KeepAlive || a.HasHost != b.HasHost || !bytes.Equal(a.Host, b.Host) ||
		!bytes.Equal(a.IfNoneMatch, b.IfNoneMatch) || !bytes.Equal(a.IfModifiedSince, b.IfModifiedSince) ||
		!bytes.Equal(a.Range, b.Range) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if !bytes.Equal(a.Headers[i].Name, b.Headers[i].Name) || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}
