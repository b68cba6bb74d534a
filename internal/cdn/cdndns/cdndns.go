// Package cdndns is the client → PoP step of the CDN tier (SPEC §5, seed 003
// §1: "根据请求者的IP地址查找本地对应关系表,定位到相应的邻近PoP节点"): an
// authoritative DNS responder for the CDN's zone that answers A/AAAA with
// the PoP for the client. The client's address is the EDNS Client Subnet
// (RFC 7871) when the resolver sends one, else the resolver's own address;
// a coverage-zone table of address prefixes names the client's PoP; a PoP
// that is down in the MBPP view or above capacity is not answered, and the
// best-scoring live PoP (serv of seed 003 §2 (5)) is answered instead.
//
// The choice (Choose) is a pure function of the table, the view and the
// client's address, so tests and the daemon share it; Server adds the wire.
package cdndns

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// Coverage maps address prefixes to PoP names; the longest matching prefix
// wins (as routing does).
type Coverage struct {
	rules []rule // sorted by prefix length, longest first
}

type rule struct {
	p   netip.Prefix
	pop string
}

// Rule is one line of a coverage file.
type Rule struct {
	Prefix string `json:"prefix"`
	PoP    string `json:"pop"`
}

// NewCoverage builds a table; a malformed prefix or an empty PoP name is an
// error naming the rule.
func NewCoverage(rules []Rule) (*Coverage, error) {
	c := &Coverage{}
	for i, r := range rules {
		p, err := netip.ParsePrefix(strings.TrimSpace(r.Prefix))
		if err != nil {
			return nil, fmt.Errorf("coverage rule %d: %w", i+1, err)
		}
		if strings.TrimSpace(r.PoP) == "" {
			return nil, fmt.Errorf("coverage rule %d (%s): no PoP", i+1, p)
		}
		c.rules = append(c.rules, rule{p.Masked(), strings.TrimSpace(r.PoP)})
	}
	slices.SortStableFunc(c.rules, func(a, b rule) int { return cmp.Compare(b.p.Bits(), a.p.Bits()) })
	return c, nil
}

// LoadCoverage reads a coverage file: JSON (an array of {"prefix","pop"})
// or CSV lines "prefix,pop" ('#' starts a comment).
func LoadCoverage(path string) (*Coverage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("coverage: %w", err)
	}
	var rules []Rule
	if t := strings.TrimSpace(string(b)); strings.HasPrefix(t, "[") {
		if err := json.Unmarshal(b, &rules); err != nil {
			return nil, fmt.Errorf("coverage %s: %w", path, err)
		}
	} else {
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		line := 0
		for sc.Scan() {
			line++
			l := strings.TrimSpace(sc.Text())
			if i := strings.IndexByte(l, '#'); i >= 0 {
				l = strings.TrimSpace(l[:i])
			}
			if l == "" {
				continue
			}
			f := strings.Split(l, ",")
			if len(f) != 2 {
				return nil, fmt.Errorf("coverage %s:%d: want prefix,pop", path, line)
			}
			rules = append(rules, Rule{Prefix: f[0], PoP: f[1]})
		}
	}
	c, err := NewCoverage(rules)
	if err != nil {
		return nil, fmt.Errorf("coverage %s: %w", path, err)
	}
	return c, nil
}

// Lookup returns the PoP of the longest prefix holding addr.
func (c *Coverage) Lookup(addr netip.Addr) (string, bool) {
	if c == nil {
		return "", false
	}
	addr = addr.Unmap()
	for _, r := range c.rules {
		if r.p.Contains(addr) {
			return r.pop, true
		}
	}
	return "", false
}

// Len returns the number of rules.
func (c *Coverage) Len() int {
	if c == nil {
		return 0
	}
	return len(c.rules)
}

// Scope is the prefix length an answer for addr holds for (RFC 7871
// §7.2.1's SCOPE PREFIX-LENGTH): the length of the rule that matched when no
// longer rule lies inside it, so a resolver may cache one answer for the
// rule's whole prefix; else 0 with ok false (the caller echoes the client's
// source prefix length).
func (c *Coverage) Scope(addr netip.Addr) (bits int, ok bool) {
	if c == nil {
		return 0, false
	}
	addr = addr.Unmap()
	for i, r := range c.rules {
		if !r.p.Contains(addr) {
			continue
		}
		for _, in := range c.rules[:i] { // the longer rules
			if in.p.Bits() > r.p.Bits() && r.p.Contains(in.p.Addr()) {
				return 0, false
			}
		}
		return r.p.Bits(), true
	}
	return 0, false
}

// Candidate is a PoP as the answering PoP's MBPP view sees it.
type Candidate struct {
	Name  string
	Alive bool
	// Server is its server performance in [0,1] (1 idle), compared with
	// Config.MinServer for capacity.
	Server float64
	// V4 and V6 are its gateway's addresses (either may be invalid): what
	// clients reach, not the peer address PoPs talk on.
	V4, V6 netip.Addr
}

// View is what routing reads of the answering PoP's MBPP view.
type View struct {
	// PoPs are the PoPs in the view.
	PoPs []Candidate
	// Self is the answering PoP's name.
	Self string
	// Score is serv of PoP to as PoP from computes it (seed 003 §2 (5),
	// with from's local preference; mbpp.Node.ScoreFrom): the answering
	// PoP reads it off the whole view, so the client is ranked from its
	// own nearest PoP's place, not from the answering PoP's.
	Score func(from, to string) float64
}

// Reason says why Choose answered what it did (for the counters).
type Reason int

// The reasons.
const (
	ByCoverage Reason = iota // the client's coverage PoP
	Balanced                 // the coverage PoP is usable, another scored better from it
	Fallback                 // coverage PoP down, full, not in the view or without the family
	ByScore                  // no coverage rule: best score from the answering PoP
	Overloaded               // every live PoP is above capacity: the best of them
	NoPoP                    // nothing live with an address of the family
)

// String names the reason for the counters.
func (r Reason) String() string {
	return [...]string{"coverage", "balanced", "fallback", "score", "overloaded", "no_pop"}[r]
}

// Choose routes a client at addr as seed 003 §1–§2 do: the coverage table
// names its nearest PoP; among the live PoPs under capacity (Server ≥
// minServer) with an address of the wanted family (v6 for AAAA) the one
// of highest serv from that PoP's place wins (ties by name). The local
// preference keeps the client on its nearest PoP unless another beats it
// by more than the bonus (MBPP's global load balancing); a down or full
// nearest PoP gives way to the best PoP near it. With no rule the
// answering PoP stands in for the nearest. When every live PoP is above
// capacity the best of them is answered rather than none.
func Choose(cov *Coverage, v View, addr netip.Addr, v6 bool, minServer float64) (Candidate, Reason) {
	has := func(c Candidate) bool {
		if v6 {
			return c.V6.IsValid()
		}
		return c.V4.IsValid()
	}
	from := v.Self
	nearest, ruled := cov.Lookup(addr)
	if ruled && slices.ContainsFunc(v.PoPs, func(c Candidate) bool { return c.Name == nearest }) {
		from = nearest // else not in the view: nothing is known of its place
	}
	best, found, full := Candidate{}, false, false
	bestScore := 0.0
	for pass := 0; pass < 2 && !found; pass++ {
		full = pass == 1
		for _, c := range v.PoPs {
			if !c.Alive || !has(c) || !full && c.Server < minServer {
				continue
			}
			s := v.Score(from, c.Name)
			if !found || s > bestScore || s == bestScore && c.Name < best.Name {
				best, bestScore, found = c, s, true
			}
		}
	}
	switch {
	case !found:
		return Candidate{}, NoPoP
	case full:
		return best, Overloaded
	case !ruled:
		return best, ByScore
	case best.Name == nearest:
		return best, ByCoverage
	case usable(v.PoPs, nearest, has, minServer):
		return best, Balanced
	}
	return best, Fallback
}

// usable reports whether the PoP named name is live, under capacity and
// has an address of the family.
func usable(cs []Candidate, name string, has func(Candidate) bool, minServer float64) bool {
	for _, c := range cs {
		if c.Name == name {
			return c.Alive && has(c) && c.Server >= minServer
		}
	}
	return false
}
