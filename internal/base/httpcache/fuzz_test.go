package httpcache

import (
	"reflect"
	"testing"
)

// FuzzParseDirectives feeds arbitrary field values to the directive parser
// (seeds in testdata/fuzz/FuzzParseDirectives, from the cache-tests suite's
// malformed fields): it must never panic, delta values stay within
// [0, MaxDelta] or Unset, qualified field lists hold only tokens, and
// parsing is deterministic and unchanged when the value is split at a
// comma-free line boundary (a field's lines are one list, RFC 9110 §5.3).
func FuzzParseDirectives(f *testing.F) {
	f.Add("max-age=3600")
	f.Fuzz(func(t *testing.T, v string) {
		d := ParseDirectives([]string{v})
		for _, x := range []int64{d.MaxAge, d.SMaxAge, d.MaxStale, d.MinFresh, d.StaleWhileRevalidate, d.StaleIfError} {
			if x != Unset && (x < 0 || x > MaxDelta) {
				t.Fatalf("%q: delta %d out of range", v, x)
			}
		}
		for _, n := range append(d.NoCacheFields, d.PrivateFields...) {
			if !isToken(n) {
				t.Fatalf("%q: field name %q is not a token", v, n)
			}
		}
		if again := ParseDirectives([]string{v}); !reflect.DeepEqual(d, again) {
			t.Fatalf("%q: parse not deterministic", v)
		}
		if two := ParseDirectives([]string{v, ""}); !reflect.DeepEqual(d, two) {
			t.Fatalf("%q: an empty second line changed the result", v)
		}
		_ = parseSurrogate([]string{v}, "shoal")
	})
}
