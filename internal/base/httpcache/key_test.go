package httpcache

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestKey(t *testing.T) {
	tests := []struct {
		scheme, host, target, want string
	}{
		{"http", "Example.COM", "/a/b?q=1", "http://example.com/a/b?q=1"},
		{"http", "example.com:80", "/", "http://example.com/"},
		{"https", "example.com:443", "/", "https://example.com/"},
		{"http", "example.com:8080", "/", "http://example.com:8080/"},
		{"https", "example.com:80", "/", "https://example.com:80/"},
		{"http", "[::1]:80", "/x", "http://[::1]/x"},
		{"http", "h", "/a#frag", "http://h/a"},
		{"http", "h", "http://other/p?q", "http://h/p?q"},
		{"http", "h", "http://other", "http://h/"},
		{"http", "h", "?q", "http://h/?q"},
		{"", "h", "/Case/Kept?B=2&a=1", "http://h/Case/Kept?B=2&a=1"},
	}
	for _, tt := range tests {
		if got := Key(tt.scheme, tt.host, tt.target); got != tt.want {
			t.Errorf("Key(%q, %q, %q) = %q, want %q", tt.scheme, tt.host, tt.target, got, tt.want)
		}
		if got := string(AppendKey([]byte("k:"), tt.scheme, tt.host, tt.target)); got != "k:"+tt.want {
			t.Errorf("AppendKey(%q, %q, %q) = %q, want %q", tt.scheme, tt.host, tt.target, got, "k:"+tt.want)
		}
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendKey(buf[:0], "HTTP", "Example.com:80", "/a?b") }); n != 0 {
		t.Errorf("AppendKey into a large enough buffer: %v allocations", n)
	}
}

func TestVaryNames(t *testing.T) {
	names, star := VaryNames(hdr("Vary", "Accept-Encoding, user-agent", "Vary", "ACCEPT-ENCODING"))
	if !reflect.DeepEqual(names, []string{"accept-encoding", "user-agent"}) || star {
		t.Errorf("VaryNames = %q %v", names, star)
	}
	for _, v := range [][]string{{"*"}, {"*, *"}, {", *"}, {"Foo", "*"}} {
		h := hdr()
		for _, l := range v {
			h.Add("Vary", l)
		}
		if _, star := VaryNames(h); !star {
			t.Errorf("Vary %q: no star", v)
		}
	}
}

func TestVariantKey(t *testing.T) {
	names := []string{"accept-language", "foo"}
	k := func(kv ...string) string { return VariantKey("http://h/", names, hdr(kv...)) }
	same := [][2]string{
		{k("Foo", "a, b"), k("Foo", "a", "Foo", "b")},                   // lines combined
		{k("Foo", "a,b"), k("Foo", "a , b")},                            // whitespace around commas
		{k("Accept-Language", "en, fr"), k("Accept-Language", "fr,en")}, // order carries no meaning
		{k("Accept-Language", "EN-us"), k("Accept-Language", "en-US")},  // case
		{k("Accept-Language", "fr;q=0.5, en"), k("Accept-Language", "en, fr;q=0.5")},
	}
	for i, p := range same {
		if p[0] != p[1] {
			t.Errorf("pair %d: %q != %q", i, p[0], p[1])
		}
	}
	differ := [][2]string{
		{k("Foo", "a"), k("Foo", "b")},
		{k(), k("Foo", "")}, // absent is not empty
		{k("Foo", "a"), k("Accept-Language", "a")},
		{k("Foo", "ab"), k("Foo", "a", "Foo", "b")},
		{k("Accept-Language", "fr;q=0.5, en"), k("Accept-Language", "fr, en;q=0.5")},
	}
	for i, p := range differ {
		if p[0] == p[1] {
			t.Errorf("differ pair %d: both %q", i, p[0])
		}
	}
	if VariantKey("http://h/", nil, hdr("Foo", "x")) != "http://h/" {
		t.Error("no Vary: key is not the primary key")
	}
	if !strings.HasPrefix(k("Foo", "x"), VariantPrefix("http://h/")) {
		t.Error("variant key outside VariantPrefix")
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	s := NewStored(DefaultConfig(), 404, hdr("Cache-Control", "max-age=60, stale-if-error=5, must-revalidate",
		"Vary", "Foo", "Set-Cookie", "a=1", "Set-Cookie", "b=2", "Date", date(0)), t0.Add(-time.Second), t0)
	b := s.Encode(nil)
	got, err := DecodeStored(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Header, s.Header) || got.Status != 404 || got.Fresh != s.Fresh ||
		!got.RequestTime.Equal(s.RequestTime) || !got.ResponseTime.Equal(s.ResponseTime) || !reflect.DeepEqual(got.Vary, s.Vary) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, s)
	}
	for i := range b {
		if _, err := DecodeStored(b[:i]); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
}

func TestCacheStatusFormat(t *testing.T) {
	tests := []struct {
		c    CacheStatus
		want string
	}{
		{CacheStatus{Hit: true, TTL: 30, HasTTL: true}, "shoal; hit; ttl=30"},
		{CacheStatus{Fwd: "uri-miss", FwdStatus: 200, Stored: true}, "shoal; fwd=uri-miss; fwd-status=200; stored"},
		{CacheStatus{Fwd: "stale", FwdStatus: 304, TTL: -5, HasTTL: true, Collapsed: true}, "shoal; fwd=stale; fwd-status=304; ttl=-5; collapsed"},
		{CacheStatus{Fwd: "method", Detail: "no-store"}, "shoal; fwd=method; detail=no-store"},
	}
	for _, tt := range tests {
		if got := tt.c.Format("shoal"); got != tt.want {
			t.Errorf("Format = %q, want %q", got, tt.want)
		}
	}
}
