package httpcache

import (
	"net/http"
	"reflect"
	"testing"
)

func TestParseDirectives(t *testing.T) {
	type want struct {
		maxAge, sMaxAge, maxStale, swr, sie int64
		noStore, noCache, private, public   bool
		mustRevalidate, conflict            bool
		noCacheFields                       []string
	}
	u := Unset
	tests := []struct {
		name  string
		lines []string
		want  want
	}{
		{"empty", nil, want{u, u, u, u, u, false, false, false, false, false, false, nil}},
		{"max-age", []string{"max-age=3600"}, want{3600, u, u, u, u, false, false, false, false, false, false, nil}},
		{"case-insensitive name", []string{"MaX-AgE=60, nO-StOrE"}, want{60, u, u, u, u, true, false, false, false, false, false, nil}},
		{"leading zeros", []string{"max-age=003600"}, want{3600, u, u, u, u, false, false, false, false, false, false, nil}},
		{"quoted value", []string{`max-age="3600"`}, want{3600, u, u, u, u, false, false, false, false, false, false, nil}},
		{"single-quoted is malformed", []string{`max-age='3600'`}, want{u, u, u, u, u, false, false, false, false, false, false, nil}},
		{"decimal is malformed", []string{"max-age=3600.0"}, want{u, u, u, u, u, false, false, false, false, false, false, nil}},
		{"negative is malformed", []string{"max-age=-1"}, want{u, u, u, u, u, false, false, false, false, false, false, nil}},
		{"space before =", []string{"max-age =3600, public"}, want{u, u, u, u, u, false, false, false, true, false, false, nil}},
		{"space after =", []string{"max-age= 3600"}, want{u, u, u, u, u, false, false, false, false, false, false, nil}},
		{"trailing alpha", []string{"max-age=3600a"}, want{u, u, u, u, u, false, false, false, false, false, false, nil}},
		{"max-age inside a quoted string before", []string{`extension="max-age=3600", max-age=1`}, want{1, u, u, u, u, false, false, false, false, false, false, nil}},
		{"max-age inside a quoted string after", []string{`max-age=1, extension="max-age=3600"`}, want{1, u, u, u, u, false, false, false, false, false, false, nil}},
		{"quoted string with escaped quote", []string{`x="a\", max-age=9", max-age=2`}, want{2, u, u, u, u, false, false, false, false, false, false, nil}},
		{"overflow clamps to 2^31", []string{"max-age=99999999999"}, want{MaxDelta, u, u, u, u, false, false, false, false, false, false, nil}},
		{"2^31 exactly", []string{"max-age=2147483648"}, want{MaxDelta, u, u, u, u, false, false, false, false, false, false, nil}},
		{"conflict keeps the smaller", []string{"max-age=3600, max-age=1"}, want{1, u, u, u, u, false, false, false, false, false, true, nil}},
		{"conflict across lines", []string{"max-age=1", "max-age=1800"}, want{1, u, u, u, u, false, false, false, false, false, true, nil}},
		{"same duplicate is no conflict", []string{"max-age=5, max-age=5"}, want{5, u, u, u, u, false, false, false, false, false, false, nil}},
		{"s-maxage and stale windows", []string{"s-maxage=10, stale-while-revalidate=30, stale-if-error=600"}, want{u, 10, u, 30, 600, false, false, false, false, false, false, nil}},
		{"qualified no-cache", []string{`no-cache="Set-Cookie, X-Foo", max-age=60`}, want{60, u, u, u, u, false, false, false, false, false, false, []string{"set-cookie", "x-foo"}}},
		{"unqualified no-cache", []string{"no-cache"}, want{u, u, u, u, u, false, true, false, false, false, false, nil}},
		{"private and must-revalidate", []string{"private, must-revalidate"}, want{u, u, u, u, u, false, false, true, false, true, false, nil}},
		{"flag with an argument is ignored", []string{"no-store=1"}, want{u, u, u, u, u, false, false, false, false, false, false, nil}},
		{"max-stale value", []string{"max-stale=30"}, want{u, u, 30, u, u, false, false, false, false, false, false, nil}},
		{"empty elements", []string{",, ,max-age=7,,"}, want{7, u, u, u, u, false, false, false, false, false, false, nil}},
		{"unclosed quote swallows the rest", []string{`foo="bar, max-age=9`}, want{u, u, u, u, u, false, false, false, false, false, false, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ParseDirectives(tt.lines)
			got := want{d.MaxAge, d.SMaxAge, d.MaxStale, d.StaleWhileRevalidate, d.StaleIfError,
				d.NoStore, d.NoCache, d.Private, d.Public, d.MustRevalidate, d.Conflict, d.NoCacheFields}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseDirectives(%q)\n got %+v\nwant %+v", tt.lines, got, tt.want)
			}
		})
	}
}

func TestMaxStaleAny(t *testing.T) {
	d := ParseDirectives([]string{"max-stale"})
	if !d.MaxStaleAny || d.MaxStale != Unset {
		t.Fatalf("max-stale without value: MaxStaleAny=%v MaxStale=%d", d.MaxStaleAny, d.MaxStale)
	}
}

func TestResponseDirectivesTargeted(t *testing.T) {
	tests := []struct {
		name     string
		h        http.Header
		maxAge   int64
		noStore  bool
		targeted bool
	}{
		{"cache-control only", http.Header{"Cache-Control": {"max-age=10"}}, 10, false, false},
		{"CDN-Cache-Control wins", http.Header{"Cache-Control": {"no-store"}, "Cdn-Cache-Control": {"max-age=60"}}, 60, false, true},
		{"surrogate untargeted", http.Header{"Cache-Control": {"max-age=1"}, "Surrogate-Control": {"max-age=3600"}}, 3600, false, true},
		{"surrogate targeted at us", http.Header{"Surrogate-Control": {"max-age=3600;shoal"}}, 3600, false, true},
		{"surrogate targeted elsewhere", http.Header{"Cache-Control": {"max-age=5"}, "Surrogate-Control": {"max-age=3600;not-for-you"}}, 5, false, false},
		{"surrogate no-store", http.Header{"Cache-Control": {"max-age=3600"}, "Surrogate-Control": {"no-store"}}, Unset, true, true},
		{"surrogate mixed targets", http.Header{"Surrogate-Control": {"max-age=1;other, max-age=30;SHOAL"}}, 30, false, true},
		{"CDN-Cache-Control with nothing understood is absent", http.Header{"Cache-Control": {"max-age=2"}, "Cdn-Cache-Control": {"foo"}}, 2, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, targeted := ResponseDirectives(tt.h, "shoal")
			if d.MaxAge != tt.maxAge || d.NoStore != tt.noStore || targeted != tt.targeted {
				t.Errorf("got max-age %d no-store %v targeted %v; want %d %v %v",
					d.MaxAge, d.NoStore, targeted, tt.maxAge, tt.noStore, tt.targeted)
			}
		})
	}
}
