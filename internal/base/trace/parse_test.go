package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var edt = time.FixedZone("", -4*3600)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		f    Format
		want Record
		bad  bool
	}{
		{name: "clf", f: CLF,
			line: `in24.inetnebr.com - - [01/Aug/1995:00:00:01 -0400] "GET /shuttle/missions/sts-68/news/sts-68-mcc-05.txt HTTP/1.0" 200 1839`,
			want: Record{Host: "in24.inetnebr.com", Time: time.Date(1995, 8, 1, 0, 0, 1, 0, edt), Method: "GET",
				URL: "/shuttle/missions/sts-68/news/sts-68-mcc-05.txt", Proto: "HTTP/1.0", Status: 200, Bytes: 1839}},
		{name: "clf auto crlf dash bytes", f: Auto,
			line: "h - frank [10/Oct/2000:13:55:36 +0130] \"HEAD /a HTTP/1.1\" 404 -\r\n",
			want: Record{Host: "h", Time: time.Date(2000, 10, 10, 13, 55, 36, 0, time.FixedZone("", 5400)), Method: "HEAD",
				URL: "/a", Proto: "HTTP/1.1", Status: 404, Bytes: -1}},
		{name: "http/0.9 no proto", f: CLF,
			line: `columbia.acc.brad.ac.uk - - [01/Aug/1995:00:34:55 -0400] "GET /ksc.html" 200 7280`,
			want: Record{Host: "columbia.acc.brad.ac.uk", Time: time.Date(1995, 8, 1, 0, 34, 55, 0, edt), Method: "GET",
				URL: "/ksc.html", Status: 200, Bytes: 7280}},
		{name: "combined format tail ignored", f: CLF,
			line: `h - - [01/Aug/1995:00:00:01 +0000] "GET / HTTP/1.0" 200 5 "http://ref/" "Mozilla/2.0"`,
			want: Record{Host: "h", Time: time.Date(1995, 8, 1, 0, 0, 1, 0, time.UTC), Method: "GET", URL: "/",
				Proto: "HTTP/1.0", Status: 200, Bytes: 5}},
		{name: "epa", f: EPA,
			line: `port11.annex1.naples.net [30:00:00:02] "GET /icons/circle_logo_small.gif HTTP/1.0" 200 2624`,
			want: Record{Host: "port11.annex1.naples.net", Time: time.Date(1995, 8, 30, 0, 0, 2, 0, edt), Method: "GET",
				URL: "/icons/circle_logo_small.gif", Proto: "HTTP/1.0", Status: 200, Bytes: 2624}},
		{name: "epa auto, spaces in url", f: Auto,
			line: `dcimsd23.dcimsd.epa.gov [30:10:56:52] "GET /epahome/images/warn.gif width=20 height=20 HTTP/1.0" 200 889`,
			want: Record{Host: "dcimsd23.dcimsd.epa.gov", Time: time.Date(1995, 8, 30, 10, 56, 52, 0, edt), Method: "GET",
				URL: "/epahome/images/warn.gif width=20 height=20", Proto: "HTTP/1.0", Status: 200, Bytes: 889}},
		{name: "embedded quote", f: Auto, bad: true,
			line: `bastion.fdic.gov [30:09:36:04] "GET /enviro/gif/blueball.gifalt=" HTTP/1.0" 404 -`},
		{name: "empty url", f: Auto, bad: true, line: `bubba.dol.gov [30:08:36:17] "GET  HTTP/1.0" 302 -`},
		{name: "lowercase method", f: CLF, bad: true, line: `h - - [01/Aug/1995:00:00:01 -0400] "get / HTTP/1.0" 200 1`},
		{name: "bad month", f: CLF, bad: true, line: `h - - [01/Foo/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 1`},
		{name: "feb 30", f: CLF, bad: true, line: `h - - [30/Feb/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 1`},
		{name: "hour 24", f: CLF, bad: true, line: `h - - [01/Aug/1995:24:00:01 -0400] "GET / HTTP/1.0" 200 1`},
		{name: "bad zone", f: CLF, bad: true, line: `h - - [01/Aug/1995:00:00:01 0400] "GET / HTTP/1.0" 200 1`},
		{name: "epa day 32", f: EPA, bad: true, line: `h [32:00:00:00] "GET / HTTP/1.0" 200 1`},
		{name: "status 2 digits", f: CLF, bad: true, line: `h - - [01/Aug/1995:00:00:01 -0400] "GET / HTTP/1.0" 20 1`},
		{name: "bytes junk", f: CLF, bad: true, line: `h - - [01/Aug/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 1x`},
		{name: "trailing junk", f: CLF, bad: true, line: `h - - [01/Aug/1995:00:00:01 -0400] "GET / HTTP/1.0" 200 1 junk`},
		{name: "unterminated request", f: CLF, bad: true, line: `h - - [01/Aug/1995:00:00:01 -0400] "GET / HTTP/1.0 200 1`},
		{name: "missing fields", f: CLF, bad: true, line: `h - - [01/Aug/1995:00:00:01 -0400]`},
		{name: "control bytes kept", f: CLF, line: "h - - [01/Aug/1995:00:00:01 +0000] \"GET /a\x01\x00b HTTP/1.0\" 200 1",
			want: Record{Host: "h", Time: time.Date(1995, 8, 1, 0, 0, 1, 0, time.UTC), Method: "GET", URL: "/a\x01\x00b",
				Proto: "HTTP/1.0", Status: 200, Bytes: 1}},
		{name: "epa line as clf", f: CLF, bad: true, line: `h [30:00:00:02] "GET / HTTP/1.0" 200 1`},
		{name: "empty", f: Auto, bad: true, line: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLine([]byte(tt.line), tt.f)
			if tt.bad {
				if err == nil {
					t.Fatalf("ParseLine(%q) = %+v, want error", tt.line, got)
				}
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v does not wrap ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLine(%q): %v", tt.line, err)
			}
			if !sameRecord(got, tt.want) {
				t.Fatalf("ParseLine(%q)\n got %+v\nwant %+v", tt.line, got, tt.want)
			}
		})
	}
}

// sameRecord compares records, times as instants plus their zone offset.
func sameRecord(a, b Record) bool {
	_, oa := a.Time.Zone()
	_, ob := b.Time.Zone()
	ta, tb := a.Time, b.Time
	a.Time, b.Time = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb) && oa == ob
}

func TestAppendCLFRoundTrip(t *testing.T) {
	lines := []string{
		`in24.inetnebr.com - - [01/Aug/1995:00:00:01 -0400] "GET /shuttle/missions/sts-68/news/sts-68-mcc-05.txt HTTP/1.0" 200 1839`,
		`columbia.acc.brad.ac.uk - - [01/Aug/1995:00:34:55 -0400] "GET /ksc.html" 200 7280`,
		`h - - [29/Feb/2000:23:59:59 +0545] "POST /a%20b?x=1 HTTP/1.1" 304 -`,
		`port11.annex1.naples.net [30:00:00:02] "GET /icons/circle_logo_small.gif HTTP/1.0" 200 2624`,
		`dcimsd23.dcimsd.epa.gov [30:10:56:52] "GET /epahome/images/warn.gif width=20 height=20 HTTP/1.0" 200 889`,
	}
	for _, l := range lines {
		r, err := ParseLine([]byte(l), Auto)
		if err != nil {
			t.Fatalf("ParseLine(%q): %v", l, err)
		}
		out := AppendCLF(nil, r)
		if out[len(out)-1] != '\n' {
			t.Fatalf("AppendCLF(%+v) = %q lacks a newline", r, out)
		}
		r2, err := ParseLine(out, CLF)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", out, err)
		}
		if !sameRecord(r, r2) {
			t.Fatalf("round trip of %q via %q:\n got %+v\nwant %+v", l, out, r2, r)
		}
		if strings.Contains(l, "/Aug/") || strings.Contains(l, "/Feb/") {
			if string(out) != l+"\n" {
				t.Fatalf("AppendCLF = %q, want the input line %q", out, l)
			}
		}
	}
	want := "- - - [30/Aug/1995:00:00:02 -0400] \"GET /x\" 200 -\n"
	got := AppendCLF(nil, Record{Time: time.Date(1995, 8, 30, 0, 0, 2, 0, edt), Method: "GET", URL: "/x", Status: 200, Bytes: -1})
	if string(got) != want {
		t.Fatalf("AppendCLF = %q, want %q", got, want)
	}
}

func writeFile(t *testing.T, name string, data []byte, gz bool) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(data)
		zw.Close()
		data = b.Bytes()
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readAll(t *testing.T, r Source) []Record {
	t.Helper()
	var out []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

const sample = `garbage line first
a - - [01/Aug/1995:00:00:01 -0400] "GET /x.html HTTP/1.0" 200 100

b - - [01/Aug/1995:00:00:02 -0400] "GET /x.html HTTP/1.0" 304 0
c - - [01/Aug/1995:00:00:03 -0400] "GET /x.html HTTP/1.0" 200 120
c - - [01/Aug/1995:00:00:04 -0400] "GET /y.gif" 200 7
c - - [01/Aug/1995:00:00:05 -0400] "GET /bad"x" HTTP/1.0" 404 -
d - - [01/Aug/1995:00:00:06 -0400] "GET /z HTTP/1.0" 404 -
e - - [01/Aug/1995:00:00:07 -0400] "GET /y.gif HTTP/1.0" 200 5`

func TestOpenPlainAndGzip(t *testing.T) {
	for _, gz := range []bool{false, true} {
		// The name lies about compression on purpose: detection is by magic bytes.
		p := writeFile(t, "log.txt", []byte(sample), gz)
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		recs := readAll(t, r)
		if len(recs) != 6 || r.Malformed() != 2 || r.Lines() != 9 || r.Format() != CLF {
			t.Fatalf("gz=%v: %d records, %d malformed, %d lines, format %v; want 6, 2, 9, clf",
				gz, len(recs), r.Malformed(), r.Lines(), r.Format())
		}
		if last := recs[5]; last.Host != "e" || last.Bytes != 5 {
			t.Fatalf("gz=%v: last record (no trailing newline) = %+v", gz, last)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		sizes, err := Sizes(p)
		if err != nil {
			t.Fatal(err)
		}
		// /x.html: max(100, 120) of its 200s (the 304's 0 ignored); /y.gif: max(7, 5); /z: never 200.
		want := map[string]int64{"/x.html": 120, "/y.gif": 7}
		if len(sizes) != len(want) || sizes["/x.html"] != 120 || sizes["/y.gif"] != 7 {
			t.Fatalf("Sizes = %v, want %v", sizes, want)
		}
	}
}

func TestReaderErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.log")); err == nil {
		t.Fatal("Open of a missing file succeeded")
	}
	// A truncated gzip stream must surface as an error, not a silent EOF.
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	for range 2000 {
		zw.Write([]byte("a - - [01/Aug/1995:00:00:01 -0400] \"GET /x.html HTTP/1.0\" 200 100\n"))
	}
	zw.Close()
	p := writeFile(t, "trunc.gz", b.Bytes()[:b.Len()/2], false)
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		_, err := r.Next()
		if err == io.EOF {
			t.Fatal("truncated gzip read to a clean EOF")
		}
		if err != nil {
			break
		}
	}
	// An over-long line is skipped and counted, and reading continues.
	long := "a - - [01/Aug/1995:00:00:01 -0400] \"GET /" + strings.Repeat("x", 2*maxLine) + " HTTP/1.0\" 200 1\n" +
		"a - - [01/Aug/1995:00:00:01 -0400] \"GET /ok HTTP/1.0\" 200 1\n"
	r2 := NewReader(strings.NewReader(long), Auto)
	recs := readAll(t, r2)
	if len(recs) != 1 || recs[0].URL != "/ok" || r2.Malformed() != 1 {
		t.Fatalf("long line: %d records, %d malformed; want 1 (/ok), 1", len(recs), r2.Malformed())
	}
}

// Real traces: the expected numbers were checked by hand with
//
//	zcat F | awk -F'"' '{ok = NF==3 && $3 ~ /^ [0-9][0-9][0-9] ([0-9]+|-)$/ && <timestamp re>;
//	                     r=$2; sub(/ +HTTP\/[^ ]+$/,"",r); ok = ok && r ~ /^[A-Z]+ +[^ ]/ ...}'
//
// NASA: 33,996 lines, all parse (36 are HTTP/0.9 style without a protocol).
// EPA: 15,754 lines (wc -l says 15,753: no final newline); 21 have an embedded
// quote (`"GET /enviro/gif/blueball.gifalt=" HTTP/1.0"`) and 1 has an empty URL
// (`"GET  HTTP/1.0"`), so 15,732 parse and 22 are malformed.
func TestRealTraces(t *testing.T) {
	tests := []struct {
		file      string
		format    Format
		records   int
		malformed int
		first     Record
	}{
		{"nasa_aug95_19950801_fullday_derived.log.gz", CLF, 33996, 0,
			Record{Host: "in24.inetnebr.com", Time: time.Date(1995, 8, 1, 0, 0, 1, 0, edt), Method: "GET",
				URL: "/shuttle/missions/sts-68/news/sts-68-mcc-05.txt", Proto: "HTTP/1.0", Status: 200, Bytes: 1839}},
		{"epa_http_0830_00-12h_learning-clojure.txt.gz", EPA, 15732, 22,
			Record{Host: "port11.annex1.naples.net", Time: time.Date(1995, 8, 30, 0, 0, 0, 0, edt), Method: "GET",
				URL: "/", Proto: "HTTP/1.0", Status: 200, Bytes: 4889}},
	}
	for _, tt := range tests {
		p := filepath.Join("..", "..", "..", "..", "shared", "data", "traces", tt.file)
		if _, err := os.Stat(p); err != nil {
			t.Logf("skipping %s: %v", tt.file, err)
			continue
		}
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		recs := readAll(t, r)
		r.Close()
		if len(recs) != tt.records || r.Malformed() != tt.malformed || r.Format() != tt.format {
			t.Errorf("%s: %d records, %d malformed, format %v; want %d, %d, %v",
				tt.file, len(recs), r.Malformed(), r.Format(), tt.records, tt.malformed, tt.format)
		}
		if len(recs) > 0 && !sameRecord(recs[0], tt.first) {
			t.Errorf("%s: first record %+v, want %+v", tt.file, recs[0], tt.first)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`in24.inetnebr.com - - [01/Aug/1995:00:00:01 -0400] "GET /x HTTP/1.0" 200 1839`,
		`port11.annex1.naples.net [30:00:00:00] "GET / HTTP/1.0" 200 4889`,
		`bastion.fdic.gov [30:09:36:04] "GET /enviro/gif/blueball.gifalt=" HTTP/1.0" 404 -`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, fm := range []Format{Auto, CLF, EPA} {
			r, err := ParseLine(line, fm)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v does not wrap ErrMalformed", err)
				}
				continue
			}
			if r.URL == "" || r.Method == "" || r.Host == "" || r.Status < 100 || r.Status > 999 || r.Bytes < -1 {
				t.Fatalf("ParseLine(%q) accepted an invalid record %+v", line, r)
			}
			out := AppendCLF(nil, r)
			r2, err := ParseLine(out, CLF)
			if err != nil {
				t.Fatalf("ParseLine(%q) = %+v, but its CLF form %q does not parse: %v", line, r, out, err)
			}
			if !sameRecord(r, r2) {
				t.Fatalf("round trip of %q via %q: got %+v, want %+v", line, out, r2, r)
			}
		}
	})
}

// TestAppendCLFEscapesRequest: a '"', '\' or control byte in a request's
// target (or method) is written as \xHH, as nginx writes $request and
// header fields: otherwise a client could end the quoted request early,
// add fields of its own or make its line unparsable, keeping it out of a
// replay. The parser reads the escapes back, so the line round-trips.
func TestAppendCLFEscapesRequest(t *testing.T) {
	r := Record{Host: "h", Time: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Method: "GET",
		URL: `/a"b\c` + "\x01\x7f\xff" + `" 200 1 "x`, Proto: "HTTP/1.1", Status: 404, Bytes: 10}
	out := AppendCLF(nil, r)
	want := `h - - [02/Jan/2024:03:04:05 +0000] "GET /a\x22b\x5Cc\x01\x7F\xFF\x22 200 1 \x22x HTTP/1.1" 404 10` + "\n"
	if string(out) != want {
		t.Fatalf("AppendCLF = %q\nwant      %q", out, want)
	}
	got, err := ParseLine(out, CLF)
	if err != nil {
		t.Fatalf("the escaped line does not parse: %v", err)
	}
	if got.URL != r.URL || got.Status != 404 || got.Bytes != 10 {
		t.Fatalf("parsed back %+v, want URL %q", got, r.URL)
	}
}
