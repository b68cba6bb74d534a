package front

import (
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"

	"shoal/internal/base/httpwire"
)

// TestResponseBlock encodes response heads and decodes them with x/net's
// HPACK decoder: statuses in and out of the static table, names in and out
// of it (lowered), set-cookie never indexed, and lengths that need more
// than one byte of integer.
func TestResponseBlock(t *testing.T) {
	long := strings.Repeat("v", 300)
	cases := []struct {
		status int
		fields [][2]string
		want   []hpack.HeaderField
	}{
		{200, nil, []hpack.HeaderField{{Name: ":status", Value: "200"}}},
		{404, [][2]string{{"Content-Length", "5"}}, []hpack.HeaderField{{Name: ":status", Value: "404"}, {Name: "content-length", Value: "5"}}},
		{418, [][2]string{{"X-Custom-Header", long}}, []hpack.HeaderField{{Name: ":status", Value: "418"}, {Name: "x-custom-header", Value: long}}},
		{302, [][2]string{{"Set-Cookie", "a=1"}, {"Location", "/x"}, {"Vary", "Accept-Encoding"}},
			[]hpack.HeaderField{{Name: ":status", Value: "302"}, {Name: "set-cookie", Value: "a=1", Sensitive: true},
				{Name: "location", Value: "/x"}, {Name: "vary", Value: "Accept-Encoding"}}},
		{200, [][2]string{{strings.Repeat("N", 200), ""}}, []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: strings.Repeat("n", 200)}}},
	}
	for _, c := range cases {
		var hs []httpwire.Header
		for _, f := range c.fields {
			hs = append(hs, httpwire.Header{Name: []byte(f[0]), Value: []byte(f[1])})
		}
		got, err := hpack.NewDecoder(4096, nil).DecodeFull(appendResponseBlock(nil, c.status, hs))
		if err != nil {
			t.Errorf("%d %v: %v", c.status, c.fields, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%d: decoded %v, want %v", c.status, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%d field %d: %+v, want %+v", c.status, i, got[i], c.want[i])
			}
		}
	}
}
