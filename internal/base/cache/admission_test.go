package cache

import (
	"fmt"
	"testing"
)

// TestGDSFAdmission follows Config.Admission by hand: capacity 100, cost 1,
// so an object's value is its requests over its size. /a and /b (50 B
// each) fill the cache; /a is asked for twice more (3 requests: 0.06),
// /b once more (2: 0.04). /c (50 B) then needs /b's room: with 1 request
// (0.02) and 2 (0.04, a tie) it is turned away and nothing is evicted; at
// 3 (0.06) it is worth more than /b, which goes. Without admission the
// first Add of /c evicts /b.
func TestGDSFAdmission(t *testing.T) {
	for _, adm := range []bool{false, true} {
		t.Run(fmt.Sprint("admission=", adm), func(t *testing.T) {
			c, err := New(Config[int]{Policy: GDSF, Capacity: 100, Admission: adm})
			if err != nil {
				t.Fatal(err)
			}
			c.Add("/a", 1, 50)
			c.Add("/b", 2, 50)
			c.Get("/a")
			c.Get("/a")
			c.Get("/b")
			want := []bool{!adm, !adm, true} // /c cached after its 1st, 2nd, 3rd Add
			for i, w := range want {
				if _, ok := c.Get("/c"); ok {
					continue // cached already (no admission): a hit, not an Add
				}
				if got := c.Add("/c", 3, 50); got != w {
					t.Fatalf("Add /c #%d = %v, want %v", i+1, got, w)
				}
			}
			if _, ok := c.Peek("/a"); !ok {
				t.Error("/a evicted")
			}
			if _, ok := c.Peek("/b"); ok {
				t.Error("/b still cached")
			}
			if ev := c.Stats().Evictions; ev != 1 {
				t.Errorf("evictions = %d, want 1", ev)
			}
			checkInvariants(t, c)
		})
	}
}

// TestGDSFAdmissionPartial: a newcomer that beats the first victim but
// not the second is turned away, and the first stays evicted (the room
// is there for the next newcomer). Capacity 100: /s 10 B asked 3 times
// (0.3), /m 40 B twice (0.05), /l 50 B once (0.02). /n (60 B) asked twice
// (0.0333) evicts /l (0.02), then meets /m (0.05): turned away.
func TestGDSFAdmissionPartial(t *testing.T) {
	c, err := New(Config[int]{Policy: GDSF, Capacity: 100, Admission: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Add("/s", 0, 10)
	c.Get("/s")
	c.Get("/s")
	c.Add("/m", 0, 40)
	c.Get("/m")
	c.Add("/l", 0, 50)
	if c.Add("/n", 0, 60) {
		t.Fatal("/n admitted at 1 request (0.0167 < /l's 0.02)")
	}
	if c.Bytes() != 100 {
		t.Fatalf("bytes %d after a refusal that evicts nothing, want 100", c.Bytes())
	}
	if c.Add("/n", 0, 60) {
		t.Fatal("/n admitted at 2 requests (0.0333 < /m's 0.05)")
	}
	for k, want := range map[string]bool{"/s": true, "/m": true, "/l": false, "/n": false} {
		if _, ok := c.Peek(k); ok != want {
			t.Errorf("%s cached = %v, want %v", k, ok, want)
		}
	}
	if c.Bytes() != 50 {
		t.Errorf("bytes = %d, want 50", c.Bytes())
	}
	checkInvariants(t, c)
}

// TestSketchAges: the counts saturate at 255 and halve once the window
// of requests is reached, so the sketch follows recent popularity.
func TestSketchAges(t *testing.T) {
	s := newSketch(0) // window 10·64 = 640
	for range 300 {
		s.add("/hot")
	}
	if got := s.estimate("/hot"); got != 255 {
		t.Fatalf("estimate after 300 adds = %d, want 255 (saturated)", got)
	}
	if got := s.estimate("/cold"); got != 0 {
		t.Fatalf("estimate of an unseen key = %d, want 0", got)
	}
	for range 340 { // 640 adds in all: the window
		s.add("/other")
	}
	if got := s.estimate("/hot"); got != 127 {
		t.Errorf("estimate after the window = %d, want 127 (255 halved)", got)
	}
}
