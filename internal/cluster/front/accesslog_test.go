package front

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/trace"
	"shoal/internal/testutil"
	"shoal/internal/tools/loadgen"
)

// TestAccessLogFormats sends the same three requests through a front in
// each format and checks every line by hand: CLF and combined parse back
// with the trace reader (what `shoal sim` replays), JSON carries the node,
// policy, path and timings, and a header cannot break out of its field.
func TestAccessLogFormats(t *testing.T) {
	for _, tc := range []struct {
		format AccessLogFormat
		want   []string // substrings of each line, in order of the requests
	}{
		{LogCommon, []string{
			`] "GET /a?x=1 HTTP/1.1" 200 5`,
			`] "HEAD /b HTTP/1.0" 200 0`,
			`] "GET /c HTTP/1.1" 200 5`,
		}},
		{LogCombined, []string{
			`] "GET /a?x=1 HTTP/1.1" 200 5 "http://ref/" "agent \x22q\x22 \x5C"`,
			`] "HEAD /b HTTP/1.0" 200 0 "-" "-"`,
			`] "GET /c HTTP/1.1" 200 5 "-" "-"`,
		}},
		{LogJSON, []string{
			`"client":"127.0.0.1","method":"GET","url":"/a?x=1","proto":"HTTP/1.1","status":200,"bytes":5,"referer":"http://ref/","user_agent":"agent \"q\" \\","node":"http://`,
			`"method":"HEAD","url":"/b","proto":"HTTP/1.0","status":200,"bytes":0,`,
			`"url":"/c","proto":"HTTP/1.1","status":200,"bytes":5,`,
		}},
	} {
		t.Run(tc.format.String(), func(t *testing.T) {
			be := namedBackend(t, "n0")
			var buf testutil.SyncBuf
			l := NewAccessLog(&buf, tc.format)
			addr, _, _ := startFront(t, Config{AccessLog: l}, be.URL)
			c := dialFront(t, addr)
			c.do("GET /a?x=1 HTTP/1.1\r\nHost: x\r\nReferer: http://ref/\r\nUser-Agent: agent \"q\" \\\r\n\r\n")
			c.do("HEAD /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			c.do(get("/c"))
			waitLines(t, l, 3)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tc.want), buf.String())
			}
			for i, line := range lines {
				if !strings.Contains(line, tc.want[i]) {
					t.Errorf("line %d:\n%s\nwant it to contain\n%s", i, line, tc.want[i])
				}
				switch tc.format {
				case LogJSON:
					var m map[string]any
					if err := json.Unmarshal([]byte(line), &m); err != nil {
						t.Fatalf("line %d is not JSON: %v\n%s", i, err, line)
					}
					for _, k := range []string{"node", "node_index", "policy", "path", "upstream_ms", "duration_ms", "retried", "time"} {
						if _, ok := m[k]; !ok {
							t.Errorf("line %d has no %q: %s", i, k, line)
						}
					}
					if m["policy"] != "testrr" || m["path"] != "relay" || m["node_index"] != 0.0 {
						t.Errorf("line %d: policy %v path %v node_index %v", i, m["policy"], m["path"], m["node_index"])
					}
				default:
					r, err := trace.ParseLine([]byte(line), trace.CLF)
					if err != nil {
						t.Fatalf("line %d does not parse as CLF: %v\n%s", i, err, line)
					}
					if r.Host != "127.0.0.1" || r.Status != 200 {
						t.Errorf("line %d parsed as %+v", i, r)
					}
				}
			}
		})
	}
}

// waitLines waits until l has written n lines: a line is written just after
// the response, so the client can see the response first.
func waitLines(t *testing.T, l *AccessLog, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); l.Lines() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// TestAccessLogFrontAnswers logs what the front answers itself: a 502
// when the node cannot be reached, with the length of its canned body.
func TestAccessLogFrontAnswers(t *testing.T) {
	var buf testutil.SyncBuf
	l := NewAccessLog(&buf, LogCommon)
	addr, _, _ := startFront(t, Config{AccessLog: l}, "http://127.0.0.1:1")
	c := dialFront(t, addr)
	c.do(get("/x"))
	waitLines(t, l, 1)
	l.Close()
	want := `"GET /x HTTP/1.1" 502 12` // "Bad Gateway\n"
	if !strings.Contains(buf.String(), want) {
		t.Fatalf("log %q, want %q", buf.String(), want)
	}
}

// TestAccessLogReplaysBenchRun: the front's log
// of a load-generator run (what `shoal bench http` drives) reads back
// through the trace reader — what `shoal sim` and `shoal trace` use — with
// exactly as many records as the run completed requests, and the URLs the
// run asked for.
func TestAccessLogReplaysBenchRun(t *testing.T) {
	be := namedBackend(t, "n0")
	be2 := namedBackend(t, "n1")
	var buf testutil.SyncBuf
	l := NewAccessLog(&buf, LogCommon)
	addr, _, _ := startFront(t, Config{AccessLog: l}, be.URL, be2.URL)
	targets := loadgen.List{"/a.html", "/b/c.css", "/d.js?v=2"}
	r, err := loadgen.New(loadgen.Config{URL: "http://" + addr, Workload: targets, Connections: 4, Requests: 600})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitLines(t, l, res.Requests)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rd := trace.NewReader(strings.NewReader(buf.String()), trace.Auto)
	n := uint64(0)
	urls := map[string]int{}
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		n++
		urls[rec.URL]++
	}
	if n != res.Requests || rd.Malformed() != 0 {
		t.Fatalf("log replays %d records (%d malformed), the run completed %d requests", n, rd.Malformed(), res.Requests)
	}
	if l.Lines() != res.Requests {
		t.Fatalf("Lines() = %d, want %d", l.Lines(), res.Requests)
	}
	for _, u := range targets {
		if urls[u] == 0 {
			t.Errorf("no record of %s in %v", u, urls)
		}
	}
}

// BenchmarkRelayAccessLog is BenchmarkRelay's 1 KB case with the access log
// on (to a discarding writer): the per-request line must not allocate.
func BenchmarkRelayAccessLog(b *testing.B) {
	for _, f := range []AccessLogFormat{LogCommon, LogJSON} {
		b.Run(f.String(), func(b *testing.B) {
			node := cannedBackend(b, 1<<10)
			l := NewAccessLog(discard{}, f)
			defer l.Close()
			addr, _, _ := startFront(b, Config{AccessLog: l}, node)
			bc := newBenchClient(b, addr, "/obj")
			defer bc.c.Close()
			b.SetBytes(1 << 10)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := bc.do(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestAccessLogEscapesTarget: a '"' in the request target is written as
// \x22, as in header fields, so the line keeps its fields and parses back
// for replay with the target the client sent.
func TestAccessLogEscapesTarget(t *testing.T) {
	be := namedBackend(t, "n0")
	var buf testutil.SyncBuf
	l := NewAccessLog(&buf, LogCommon)
	addr, _, _ := startFront(t, Config{AccessLog: l}, be.URL)
	c := dialFront(t, addr)
	c.do("GET /q\"200\"x HTTP/1.1\r\nHost: x\r\n\r\n")
	c.do("GET /a\"b HTTP/1.1\r\nHost: x\r\n\r\n")
	waitLines(t, l, 2)
	l.Close()
	for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if strings.Count(line, `"`) != 2 {
			t.Errorf("line %d has a quote of the client's: %s", i, line)
		}
		r, err := trace.ParseLine([]byte(line), trace.CLF)
		if err != nil {
			t.Errorf("line %d does not parse back: %v: %s", i, err, line)
			continue
		}
		if i == 1 && r.URL != `/a"b` {
			t.Errorf("parsed target %q, want /a\"b", r.URL)
		}
	}
}
