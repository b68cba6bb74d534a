package policy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"shoal/internal/base/cache"
)

// Config holds every knob of every policy. The zero value of a field means
// "use the documented default" (DefaultConfig shows them all), so a caller
// only sets what it wants to change; a front or simulator can decode it
// straight from TOML (durations as strings such as "20s"; the two hooks are
// code-only). Knobs a policy does not use are ignored by it.
type Config struct {
	// Seed seeds p2c's PCG source. Default 0 (itself a valid seed): equal seeds
	// give equal decision sequences.
	Seed uint64 `toml:"seed"`

	// GroupWeights overrides gwrr's weight of a group (Node.Group); a group
	// not listed weighs the sum of its usable members' weights (seed 004 §3).
	GroupWeights map[string]int `toml:"group_weights"`

	// Period is dfwrr's feedback interval and weblins' popular-set rebuild
	// interval, in Request.Now time. Default 5 s (LVS feedbackd polls every
	// few seconds).
	Period time.Duration `toml:"period"`
	// FeedbackA is the coefficient A of dfwrr's w += A·cbrt(target − load).
	// Default 5, as in the LVS dynamic-feedback description.
	FeedbackA float64 `toml:"feedback_a"`
	// TargetLoad is dfwrr's target utilisation. Default 0.95 (LVS).
	TargetLoad float64 `toml:"target_load"`
	// MaxWeightScale bounds dfwrr's weight to [1, MaxWeightScale·base].
	// Default 10 (LVS's SCALE).
	MaxWeightScale int `toml:"max_weight_scale"`

	// Epsilon is chbl's balance factor ε: a node may hold at most
	// ⌈(1+ε)·(in-flight+1)/usable⌉ requests. Default 0.25 (HAProxy's
	// hash-balance-factor 125).
	Epsilon float64 `toml:"epsilon"`
	// VirtualNodes is the number of points each node puts on chbl's ring.
	// Default 100.
	VirtualNodes int `toml:"virtual_nodes"`

	// TLow and THigh are LARD's load thresholds in active requests
	// (Pai et al. 1998). Defaults 25 and 65.
	TLow  int `toml:"t_low"`
	THigh int `toml:"t_high"`
	// K is how long a LARD/R server set must stay unchanged before its most
	// loaded member is dropped. Default 20 s.
	K time.Duration `toml:"k"`

	// LoadLimit is the open-connection count at which tbccrd treats a cache
	// holder as fully loaded and falls back to a disk holder (seed 000 §2.2.2
	// step 2). Default THigh.
	LoadLimit int `toml:"load_limit"`
	// ConnTimeout drops tbccrd connection-table entries unused for this long
	// (Request.Now time), so a close the caller never reported cannot skew
	// the per-node connection counts forever. Default 5 min.
	ConnTimeout time.Duration `toml:"conn_timeout"`
	// CacheBytes is the memory-cache budget (MAX_CACHE_SIZE) of each node that
	// tbccrd and weblins mirror. Default 32 MiB.
	CacheBytes int64 `toml:"cache_bytes"`
	// NodeCacheBytes overrides CacheBytes per node index where the entry is > 0.
	NodeCacheBytes []int64 `toml:"node_cache_bytes"`
	// NoCacheAbove: objects larger than this many bytes are never marked as
	// cached. Default 500 KiB for tbccrd (seed 000 §3.3.1) and 100 KiB for
	// weblins (seed 001's S).
	NoCacheAbove int64 `toml:"no_cache_above"`
	// DiskHolders says which nodes hold url on disk (tbccrd's disk_hit flags,
	// seed 000 §2.2.1). Default nil: every node holds every URL.
	DiskHolders func(url string) []int `toml:"-"`
	// NewReplacer builds the replacement order of one node's mirrored cache.
	// Default: NodeCache's order.
	NewReplacer func(node int) Replacer `toml:"-"`
	// NodeFootprint is what an object of a given size costs a node's cache
	// budget, for the mirrors' accounting: shoal nodes charge whole pages
	// and their entry (store.Footprint), which Tuning.Config and `shoal up`
	// set when they mirror shoal nodes. Default nil: the size itself.
	NodeFootprint func(size int64) int64 `toml:"-"`
	// NodeCache is the nodes' cache replacement policy, "lru", "gdsf" or
	// "cgdsf" (internal/base/cache; the nodes' --cache), whose order tbccrd's and
	// weblins' mirrors of the node caches follow when NewReplacer is not set
	// (NodeCacheMirrors, with the nodes' GDSF cost, cache.DiskCost): a mirror evicting
	// in another order than its nodes believes objects cached that the nodes
	// dropped. Default "" = lru (seed 000 §3.3.1); `shoal up`
	// sets its nodes' policy, a `shoal front` takes [tuning] node_cache.
	NodeCache string `toml:"node_cache"`

	// HandoffSize is weblins' S: a file this large or larger is worth a
	// handoff to its owner. Default 100 KiB.
	HandoffSize int64 `toml:"handoff_size"`
	// OverloadConns is weblins' T: an owner with this many active requests is
	// overloaded. Default 130.
	OverloadConns int `toml:"overload_conns"`
	// PopularN is the size of weblins' replicated popular set (top files by
	// request rate in the last Period). Default 100. Ignored when
	// PopularBytes > 0.
	PopularN int `toml:"popular_n"`
	// PopularBytes, when > 0, fills the popular set by rate until the files'
	// total size reaches this budget instead of taking PopularN files.
	PopularBytes int64 `toml:"popular_bytes"`
	// FirstMember is weblins' layer-4 choice of first member: "wrr"
	// (default) or "lc" (SPEC §3).
	FirstMember string `toml:"first_member"`

	// MaxURLs bounds every per-URL table (lard's and lardr's targets, the
	// URL tables of tbccrd and weblins): beyond it the least recently
	// requested URL is evicted. URLs are client input, so without a bound
	// a scanner grows the front without limit. Default
	// 65,536: that many distinct files average 512 B each in the mirrored
	// 32 MiB node caches, so the least recently requested URL beyond it is
	// one no cache is likely to hold, while an entry costs roughly 100 B
	// (lard) to 300 B (tbccrd, weblins on 4 nodes) plus its text, a few
	// MiB to about 16 MiB per full table (BenchmarkTableBytes measures it).
	MaxURLs int `toml:"max_urls"`
	// MaxURLBytes bounds the URL text those tables hold (the sum of the
	// keys' lengths), so long URLs cannot multiply the cost of MaxURLs
	// entries: 65,536 URLs of 8 KiB would be 512 MiB. Default 8 MiB, an
	// average of 128 bytes per URL at the default MaxURLs.
	MaxURLBytes int64 `toml:"max_url_bytes"`
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config {
	c := Config{}
	c.fill()
	return c
}

// fill replaces zero fields with their documented defaults.
func (c *Config) fill() {
	c.Period = cmp.Or(c.Period, 5*time.Second)
	c.FeedbackA = cmp.Or(c.FeedbackA, 5)
	c.TargetLoad = cmp.Or(c.TargetLoad, 0.95)
	c.MaxWeightScale = cmp.Or(c.MaxWeightScale, 10)
	c.Epsilon = cmp.Or(c.Epsilon, 0.25)
	c.VirtualNodes = cmp.Or(c.VirtualNodes, 100)
	c.TLow = cmp.Or(c.TLow, 25)
	c.THigh = cmp.Or(c.THigh, 65)
	c.K = cmp.Or(c.K, 20*time.Second)
	c.LoadLimit = cmp.Or(c.LoadLimit, c.THigh)
	c.ConnTimeout = cmp.Or(c.ConnTimeout, 5*time.Minute)
	c.CacheBytes = cmp.Or(c.CacheBytes, 32<<20)
	if c.NewReplacer == nil && c.NodeCache != "" && c.NodeCache != cache.LRU {
		budgets := slices.Clone(c.NodeCacheBytes)
		budget := c.CacheBytes
		c.NewReplacer = nodeCacheMirrors(cache.Config[struct{}]{Policy: c.NodeCache, Capacity: budget, Cost: cache.DiskCost,
			Admission: true}, func(i int) int64 {
			if i < len(budgets) && budgets[i] > 0 {
				return budgets[i]
			}
			return budget
		})
	}
	if c.NewReplacer == nil {
		c.NewReplacer = func(int) Replacer { return NewLRU() }
	}
	c.HandoffSize = cmp.Or(c.HandoffSize, 100<<10)
	c.OverloadConns = cmp.Or(c.OverloadConns, 130)
	c.PopularN = cmp.Or(c.PopularN, 100)
	c.FirstMember = cmp.Or(c.FirstMember, "wrr")
	c.MaxURLs = cmp.Or(c.MaxURLs, 65536)
	c.MaxURLBytes = cmp.Or(c.MaxURLBytes, 8<<20)
}

// validate rejects settings no policy can work with.
func (c *Config) validate() error {
	var errs []error
	if c.Period < 0 {
		errs = append(errs, fmt.Errorf("period %v: must be positive", c.Period))
	}
	if c.TargetLoad < 0 {
		errs = append(errs, fmt.Errorf("target load %v: must be positive", c.TargetLoad))
	}
	if c.MaxWeightScale < 1 {
		errs = append(errs, fmt.Errorf("max weight scale %d: must be at least 1", c.MaxWeightScale))
	}
	if c.Epsilon < 0 {
		errs = append(errs, fmt.Errorf("epsilon %v: must be positive", c.Epsilon))
	}
	if c.VirtualNodes < 1 || c.VirtualNodes > 10000 {
		errs = append(errs, fmt.Errorf("virtual nodes %d: must be in [1, 10000]", c.VirtualNodes))
	}
	if c.TLow < 0 || c.THigh < 0 || c.TLow > c.THigh {
		errs = append(errs, fmt.Errorf("lard thresholds T_low %d, T_high %d: need 0 <= T_low <= T_high", c.TLow, c.THigh))
	}
	if c.ConnTimeout < 0 {
		errs = append(errs, fmt.Errorf("connection timeout %v: must be positive", c.ConnTimeout))
	}
	if c.K < 0 {
		errs = append(errs, fmt.Errorf("lardr K %v: must be positive", c.K))
	}
	if c.LoadLimit < 0 || c.OverloadConns < 0 {
		errs = append(errs, fmt.Errorf("load limits %d, %d: must be positive", c.LoadLimit, c.OverloadConns))
	}
	if c.CacheBytes < 0 || c.NoCacheAbove < 0 || c.HandoffSize < 0 || c.PopularBytes < 0 {
		errs = append(errs, errors.New("byte sizes must not be negative"))
	}
	for i, b := range c.NodeCacheBytes {
		if b < 0 {
			errs = append(errs, fmt.Errorf("node %d cache bytes %d: must not be negative", i, b))
		}
	}
	switch c.NodeCache {
	case "", cache.LRU, cache.GDSF, cache.CGDSF:
	default:
		errs = append(errs, fmt.Errorf("node cache %q: want lru, gdsf or cgdsf", c.NodeCache))
	}
	if c.FirstMember != "wrr" && c.FirstMember != "lc" {
		errs = append(errs, fmt.Errorf("first member %q: want wrr or lc", c.FirstMember))
	}
	if c.MaxURLs < 1 || c.MaxURLs > 1<<30 {
		errs = append(errs, fmt.Errorf("max urls %d: must be in [1, 2^30]", c.MaxURLs))
	}
	if c.MaxURLBytes < 1 {
		errs = append(errs, fmt.Errorf("max url bytes %d: must be positive", c.MaxURLBytes))
	}
	if c.PopularN < 0 {
		errs = append(errs, fmt.Errorf("popular set size %d: must be positive", c.PopularN))
	}
	for g, w := range c.GroupWeights {
		if w < 0 {
			errs = append(errs, fmt.Errorf("group %q weight %d: must not be negative", g, w))
		}
	}
	return errors.Join(errs...)
}

// cacheBytes is node i's mirrored cache budget.
func (c *Config) cacheBytes(i int) int64 {
	if i < len(c.NodeCacheBytes) && c.NodeCacheBytes[i] > 0 {
		return c.NodeCacheBytes[i]
	}
	return c.CacheBytes
}

// constructors maps a policy name to its constructor; cfg is already filled.
var constructors = map[string]func(cfg Config) Policy{
	"rr":      func(Config) Policy { return &RR{} },
	"wrr":     func(Config) Policy { return &WRR{} },
	"gwrr":    func(cfg Config) Policy { return &GWRR{groupWeights: cfg.GroupWeights} },
	"lc":      func(Config) Policy { return &LC{} },
	"wlc":     func(Config) Policy { return &LC{weighted: true} },
	"dfwrr":   func(cfg Config) Policy { return newDFWRR(cfg) },
	"urlhash": func(Config) Policy { return &URLHash{} },
	"chbl":    func(cfg Config) Policy { return &CHBL{eps: cfg.Epsilon, vnodes: cfg.VirtualNodes} },
	"p2c":     func(cfg Config) Policy { return newP2C(cfg.Seed) },
	"lard":    func(cfg Config) Policy { return newLARD(cfg) },
	"lardr":   func(cfg Config) Policy { return newLARDR(cfg) },
	"tbccrd":  func(cfg Config) Policy { return newTBCCRD(cfg) },
	"weblins": func(cfg Config) Policy { return newWeblins(cfg) },
}

// New builds the built-in policy called name (see Names) with cfg's knobs;
// zero fields take their defaults. The error names the policy and the bad
// setting.
func New(name string, cfg Config) (Policy, error) { return (*Registry)(nil).New(name, cfg) }

// Names lists the built-in policy names New accepts, sorted.
func Names() []string { return (*Registry)(nil).Names() }

// Tabler is implemented by policies that keep tables worth showing an
// operator (lard's target map, tbccrd's URL distribution table). Tables
// returns a snapshot that encodes to JSON and does not alias the policy's
// state; limit caps the number of rows per table (0 = no rows, counts only).
type Tabler interface {
	Tables(limit int) any
}

// TableURLs is the number of URLs in the per-URL table of a policy that
// keeps one (lard, lardr, tbccrd, weblins), read from its Tables snapshot,
// so it is what an operator sees; ok is false for a policy without one. The
// tests of policy, cluster and front check with it that URL scans leave
// the tables bounded.
func TableURLs(p Policy) (n int, ok bool) {
	t, ok := p.(Tabler)
	if !ok {
		return 0, false
	}
	switch v := t.Tables(0).(type) {
	case LARDTables:
		return v.Targets, true
	case LARDRTables:
		return v.Targets, true
	case TBCCRDTables:
		return v.URLs, true
	case WeblinsTables:
		return v.Docs, true
	}
	return 0, false
}
