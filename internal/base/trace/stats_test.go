package trace

import (
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

type recs []Record

func (r *recs) Next() (Record, error) {
	if len(*r) == 0 {
		return Record{}, io.EOF
	}
	x := (*r)[0]
	*r = (*r)[1:]
	return x, nil
}

// TestStatsByHand: /a 15× (200, 100 B), /b 2× 200 of 1000 B + one 304 of
// 0 B, /c once (404, "-"), /d once (200, 50 B). 20 requests.
//
//	unique 4, sized 3 (/c never 200), unique bytes 100+1000+50 = 1150,
//	transferred 1500+2000+0+50 = 3550, one-timers /c and /d.
//	Ranks: /a 15, /b 3, then /c, /d (1 each, by URL). α is fitted on /a and
//	/b: slope (ln 3 − ln 15)/(ln 2 − ln 1) = −ln 5/ln 2, α = 2.3219.
//	90 % = 18 requests = /a+/b = 1100 B; 95 % = 19 adds /c (0 B) = 1100 B;
//	99 % = 19.8 adds /d = 1150 B.
func TestStatsByHand(t *testing.T) {
	var in recs
	add := func(url string, status int, bytes int64, n int) {
		for range n {
			in = append(in, Record{URL: url, Status: status, Bytes: bytes})
		}
	}
	add("/a", 200, 100, 15)
	add("/b", 200, 1000, 2)
	add("/b", 304, 0, 1)
	add("/c", 404, -1, 1)
	add("/d", 200, 50, 1)
	s, err := Stats(&in)
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{Requests: 20, UniqueURLs: 4, SizedURLs: 3, UniqueBytes: 1150, TransferredBytes: 3550,
		OneTimers: 2, Cover90: 1100, Cover95: 1100, Cover99: 1150}
	alpha := s.ZipfAlpha
	s.ZipfAlpha = 0
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
	if math.Abs(alpha-math.Log(5)/math.Log(2)) > 1e-9 {
		t.Errorf("alpha %v, want %v", alpha, math.Log(5)/math.Log(2))
	}
}

// TestStatsZipfEstimate: the estimate recovers the α of a synthetic Zipf
// workload in which every file is requested many times.
func TestStatsZipfEstimate(t *testing.T) {
	for _, a := range []float64{0.6, 0.8, 1.0} {
		g, err := Synth{Files: 1000, Requests: 200000, Alpha: a, Seed: 3}.New()
		if err != nil {
			t.Fatal(err)
		}
		s, err := Stats(g)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(s.ZipfAlpha-a) > 0.05 {
			t.Errorf("α %.2f estimated as %.3f", a, s.ZipfAlpha)
		}
		if s.Requests != 200000 || s.UniqueURLs != 1000 || s.Cover90 > s.Cover95 || s.Cover95 > s.Cover99 || s.Cover99 > s.UniqueBytes {
			t.Errorf("α %.2f: %+v", a, s)
		}
	}
}

// A source with no record (an empty file, a README given by mistake) is an
// error, not a table of zeros with exit status 0.
func TestStatsEmpty(t *testing.T) {
	var in recs
	s, err := Stats(&in)
	if !errors.Is(err, ErrNoRecords) || !reflect.DeepEqual(s, Summary{}) {
		t.Errorf("empty: %+v, %v; want ErrNoRecords", s, err)
	}
}

func TestSizesOfANonLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(p, []byte("# not a log\n\nsome prose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Sizes(p); !errors.Is(err, ErrNoRecords) {
		t.Fatalf("Sizes(README) = %v, want ErrNoRecords", err)
	}
}
