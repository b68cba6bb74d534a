package sim

import (
	"io"
	"strings"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/base/trace"
)

// TraceSource turns access-log records into Accesses, giving each its
// object's key and size from sizes (ObjectSizes of trace.Sizes: the largest
// 200-response size). The key is the file a live node would serve and cache
// (content.ObjectKey, after the site with a multi-site log): a real log
// spells one file many ways ("/a?x=1", "/./a", "//a"), which a node and the
// front's policies treat as one object, so the simulator must too; keyed by
// the raw URL, the simulated caches held up to 15 % more objects than the
// live ones on the 1995 traces and missed 1.5 points more (docs/parity.md).
// A record whose object has no size — never answered 200, such as a 404 or a
// URL only ever revalidated with 304 — or that no node would serve is
// skipped and counted, since there is no object to serve. Memory is the
// sizes map; records are streamed.
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
		key, ok := ObjectKey(rec)
		size, found := t.sizes[key]
		if !ok || !found {
			t.skipped++
			continue
		}
		if !t.started {
			t.t0, t.started = rec.Time, true
		}
		return Access{URL: key, Size: size, At: max(rec.Time.Sub(t.t0), 0)}, nil
	}
}

// ObjectKey is the key of the object rec names: content.ObjectKey of its
// URL, after its site with a multi-site log (trace.Record.Key's layout). ok
// is false when no node would serve the URL.
func ObjectKey(rec trace.Record) (key string, ok bool) {
	u, ok := content.ObjectKey(rec.URL)
	if !ok || rec.VHost == "" {
		return u, ok
	}
	return rec.VHost + u, true
}

// ObjectSizes folds sizes keyed by raw trace URLs (trace.Sizes, Record.Key)
// into the sizes of the objects they name (ObjectKey): the largest of the
// spellings of one file, what a site written from the trace holds
// (site.FromSizes). Keys no node would serve are dropped.
func ObjectSizes(sizes map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(sizes))
	for raw, size := range sizes {
		site, u := "", raw
		if i := strings.IndexByte(raw, '/'); i > 0 && !strings.ContainsRune(raw[:i], ':') {
			site, u = raw[:i], raw[i:]
		}
		if k, ok := ObjectKey(trace.Record{VHost: site, URL: u}); ok {
			out[k] = max(out[k], size)
		}
	}
	return out
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
