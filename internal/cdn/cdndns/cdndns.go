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

// Candidate is a PoP as the answering PoP's MBPP view sees it.
type Candidate struct {
	Name  string
	Alive bool
	// Score is MBPP's serv; Server is its server performance in [0,1]
	// (1 idle), compared with Config.MinServer for capacity.
	Score, Server float64
	// V4 and V6 are the addresses answered for it (either may be invalid).
	V4, V6 netip.Addr
}

// Reason says why Choose answered what it did (for the counters).
type Reason int

// The reasons.
const (
	ByCoverage Reason = iota // the client's coverage PoP
	ByScore                  // no coverage rule: best score
	Fallback                 // coverage PoP down or full: best score
	NoPoP                    // nothing live with an address of the family
)

// Choose picks the PoP for a client at addr among cs: its coverage PoP if
// alive, under capacity (Server ≥ minServer) and with an address of the
// wanted family (v6 for AAAA), else the live, under-capacity PoP of highest
// score (ties by name).
func Choose(cov *Coverage, cs []Candidate, addr netip.Addr, v6 bool, minServer float64) (Candidate, Reason) {
	usable := func(c Candidate) bool {
		if !c.Alive || c.Server < minServer {
			return false
		}
		if v6 {
			return c.V6.IsValid()
		}
		return c.V4.IsValid()
	}
	reason := ByScore
	if name, ok := cov.Lookup(addr); ok {
		for _, c := range cs {
			if c.Name == name {
				if usable(c) {
					return c, ByCoverage
				}
				break
			}
		}
		reason = Fallback
	}
	best, found := Candidate{}, false
	for _, c := range cs {
		if !usable(c) {
			continue
		}
		if !found || c.Score > best.Score || c.Score == best.Score && c.Name < best.Name {
			best, found = c, true
		}
	}
	if !found {
		return Candidate{}, NoPoP
	}
	return best, reason
}
