package httpcache

import (
	"net/http"
	"testing"
	"time"
)

func stored(h http.Header) *Stored { return NewStored(DefaultConfig(), 200, h, t0, t0) }

func req(method string, cc ...string) *Request {
	h := http.Header{}
	for _, v := range cc {
		h.Add("Cache-Control", v)
	}
	r := ParseRequest(method, h)
	return &r
}

func TestDecide(t *testing.T) {
	fresh := stored(hdr("Cache-Control", "max-age=100", "ETag", `"v1"`))
	noValidator := stored(hdr("Cache-Control", "max-age=100"))
	noCache := stored(hdr("Cache-Control", "no-cache, max-age=100", "ETag", `"v1"`))
	mustRev := stored(hdr("Cache-Control", "max-age=10, must-revalidate", "ETag", `"v1"`))
	swr := stored(hdr("Cache-Control", "max-age=10, stale-while-revalidate=60", "ETag", `"v1"`))
	sMaxAge := stored(hdr("Cache-Control", "s-maxage=10", "ETag", `"v1"`))
	sMaxAgeSWR := stored(hdr("Cache-Control", "s-maxage=10, stale-while-revalidate=60", "ETag", `"v1"`))
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name   string
		req    *Request
		stored *Stored
		now    time.Time
		action Action
		age    int64
		fwd    string
	}{
		{"miss", req("GET"), nil, t0, Fetch, 0, "uri-miss"},
		{"only-if-cached miss", req("GET", "only-if-cached"), nil, t0, Unsatisfiable, 0, "uri-miss"},
		{"POST bypasses", req("POST"), fresh, t0, Bypass, 0, "method"},
		{"fresh hit", req("GET"), fresh, at(50), Serve, 50, ""},
		{"HEAD hit", req("HEAD"), fresh, at(50), Serve, 50, ""},
		{"stale at exactly the lifetime", req("GET"), fresh, at(100), Revalidate, 100, "stale"},
		{"stale without validator fetches", req("GET"), noValidator, at(150), Fetch, 150, "stale"},
		{"request no-cache", req("GET", "no-cache"), fresh, at(1), Revalidate, 1, "request"},
		{"request max-age=0", req("GET", "max-age=0"), fresh, at(1), Revalidate, 1, "request"},
		{"request max-age not exceeded", req("GET", "max-age=5"), fresh, at(5), Serve, 5, ""},
		{"request min-fresh too much", req("GET", "min-fresh=60"), fresh, at(50), Revalidate, 50, "request"},
		{"request min-fresh fine", req("GET", "min-fresh=40"), fresh, at(50), Serve, 50, ""},
		{"request max-stale allows", req("GET", "max-stale=60"), fresh, at(150), Serve, 150, ""},
		{"request max-stale exceeded", req("GET", "max-stale=10"), fresh, at(150), Revalidate, 150, "stale"},
		{"request max-stale any", req("GET", "max-stale"), fresh, at(5000), Serve, 5000, ""},
		{"max-stale vs must-revalidate", req("GET", "max-stale"), mustRev, at(50), Revalidate, 50, "stale"},
		{"max-stale vs s-maxage", req("GET", "max-stale"), sMaxAge, at(50), Revalidate, 50, "stale"},
		{"response no-cache", req("GET"), noCache, at(1), Revalidate, 1, "stale"},
		{"stale-while-revalidate window", req("GET"), swr, at(30), ServeStale, 30, ""},
		{"stale-while-revalidate past", req("GET"), swr, at(100), Revalidate, 100, "stale"},
		{"s-maxage with explicit swr", req("GET"), sMaxAgeSWR, at(30), ServeStale, 30, ""},
		{"only-if-cached stale", req("GET", "only-if-cached"), fresh, at(150), Unsatisfiable, 150, "stale"},
		{"only-if-cached fresh", req("GET", "only-if-cached"), fresh, at(1), Serve, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.req, tt.stored, tt.now)
			if d.Action != tt.action || d.Age != tt.age || d.Fwd != tt.fwd {
				t.Errorf("Decide = %v age %d fwd %q; want %v age %d fwd %q", d.Action, d.Age, d.Fwd, tt.action, tt.age, tt.fwd)
			}
		})
	}
}

func TestStaleOnError(t *testing.T) {
	sie := stored(hdr("Cache-Control", "max-age=10, stale-if-error=60"))
	plain := stored(hdr("Cache-Control", "max-age=10"))
	mustRev := stored(hdr("Cache-Control", "max-age=10, must-revalidate, stale-if-error=60"))
	sMaxAge := stored(hdr("Cache-Control", "s-maxage=10"))
	sMaxAgeSIE := stored(hdr("Cache-Control", "s-maxage=10, stale-if-error=60"))
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cfg := Config{StaleIfDisconnected: time.Hour}
	tests := []struct {
		name   string
		req    *Request
		stored *Stored
		now    time.Time
		disc   bool
		want   bool
	}{
		{"nothing stored", req("GET"), nil, t0, true, false},
		{"fresh", req("GET"), plain, at(5), false, true},
		{"stale 5xx without stale-if-error", req("GET"), plain, at(20), false, false},
		{"stale, disconnected", req("GET"), plain, at(20), true, true},
		{"too stale, disconnected", req("GET"), plain, at(3611), true, false},
		{"within stale-if-error", req("GET"), sie, at(60), false, true},
		{"past stale-if-error", req("GET"), sie, at(80), false, false},
		{"request stale-if-error", req("GET", "stale-if-error=100"), plain, at(100), false, true},
		{"must-revalidate forbids", req("GET"), mustRev, at(20), true, false},
		{"s-maxage forbids on disconnect", req("GET"), sMaxAge, at(20), true, false},
		{"s-maxage with stale-if-error", req("GET"), sMaxAgeSIE, at(20), false, true},
	}
	for _, tt := range tests {
		if got := StaleOnError(cfg, tt.req, tt.stored, tt.now, tt.disc); got != tt.want {
			t.Errorf("%s: StaleOnError = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPrecondition(t *testing.T) {
	st := hdr("ETag", `"abc"`, "Last-Modified", date(-time.Hour), "Date", date(0))
	weak := hdr("ETag", `W/"abc"`, "Date", date(0))
	noLM := hdr("Date", date(-time.Hour))
	tests := []struct {
		name   string
		method string
		req    http.Header
		stored http.Header
		want   int
	}{
		{"no conditionals", "GET", hdr(), st, 0},
		{"INM match", "GET", hdr("If-None-Match", `"abc"`), st, 304},
		{"INM list, middle", "GET", hdr("If-None-Match", `"x", "abc", "y"`), st, 304},
		{"INM weak matches weakly", "GET", hdr("If-None-Match", `W/"abc"`), st, 304},
		{"INM stored weak", "GET", hdr("If-None-Match", `"abc"`), weak, 304},
		{"INM no match", "GET", hdr("If-None-Match", `"zzz"`), st, 0},
		{"INM star", "GET", hdr("If-None-Match", "*"), st, 304},
		{"INM beats IMS", "GET", hdr("If-None-Match", `"zzz"`, "If-Modified-Since", date(0)), st, 0},
		{"INM on POST is 412", "POST", hdr("If-None-Match", `"abc"`), st, 412},
		{"IMS later", "GET", hdr("If-Modified-Since", date(0)), st, 304},
		{"IMS equal", "GET", hdr("If-Modified-Since", date(-time.Hour)), st, 304},
		{"IMS earlier", "GET", hdr("If-Modified-Since", date(-2*time.Hour)), st, 0},
		{"IMS invalid", "GET", hdr("If-Modified-Since", "yesterday"), st, 0},
		{"IMS against Date without Last-Modified", "GET", hdr("If-Modified-Since", date(0)), noLM, 304},
		{"IMS on POST ignored", "POST", hdr("If-Modified-Since", date(0)), st, 0},
		{"If-Match strong", "GET", hdr("If-Match", `"abc"`), st, 0},
		{"If-Match mismatch", "GET", hdr("If-Match", `"zzz"`), st, 412},
		{"If-Match weak never matches", "GET", hdr("If-Match", `"abc"`), weak, 412},
		{"If-Unmodified-Since earlier", "GET", hdr("If-Unmodified-Since", date(-2*time.Hour)), st, 412},
		{"If-Unmodified-Since later", "GET", hdr("If-Unmodified-Since", date(0)), st, 0},
	}
	for _, tt := range tests {
		if got := Precondition(tt.method, tt.req, tt.stored); got != tt.want {
			t.Errorf("%s: Precondition = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestUpdate304(t *testing.T) {
	s := NewStored(DefaultConfig(), 200, hdr(
		"Cache-Control", "max-age=1", "ETag", `"v1"`, "Content-Length", "5", "Content-Type", "text/plain",
		"Test-Header", "old", "Keep", "me", "Age", "3000", "Date", date(-time.Hour)), t0.Add(-time.Hour), t0.Add(-time.Hour))
	later := t0
	u := s.Update(DefaultConfig(), hdr(
		"Cache-Control", "max-age=60", "ETag", `"v2"`, "Content-Length", "0", "Content-Type", "text/html",
		"Test-Header", "new", "Connection", "close, X-Hop", "X-Hop", "1", "Date", date(0)), later, later)
	checks := map[string]string{
		"Cache-Control": "max-age=60", "Etag": `"v1"`, "Content-Length": "5", "Content-Type": "text/html",
		"Test-Header": "new", "Keep": "me", "Age": "", "X-Hop": "", "Connection": "", "Date": date(0),
	}
	for k, want := range checks {
		if got := u.Header.Get(k); got != want {
			t.Errorf("after 304, %s = %q, want %q", k, got, want)
		}
	}
	if u.Fresh.Lifetime != 60 || u.Fresh.InitialAge != 0 || !u.ResponseTime.Equal(later) {
		t.Errorf("freshness after 304: lifetime %d initial age %d at %v", u.Fresh.Lifetime, u.Fresh.InitialAge, u.ResponseTime)
	}
	if s.Header.Get("Test-Header") != "old" {
		t.Error("Update modified the original")
	}
}

func TestStoreHeader(t *testing.T) {
	h := hdr("Connection", "X-Conn, close", "X-Conn", "1", "Keep-Alive", "timeout=5", "Transfer-Encoding", "chunked",
		"Proxy-Authenticate", "Basic", "Upgrade", "h2c", "TE", "trailers", "Set-Cookie", "a=b",
		"Cache-Control", `private="X-Secret", no-cache="X-Later", max-age=9`, "X-Secret", "s", "X-Later", "l", "X-Test-Header", "t")
	s := StoreHeader(DefaultConfig(), h)
	for _, gone := range []string{"Connection", "X-Conn", "Keep-Alive", "Transfer-Encoding", "Proxy-Authenticate", "Upgrade", "Te", "X-Secret", "X-Later"} {
		if _, ok := s[http.CanonicalHeaderKey(gone)]; ok {
			t.Errorf("%s stored", gone)
		}
	}
	for _, kept := range []string{"Set-Cookie", "X-Test-Header", "Cache-Control"} {
		if s.Get(kept) == "" {
			t.Errorf("%s not stored", kept)
		}
	}
	if h.Get("X-Conn") != "1" {
		t.Error("StoreHeader modified its input")
	}
}

func TestInvalidations(t *testing.T) {
	key := Key("http", "example.com", "/a?x=1")
	tests := []struct {
		name   string
		method string
		status int
		h      http.Header
		want   []string
	}{
		{"GET never", "GET", 200, hdr(), nil},
		{"POST 200", "POST", 200, hdr(), []string{key}},
		{"POST 500", "POST", 500, hdr(), nil},
		{"PUT 404", "PUT", 404, hdr(), nil},
		{"DELETE 303 with Location", "DELETE", 303, hdr("Location", "/b"), []string{key, "http://example.com/b"}},
		{"M-SEARCH with Content-Location absolute", "M-SEARCH", 204, hdr("Content-Location", "http://EXAMPLE.com:80/c"), []string{key, "http://example.com/c"}},
		{"other host is not invalidated", "POST", 201, hdr("Location", "http://evil.example/a?x=1"), []string{key}},
		{"both", "PUT", 201, hdr("Location", "/l", "Content-Location", "/cl"), []string{key, "http://example.com/l", "http://example.com/cl"}},
	}
	for _, tt := range tests {
		got := Invalidations(tt.method, tt.status, key, "http", "example.com", tt.h)
		if len(got) != len(tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
			}
		}
	}
}
