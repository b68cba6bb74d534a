package httpcache

import (
	"encoding/binary"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// storedMagic starts every encoded Stored, and names its layout version.
const storedMagic = "HC1\n"

// ErrBadStored is returned by DecodeStored for bytes it did not write.
var ErrBadStored = errors.New("httpcache: bad stored metadata")

// Encode appends s in a compact binary layout to dst: the metadata blob a
// store keeps beside the body, small and quick to read back on every hit.
// Header fields are written in name order, so equal Stored encode equally.
func (s *Stored) Encode(dst []byte) []byte {
	dst = append(dst, storedMagic...)
	f := &s.Fresh
	for _, v := range []int64{int64(s.Status), s.RequestTime.UnixNano(), s.ResponseTime.UnixNano(),
		f.Lifetime, f.InitialAge, f.StaleWhileRevalidate, f.StaleIfError} {
		dst = binary.AppendVarint(dst, v)
	}
	var flags uint64
	for i, b := range []bool{f.Heuristic, f.NoCache, f.NoStale, f.ImpliedNoStale} {
		if b {
			flags |= 1 << i
		}
	}
	dst = binary.AppendUvarint(dst, flags)
	dst = appendStrings(dst, s.Vary)
	names := make([]string, 0, len(s.Header))
	for n := range s.Header {
		names = append(names, n)
	}
	sort.Strings(names)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, n := range names {
		dst = appendString(dst, n)
		dst = appendStrings(dst, s.Header[n])
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		dst = appendString(dst, s)
	}
	return dst
}

// decoder reads what Encode wrote; the first error sticks.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint(limit uint64) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > limit {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint(uint64(len(d.b)))
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) strs() []string {
	n := d.uvarint(uint64(len(d.b)))
	if d.err || n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := uint64(0); i < n && !d.err; i++ {
		out = append(out, d.str())
	}
	return out
}

// DecodeStored reads a Stored written by Encode.
func DecodeStored(b []byte) (*Stored, error) {
	if !strings.HasPrefix(string(b), storedMagic) {
		return nil, ErrBadStored
	}
	d := &decoder{b: b[len(storedMagic):]}
	s := &Stored{}
	var v [7]int64
	for i := range v {
		v[i] = d.varint()
	}
	s.Status = int(v[0])
	s.RequestTime, s.ResponseTime = time.Unix(0, v[1]), time.Unix(0, v[2])
	f := &s.Fresh
	f.Lifetime, f.InitialAge, f.StaleWhileRevalidate, f.StaleIfError = v[3], v[4], v[5], v[6]
	flags := d.uvarint(1<<4 - 1)
	f.Heuristic, f.NoCache, f.NoStale, f.ImpliedNoStale = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
	s.Vary = d.strs()
	n := d.uvarint(uint64(len(d.b)))
	s.Header = make(http.Header, n)
	for i := uint64(0); i < n && !d.err; i++ {
		name := d.str()
		s.Header[name] = d.strs()
	}
	if d.err || len(d.b) != 0 || s.Status < 100 || s.Status > 999 {
		return nil, ErrBadStored
	}
	return s, nil
}

// CacheStatus is one cache's member of the Cache-Status field (RFC 9211):
// what it did with the request.
type CacheStatus struct {
	// Hit: answered from the cache without going forward.
	Hit bool
	// Fwd is why the request went forward (uri-miss, vary-miss, stale,
	// request, method, bypass); empty on a hit.
	Fwd string
	// FwdStatus is the status the next hop answered (0: not sent).
	FwdStatus int
	// TTL is the response's remaining freshness in seconds; HasTTL says
	// whether to show it.
	TTL    int64
	HasTTL bool
	// Stored: the forwarded response was stored.
	Stored bool
	// Collapsed: the request waited on another request's forward.
	Collapsed bool
	// Detail is free text (a token), such as why a response was not stored.
	Detail string
}

// Format renders the member for a cache called name ("shoal; hit;
// ttl=30"); append it after the members already in the response's
// Cache-Status (RFC 9211 §2: the cache nearest the origin comes first).
func (c CacheStatus) Format(name string) string {
	return string(c.AppendParams([]byte(name)))
}

// AppendParams appends the member's parameters ("; hit; ttl=30") to dst,
// which holds the cache's name: Format without allocating.
func (c CacheStatus) AppendParams(dst []byte) []byte {
	if c.Hit {
		dst = append(dst, "; hit"...)
	}
	if c.Fwd != "" {
		dst = append(append(dst, "; fwd="...), c.Fwd...)
	}
	if c.FwdStatus != 0 {
		dst = strconv.AppendInt(append(dst, "; fwd-status="...), int64(c.FwdStatus), 10)
	}
	if c.HasTTL {
		dst = strconv.AppendInt(append(dst, "; ttl="...), c.TTL, 10)
	}
	if c.Stored {
		dst = append(dst, "; stored"...)
	}
	if c.Collapsed {
		dst = append(dst, "; collapsed"...)
	}
	if c.Detail != "" {
		dst = append(append(dst, "; detail="...), c.Detail...)
	}
	return dst
}
