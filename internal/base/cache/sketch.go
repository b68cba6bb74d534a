package cache

// sketch estimates how often each key was asked for recently, whether or
// not it is cached: a count-min sketch (Cormode and Muthukrishnan, 2005) of
// 4 rows of byte counters, halved whenever the requests it counted reach
// its window, as TinyLFU does (Einziger, Friedman and Manes, "TinyLFU: A
// Highly Efficient Cache Admission Policy", ACM ToS 2017, §3.3 "freshness
// mechanism"). It is written by hand: it lives inside a policy that must be
// deterministic (the simulator replays it) and allocation-free per request,
// and the libraries around hash with a random seed or allocate.
type sketch struct {
	rows   [4][]uint8
	mask   uint64
	adds   int
	window int
}

// newSketch sizes a sketch for about objects keys: each row 4 counters per
// object (a power of two, 1,024 to 1 M), the window 10 requests per object
// (TinyLFU's W = 10·C).
func newSketch(objects int64) *sketch {
	w := 1024
	for int64(w) < 4*objects && w < 1<<20 {
		w <<= 1
	}
	s := &sketch{mask: uint64(w - 1), window: 10 * max(int(objects), 64)}
	for i := range s.rows {
		s.rows[i] = make([]uint8, w)
	}
	return s
}

// hashKey is 64-bit FNV-1a: fixed, so runs repeat.
func hashKey(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return h
}

// slot is row i's counter index for hash h (double hashing).
func (s *sketch) slot(h uint64, i int) uint64 {
	lo, hi := h&0xffffffff, h>>32|1
	return (lo + uint64(i)*hi) & s.mask
}

// add counts one request for key.
func (s *sketch) add(key string) {
	h := hashKey(key)
	for i := range s.rows {
		if c := &s.rows[i][s.slot(h, i)]; *c < 255 {
			*c++
		}
	}
	if s.adds++; s.adds >= s.window {
		s.halve()
	}
}

// estimate is key's count: the smallest of its counters.
func (s *sketch) estimate(key string) int {
	h := hashKey(key)
	n := 255
	for i := range s.rows {
		n = min(n, int(s.rows[i][s.slot(h, i)]))
	}
	return n
}

// halve ages every count, so the sketch follows what is asked for now.
func (s *sketch) halve() {
	for i := range s.rows {
		for j := range s.rows[i] {
			s.rows[i][j] >>= 1
		}
	}
	s.adds /= 2
}
