package sim

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"shoal/internal/base/trace"
)

// TestTraceSourceKeysByFile: a log's spellings of one file replay as one
// object, with the largest size any of them was answered with; a
// directory is its index file; a spelling no node would serve, or whose
// file never answered 200, is skipped.
func TestTraceSourceKeysByFile(t *testing.T) {
	log := `h - - [01/Aug/1995:00:00:01 -0400] "GET /a?x=1 HTTP/1.0" 200 100
h - - [01/Aug/1995:00:00:02 -0400] "GET /./a HTTP/1.0" 200 150
h - - [01/Aug/1995:00:00:03 -0400] "GET //a?y HTTP/1.0" 304 0
h - - [01/Aug/1995:00:00:04 -0400] "GET /d/ HTTP/1.0" 200 50
h - - [01/Aug/1995:00:00:05 -0400] "GET /d/index.html HTTP/1.0" 304 0
h - - [01/Aug/1995:00:00:06 -0400] "GET /../etc/passwd HTTP/1.0" 200 9
h - - [01/Aug/1995:00:00:07 -0400] "GET /gone HTTP/1.0" 404 0
`
	raw := map[string]int64{}
	r := trace.NewReader(strings.NewReader(log), trace.Auto)
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status == 200 {
			raw[rec.Key()] = max(raw[rec.Key()], rec.Bytes)
		}
	}
	sizes := ObjectSizes(raw)
	if len(sizes) != 2 || sizes["/a"] != 150 || sizes["/d/index.html"] != 50 {
		t.Fatalf("object sizes %v, want /a 150 and /d/index.html 50", sizes)
	}
	src := NewTraceSource(trace.NewReader(strings.NewReader(log), trace.Auto), sizes)
	var got []string
	for {
		a, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d", a.URL, a.Size))
	}
	want := []string{"/a 150", "/a 150", "/a 150", "/d/index.html 50", "/d/index.html 50"}
	if strings.Join(got, ",") != strings.Join(want, ",") || src.Skipped() != 2 {
		t.Errorf("replayed %v (skipped %d), want %v (skipped 2)", got, src.Skipped(), want)
	}
	if k, ok := ObjectKey(trace.Record{VHost: "a.example", URL: "/x/?q"}); !ok || k != "a.example/x/index.html" {
		t.Errorf("multi-site key %q, %v", k, ok)
	}
}
