package replica

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Purge is one invalidation an operator asked for at some PoP, which every
// PoP applies to the copies its nodes hold: by exact URL, by URL prefix or
// by surrogate key (the Surrogate-Key response header, a space-separated
// list of tags, as Fastly and Varnish's xkey name it). Hard removes the
// copies; Soft marks them stale, so they are revalidated with the origin
// before being served again and may still be served stale where the
// response allows it (RFC 5861).
//
// Issuer and Seq name it: Issuer is the issuing PoP's name and incarnation
// (its start time), Seq counts that incarnation's purges from 1, so a PoP
// that was away asks for everything after the last Seq it has of each
// issuer (PurgeLog.Vector) and a restarted issuer never reuses a name.
type Purge struct {
	Issuer string    `json:"issuer"`
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
	// Host limits the purge to one site; "" is every site.
	Host string `json:"host,omitempty"`
	// Exactly one of URL (path and query, exact), Prefix (of path and
	// query) and Tag (one surrogate key) is set.
	URL    string `json:"url,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Soft   bool   `json:"soft,omitempty"`
}

// Validate reports what makes a purge unusable: none or several of URL,
// Prefix and Tag, or a URL or prefix that is not a path.
func (p Purge) Validate() error {
	n := 0
	for _, s := range []string{p.URL, p.Prefix, p.Tag} {
		if s != "" {
			n++
		}
	}
	switch {
	case n != 1:
		return errors.New("purge: give exactly one of url, prefix and tag")
	case p.URL != "" && !strings.HasPrefix(p.URL, "/"), p.Prefix != "" && !strings.HasPrefix(p.Prefix, "/"):
		return fmt.Errorf("purge: %q is not a path (it starts with /)", p.URL+p.Prefix)
	case strings.ContainsAny(p.Tag, " \t"):
		return fmt.Errorf("purge: tag %q holds a space (one surrogate key per purge)", p.Tag)
	}
	return nil
}

// String is the purge as an operator wrote it.
func (p Purge) String() string {
	what := "url " + p.URL
	if p.Prefix != "" {
		what = "prefix " + p.Prefix
	} else if p.Tag != "" {
		what = "tag " + p.Tag
	}
	if p.Host != "" {
		what += " on " + p.Host
	}
	if p.Soft {
		what += " (soft)"
	}
	return what
}

// Matches reports whether a copy of host + uri (path and query) carrying
// the surrogate keys tags is one this purge names.
func (p Purge) Matches(host, uri string, tags []string) bool {
	if p.Host != "" && !strings.EqualFold(p.Host, host) {
		return false
	}
	switch {
	case p.URL != "":
		return uri == p.URL
	case p.Prefix != "":
		return strings.HasPrefix(uri, p.Prefix)
	case p.Tag != "":
		return slices.Contains(tags, p.Tag)
	}
	return false
}

// Tags splits a Surrogate-Key header value into its keys.
func Tags(header string) []string { return strings.Fields(header) }

type issuerLog struct {
	upto uint64           // every Seq ≤ upto has been applied (or expired)
	held map[uint64]Purge // the purges of this issuer still kept
}

// PurgeLog is the purges a PoP has applied, kept for a retention time:
// the tombstones that let a PoP that was away catch up (it sends its
// Vector, a peer answers with Since) and that refuse a copy made before a
// purge when it arrives later from a PoP that has not applied it yet.
// Bounded: at most MaxPurges entries, the oldest dropped first.
type PurgeLog struct {
	cfg     Config
	issuer  string
	seq     uint64
	issuers map[string]*issuerLog
	n       int
}

// NewPurgeLog returns an empty log whose own purges are issued as issuer.
func NewPurgeLog(cfg Config, issuer string) *PurgeLog {
	return &PurgeLog{cfg: cfg, issuer: issuer, issuers: map[string]*issuerLog{}}
}

// Issue names p as this PoP's next purge at now, adds it and returns it.
func (l *PurgeLog) Issue(now time.Time, p Purge) Purge {
	l.seq++
	p.Issuer, p.Seq, p.At = l.issuer, l.seq, now
	l.Add(p)
	return p
}

// Add keeps p and reports whether it is new (to be applied); a purge
// already applied, or older than the retention's horizon, is not.
func (l *PurgeLog) Add(p Purge) bool {
	il := l.issuers[p.Issuer]
	if il == nil {
		il = &issuerLog{held: map[uint64]Purge{}}
		l.issuers[p.Issuer] = il
	}
	if _, ok := il.held[p.Seq]; ok || p.Seq <= il.upto || p.Seq == 0 {
		return false
	}
	il.held[p.Seq] = p
	for {
		if _, ok := il.held[il.upto+1]; !ok {
			break
		}
		il.upto++
	}
	l.n++
	if l.n > l.cfg.MaxPurges {
		l.dropOldest()
	}
	return true
}

// Vector is, per issuer, the Seq up to which every purge is applied.
func (l *PurgeLog) Vector() map[string]uint64 {
	v := make(map[string]uint64, len(l.issuers))
	for k, il := range l.issuers {
		v[k] = il.upto
	}
	return v
}

// Since returns the purges a PoP with vector v lacks, oldest first.
func (l *PurgeLog) Since(v map[string]uint64) []Purge {
	var out []Purge
	for k, il := range l.issuers {
		for s, p := range il.held {
			if s > v[k] {
				out = append(out, p)
			}
		}
	}
	sortPurges(out)
	return out
}

// Expire drops the purges older than the retention; their Seqs stay
// counted as applied.
func (l *PurgeLog) Expire(now time.Time) {
	for _, il := range l.issuers {
		for s, p := range il.held {
			if now.Sub(p.At) > l.cfg.PurgeRetention {
				l.drop(il, s)
			}
		}
	}
}

func (l *PurgeLog) drop(il *issuerLog, s uint64) {
	delete(il.held, s)
	il.upto = max(il.upto, s)
	for {
		if _, ok := il.held[il.upto+1]; !ok {
			break
		}
		il.upto++
	}
	l.n--
}

func (l *PurgeLog) dropOldest() {
	var oldest Purge
	var from *issuerLog
	for _, il := range l.issuers {
		for _, p := range il.held {
			if from == nil || p.At.Before(oldest.At) {
				oldest, from = p, il
			}
		}
	}
	if from != nil {
		l.drop(from, oldest.Seq)
	}
}

// Len returns how many purges are kept.
func (l *PurgeLog) Len() int { return l.n }

// Tombstone reports whether a copy of host + uri with surrogate keys tags,
// made at made (its Date, or when it was fetched), is one a kept purge
// removed (hard) or marked stale (soft). A copy made up to PurgeMargin
// after the purge counts as before it, so that clock skew between PoPs
// and the origin errs towards a fresh fetch.
func (l *PurgeLog) Tombstone(host, uri string, tags []string, made time.Time) (hard, soft bool) {
	for _, il := range l.issuers {
		for _, p := range il.held {
			if made.Before(p.At.Add(l.cfg.PurgeMargin)) && p.Matches(host, uri, tags) {
				if p.Soft {
					soft = true
				} else {
					return true, false
				}
			}
		}
	}
	return false, soft
}

func sortPurges(ps []Purge) {
	slices.SortFunc(ps, func(a, b Purge) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Issuer, b.Issuer); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
}
