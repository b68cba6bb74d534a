package httpcache

import (
	"net/http"
	"testing"
	"time"
)

// t0 is the tests' clock: the moment every response arrives.
var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func date(d time.Duration) string { return t0.Add(d).Format(http.TimeFormat) }

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestComputeFreshness(t *testing.T) {
	cfg := DefaultConfig()
	tests := []struct {
		name       string
		status     int
		h          http.Header
		lifetime   int64
		initialAge int64
		heuristic  bool
	}{
		{"max-age", 200, hdr("Cache-Control", "max-age=3600", "Date", date(0)), 3600, 0, false},
		{"s-maxage beats max-age", 200, hdr("Cache-Control", "max-age=3600, s-maxage=10"), 10, 0, false},
		{"s-maxage beats max-age, reversed", 200, hdr("Cache-Control", "s-maxage=10, max-age=3600"), 10, 0, false},
		{"max-age beats Expires", 200, hdr("Cache-Control", "max-age=60", "Expires", date(-time.Hour), "Date", date(0)), 60, 0, false},
		{"Expires minus Date", 200, hdr("Expires", date(time.Hour), "Date", date(0)), 3600, 0, false},
		{"Expires minus an old Date", 200, hdr("Expires", date(0), "Date", date(-10*time.Second)), 10, 10, false},
		{"invalid Expires is expired", 200, hdr("Expires", "0", "Date", date(0)), 0, 0, false},
		{"two Expires lines are expired", 200, hdr("Expires", date(time.Hour), "Expires", date(time.Hour), "Date", date(0)), 0, 0, false},
		{"Expires with invalid Date uses arrival", 200, hdr("Expires", date(time.Hour), "Date", "garbage"), 3600, 0, false},
		{"Age counts", 200, hdr("Cache-Control", "max-age=3600", "Age", "3600", "Date", date(0)), 3600, 3600, false},
		{"Age with a list is untrusted", 200, hdr("Cache-Control", "max-age=3600", "Age", "0, 0"), 3600, MaxDelta, false},
		{"two Age lines are untrusted", 200, hdr("Cache-Control", "max-age=3600", "Age", "0", "Age", "0"), 3600, MaxDelta, false},
		{"negative Age is untrusted", 200, hdr("Cache-Control", "max-age=3600", "Age", "-1"), 3600, MaxDelta, false},
		{"float Age is untrusted", 200, hdr("Cache-Control", "max-age=3600", "Age", "1.5"), 3600, MaxDelta, false},
		{"heuristic 10 % of Last-Modified age", 200, hdr("Last-Modified", date(-1000*time.Second), "Date", date(0)), 100, 0, true},
		{"heuristic capped at a day", 200, hdr("Last-Modified", date(-100*24*time.Hour), "Date", date(0)), 86400, 0, true},
		{"no heuristic for 201", 201, hdr("Last-Modified", date(-1000*time.Second)), 0, 0, false},
		{"public allows heuristic for 599", 599, hdr("Cache-Control", "public", "Last-Modified", date(-1000*time.Second)), 100, 0, true},
		{"heuristic without Last-Modified is zero", 200, hdr(), 0, 0, true},
		{"CDN-Cache-Control ignores Cache-Control and Expires", 200, hdr("Cdn-Cache-Control", "max-age=30", "Cache-Control", "max-age=1", "Expires", date(time.Hour)), 30, 0, false},
		{"targeted without max-age: no Expires", 200, hdr("Cdn-Cache-Control", "must-revalidate", "Expires", date(time.Hour)), 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ComputeFreshness(cfg, tt.status, tt.h, t0, t0)
			if f.Lifetime != tt.lifetime || f.InitialAge != tt.initialAge || f.Heuristic != tt.heuristic {
				t.Errorf("lifetime %d initial age %d heuristic %v; want %d %d %v",
					f.Lifetime, f.InitialAge, f.Heuristic, tt.lifetime, tt.initialAge, tt.heuristic)
			}
		})
	}
}

// TestInitialAge checks RFC 9111 §4.2.3's arithmetic: the larger of the
// apparent age and the Age field plus the request's round trip.
func TestInitialAge(t *testing.T) {
	req, resp := t0.Add(-3*time.Second), t0
	tests := []struct {
		name string
		h    http.Header
		want int64
	}{
		{"no Age, Date now: the round trip", hdr("Date", date(0)), 3},
		{"Age plus round trip", hdr("Date", date(0), "Age", "10"), 13},
		{"apparent age wins", hdr("Date", date(-60*time.Second), "Age", "10"), 60},
		{"Date in the future: apparent 0", hdr("Date", date(time.Minute)), 3},
	}
	for _, tt := range tests {
		f := ComputeFreshness(DefaultConfig(), 200, tt.h, req, resp)
		if f.InitialAge != tt.want {
			t.Errorf("%s: initial age %d, want %d", tt.name, f.InitialAge, tt.want)
		}
	}
	f := Freshness{InitialAge: 5}
	if got := f.CurrentAge(t0, t0.Add(2500*time.Millisecond)); got != 7 {
		t.Errorf("current age = %d, want 7 (5 + 2 whole seconds resident)", got)
	}
	f.InitialAge = MaxDelta
	if got := f.CurrentAge(t0, t0.Add(time.Hour)); got != MaxDelta {
		t.Errorf("untrusted age grew to %d", got)
	}
}

func TestStorable(t *testing.T) {
	get := &Request{Method: "GET", Dir: newDirectives()}
	auth := &Request{Method: "GET", Dir: newDirectives(), Authorization: true}
	noStoreReq := &Request{Method: "GET", Dir: ParseDirectives([]string{"no-store"})}
	post := &Request{Method: "POST", Dir: newDirectives()}
	tests := []struct {
		name   string
		req    *Request
		status int
		h      http.Header
		ok     bool
		why    string
	}{
		{"fresh 200", get, 200, hdr("Cache-Control", "max-age=60"), true, ""},
		{"POST", post, 200, hdr("Cache-Control", "max-age=60"), false, NotMethod},
		{"206", get, 206, hdr("Cache-Control", "max-age=60"), false, NotStatus},
		{"no-store", get, 200, hdr("Cache-Control", "max-age=60, no-store"), false, NotNoStore},
		{"no-store case-insensitive", get, 200, hdr("Cache-Control", "nO-StOrE"), false, NotNoStore},
		{"request no-store", noStoreReq, 200, hdr("Cache-Control", "max-age=60"), false, NotRequestNoStore},
		{"private", get, 200, hdr("Cache-Control", "private, max-age=60"), false, NotPrivate},
		{"qualified private is storable", get, 200, hdr("Cache-Control", `private="Set-Cookie", max-age=60`), true, ""},
		{"Authorization", auth, 200, hdr("Cache-Control", "max-age=60"), false, NotAuthorization},
		{"Authorization with public", auth, 200, hdr("Cache-Control", "max-age=60, public"), true, ""},
		{"Authorization with s-maxage", auth, 200, hdr("Cache-Control", "s-maxage=60"), true, ""},
		{"Authorization with must-revalidate", auth, 200, hdr("Cache-Control", "max-age=60, must-revalidate"), true, ""},
		{"Vary star", get, 200, hdr("Cache-Control", "max-age=60", "Vary", "Foo, *"), false, NotVaryStar},
		{"must-understand unknown status", get, 599, hdr("Cache-Control", "max-age=60, must-understand, no-store"), false, NotUnderstood},
		{"must-understand overrides no-store", get, 200, hdr("Cache-Control", "max-age=60, must-understand, no-store"), true, ""},
		{"201 without freshness", get, 201, hdr("Last-Modified", date(-time.Hour)), false, NotExplicit},
		{"201 with max-age", get, 201, hdr("Cache-Control", "max-age=60"), true, ""},
		{"surrogate overrides no-store", get, 200, hdr("Cache-Control", "no-store", "Surrogate-Control", "max-age=60"), true, ""},
		{"surrogate no-store", get, 200, hdr("Cache-Control", "max-age=60", "Surrogate-Control", "no-store"), false, NotNoStore},
		{"200 with nothing: never reusable", get, 200, hdr(), false, NotUseful},
		{"200 with only an ETag: revalidatable", get, 200, hdr("ETag", `"a"`), true, ""},
		{"max-age=0 with stale-if-error", get, 200, hdr("Cache-Control", "max-age=0, stale-if-error=60"), true, ""},
		{"404 heuristic", get, 404, hdr("Last-Modified", date(-time.Hour)), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ComputeFreshness(DefaultConfig(), tt.status, tt.h, t0, t0)
			ok, why := Storable(DefaultConfig(), tt.req, tt.status, tt.h, &f)
			if ok != tt.ok || why != tt.why {
				t.Errorf("Storable = %v %q, want %v %q", ok, why, tt.ok, tt.why)
			}
		})
	}
}
