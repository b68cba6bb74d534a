package httpwire

import (
	"strings"
	"testing"
)

// TestForwardPath: hand-checked normalisations (RFC 3986 §5.2.4's
// examples among them) and refusals.
func TestForwardPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"", "/"},
		{"/a/b/c", "/a/b/c"},
		{"/a/b/c/./../../g", "/a/g"}, // §5.2.4's example
		{"/mid/content=5/../6", "/mid/6"},
		{"/a/..", "/"},
		{"/a/.", "/a/"},
		{"/..", "/"},
		{"/../../etc/passwd", "/etc/passwd"},
		{"/a//b/", "/a//b/"},
		{"/a/./", "/a/"},
		{"/a/%2e%2E/secret", "/secret"},
		{"/a/.%2e/.%2E/secret", "/secret"},
		{"/%7euser/%41b", "/~user/Ab"},
		{"/x%3fy%3Dz", "/x%3Fy%3Dz"}, // reserved: stays encoded, hex upper-cased
		{"/a b", "/a%20b"},
		{"/caf\xc3\xa9", "/caf%C3%A9"},
		{"/a;b=c:d@e!$&'()*+,", "/a;b=c:d@e!$&'()*+,"},
		{"/a#frag", "/a%23frag"},
		{"a/b", "/a/b"},
	} {
		got, err := ForwardPath(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ForwardPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"/a%2f..%2f..%2fsecret", // one segment here, three at an origin that decodes %2F
		"/a%2F..%2Fsecret",
		"/a%5c..%5csecret",
		"/a\\..\\secret",
		"/a%00b", "/a%0d%0aSet-Cookie:x", "/a\nb", "/a%7f",
		"/a%", "/a%2", "/a%zz", "/a%2g",
	} {
		if got, err := ForwardPath(in); err == nil {
			t.Errorf("ForwardPath(%q) = %q, want refused", in, got)
		}
	}
}

// TestForwardPathUnchanged: the paths it accepts are ForwardPath's fixed
// points, and it declines every path ForwardPath would change or refuse.
func TestForwardPathUnchanged(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"/", true}, {"/a/b/c", true}, {"/a//b/", true}, {"/a;b=c:d@e!$&'()*+,", true}, {"/.well-known", false},
		{"", false}, {"a/b", false}, {"/a/./b", false}, {"/a/..", false}, {"/a/.", false}, {"/%7euser", false},
		{"/a b", false}, {"/a#frag", false}, {"/a?q", false}, {"/a\\b", false}, {"/caf\xc3\xa9", false}, {"/a%2fb", false},
	} {
		if got := ForwardPathUnchanged([]byte(tc.in)); got != tc.want {
			t.Errorf("ForwardPathUnchanged(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if out, err := ForwardPath(tc.in); tc.want && (err != nil || out != tc.in) {
			t.Errorf("ForwardPath(%q) = %q, %v: not a fixed point", tc.in, out, err)
		}
	}
}

// FuzzForwardPath: whatever is accepted starts with "/", holds no "." or
// ".." segment and no encoded slash, backslash or control character, only
// path characters and %-escapes, and is its own normal form.
func FuzzForwardPath(f *testing.F) {
	for _, s := range []string{"/a/b/../c", "/a%2f..", "/%2e%2e/x", "/a b/./c/", "/~%7E%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := ForwardPath(in)
		if ForwardPathUnchanged([]byte(in)) && (err != nil || out != in) {
			t.Fatalf("%q → %q, %v: ForwardPathUnchanged said it stays", in, out, err)
		}
		if err != nil {
			return
		}
		if out == "" || out[0] != '/' {
			t.Fatalf("%q → %q: not absolute", in, out)
		}
		for _, seg := range strings.Split(out[1:], "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q → %q: dot-segment left", in, out)
			}
		}
		for i := 0; i < len(out); i++ {
			c := out[i]
			if c == '%' {
				v := Unhex(out[i+1])<<4 | Unhex(out[i+2])
				if v == '/' || v == '\\' || v < 0x20 || v == 0x7f || unreserved(byte(v)) {
					t.Fatalf("%q → %q: escape %s left", in, out, out[i:i+3])
				}
				i += 2
				continue
			}
			if c != '/' && !pchar(c) {
				t.Fatalf("%q → %q: byte %q", in, out, c)
			}
		}
		if again, err := ForwardPath(out); err != nil || again != out {
			t.Fatalf("%q → %q → %q, %v: not its own normal form", in, out, again, err)
		}
	})
}
