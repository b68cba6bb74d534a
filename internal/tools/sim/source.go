package sim

import (
	"io"
	"time"

	"shoal/internal/base/trace"
)

// TraceSource turns access-log records into Accesses, giving each its URL's
// object size from sizes (trace.Sizes: the largest 200-response size). A
// record whose URL has no size — never answered 200, such as a 404 or a URL
// only ever revalidated with 304 — is skipped and counted, since there is no
// object to serve. Memory is the sizes map; records are streamed.
type TraceSource struct {
	src     trace.Source
	sizes   map[string]int64
	t0      time.Time
	started bool
	skipped int64
}

// NewTraceSource wraps src with the object sizes of its trace.
func NewTraceSource(src trace.Source, sizes map[string]int64) *TraceSource {
	return &TraceSource{src: src, sizes: sizes}
}

// Next implements Source.
func (t *TraceSource) Next() (Access, error) {
	for {
		rec, err := t.src.Next()
		if err != nil {
			return Access{}, err
		}
		key := rec.Key() // site + URL for a multi-site log
		size, ok := t.sizes[key]
		if !ok {
			t.skipped++
			continue
		}
		if !t.started {
			t.t0, t.started = rec.Time, true
		}
		return Access{URL: key, Size: size, At: max(rec.Time.Sub(t.t0), 0)}, nil
	}
}

// Skipped is the number of records without a known object size.
func (t *TraceSource) Skipped() int64 { return t.skipped }

// SliceSource replays Accesses held in memory (benchmarks, tests).
type SliceSource struct {
	a []Access
	i int
}

// NewSliceSource returns a Source over a; it does not copy a.
func NewSliceSource(a []Access) *SliceSource { return &SliceSource{a: a} }

// Next implements Source.
func (s *SliceSource) Next() (Access, error) {
	if s.i >= len(s.a) {
		return Access{}, io.EOF
	}
	s.i++
	return s.a[s.i-1], nil
}

// Load reads every Access of src into memory (for repeated runs over a small
// trace, and for benchmarks that must not measure log parsing).
func Load(src Source) ([]Access, error) {
	var out []Access
	for {
		a, err := src.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
}
