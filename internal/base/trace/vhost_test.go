package trace

import (
	"io"
	"reflect"
	"strings"
	"testing"
)

// TestVHostFormats reads the two multi-site layouts: Apache's vhost_combined
// ("%v:%p %h %l %u %t \"%r\" %>s %O \"%{Referer}i\" \"%{User-Agent}i\"") and
// nginx's "$host $remote_addr - $remote_user [$time_local] ...", which
// AppendCLF writes; plain CLF keeps VHost empty.
func TestVHostFormats(t *testing.T) {
	cases := []struct{ line, vhost, host, url string }{
		{`www.example.com:80 192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326 "http://r/" "UA/1.0"`, "www.example.com", "192.0.2.1", "/a.gif"},
		{`b.example 192.0.2.2 - frank [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 10`, "b.example", "192.0.2.2", "/"},
		{`[2001:db8::1]:8080 192.0.2.3 - - [10/Oct/2000:13:55:36 -0700] "GET /x HTTP/1.1" 404 0`, "[2001:db8::1]", "192.0.2.3", "/x"},
		{`192.0.2.4 - - [10/Oct/2000:13:55:36 -0700] "GET /c HTTP/1.0" 200 1`, "", "192.0.2.4", "/c"},
	}
	for _, c := range cases {
		r, err := ParseLine([]byte(c.line), Auto)
		if err != nil || r.VHost != c.vhost || r.Host != c.host || r.URL != c.url {
			t.Errorf("%s: %+v %v", c.line, r, err)
		}
	}
	// AppendCLF writes VHost first and reads back the same record.
	rec := Record{VHost: "a.example", Host: "10.0.0.1", Method: "GET", URL: "/i.html", Proto: "HTTP/1.1", Status: 200, Bytes: 5}
	plain, _ := ParseLine([]byte(cases[3].line), CLF)
	rec.Time = plain.Time
	back, err := ParseLine(AppendCLF(nil, rec), CLF)
	rec.Time = back.Time
	if err != nil || !reflect.DeepEqual(back, rec) || back.Key() != "a.example/i.html" {
		t.Errorf("round trip: %+v %v", back, err)
	}
}

// TestMultiSiteStats generates a three-site log, writes and reads it back
// as text, and checks the per-site counts and that keys are site + URL.
func TestMultiSiteStats(t *testing.T) {
	g, err := Synth{Files: 90, Requests: 3000, Sites: 3, Seed: 7}.New()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	perSite := map[string]int64{}
	for {
		r, err := g.Next()
		if err == io.EOF {
			break
		}
		perSite[r.VHost]++
		b.Write(AppendCLF(nil, r))
	}
	s, err := Stats(NewReader(strings.NewReader(b.String()), Auto))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Sites) != 3 || s.Requests != 3000 {
		t.Fatalf("sites %+v, requests %d", s.Sites, s.Requests)
	}
	for _, sc := range s.Sites {
		if sc.Requests != perSite[sc.Site] || sc.UniqueURLs > 30 {
			t.Errorf("%+v, generated %d", sc, perSite[sc.Site])
		}
	}
	for k := range g.Sizes() {
		if !strings.HasPrefix(k, "site") || !strings.Contains(k, ".example/synth/") {
			t.Fatalf("size key %q is not site + URL", k)
		}
	}
}
