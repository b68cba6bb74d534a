package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/internal/base/store"
)

// Traits is what a policy says about itself, so that the front, the
// simulator and the configuration template read it from the policy instead
// of keeping lists of policy names: adding a policy then touches
// only this package. A policy declares them with a Traits method (see
// Describer); TraitsOf reads them.
type Traits struct {
	// Placement says where the choice is made and whether it reads the URL.
	Placement Placement
	// Front is the front-end the policy is designed to run behind: the
	// simulator charges the front its cost per request (seed 000 §3.1) and,
	// for FrontL7, a front→node handoff per request.
	Front Front
	// Active: the policy reads Node.Active, the requests in flight and the
	// connections handed off to each node. The front counts a connection it
	// passed to a node (control.Cluster.Hold) until the node reports its end
	// only for such policies: the end notice costs a passfd front a wake-up
	// and two system calls per connection, more than the rest of the
	// handoff (docs/benchmarks.md, "Per-request budget").
	Active bool
	// Keys lists the [tuning] keys of the front's configuration file the
	// policy reads (see Knobs); the configuration template names, for each
	// key, the policies that read it.
	Keys []string
}

// Placement says on what, and where, a policy decides.
type Placement uint8

const (
	// AtFront policies read the request's URL at the front before any node
	// is chosen (lard, lardr, urlhash, chbl): content-aware, so a node must
	// hand a passed connection back after each request, whose next one may
	// belong to another node.
	AtFront Placement = iota
	// Blind policies never look at the URL (rr, wrr, lc, p2c, …): a layer-4
	// switch can run them and a node may keep a passed connection to its
	// end, as an LVS real server keeps its clients (seed 004).
	Blind
	// AtHolder policies decide after a layer-4 choice has already placed the
	// connection on a node, Request.Holder (seed 000's SYN rule, seed 001's
	// first member): content-aware, and a decision for another node than the
	// holder is a node-to-node handoff. The simulator places connections by
	// wrr and charges the holder for the handoff.
	AtHolder
)

// ContentAware reports whether decisions depend on the request's URL.
func (p Placement) ContentAware() bool { return p != Blind }

// String names the placement as the documentation does.
func (p Placement) String() string {
	switch p {
	case AtFront:
		return "content-aware at the front"
	case Blind:
		return "content-blind"
	case AtHolder:
		return "content-aware at the holder node"
	}
	return "placement(" + strconv.Itoa(int(p)) + ")"
}

// Front is a front-end's data path as the simulator costs it (seed 000 §3.1;
// internal/tools/sim's Costs.Front gives the CPU per request of each).
type Front uint8

const (
	// FrontL4 is a layer-4 switch forwarding the client's packets.
	FrontL4 Front = iota
	// FrontL7 accepts the connection, reads the request and hands it off
	// to, or relays it to, the chosen node: LARD's front, cost T1.
	FrontL7
	// FrontTag forwards packets and tags each request with its URL's node;
	// the nodes move connections themselves (TB-CCRD's front, cost T2).
	FrontTag
)

// String is the front's name as `shoal sim --front` spells it.
func (f Front) String() string {
	switch f {
	case FrontL4:
		return "l4"
	case FrontL7:
		return "l7"
	case FrontTag:
		return "tag"
	}
	return "front(" + strconv.Itoa(int(f)) + ")"
}

// Describer is implemented by policies that declare their traits; every
// policy of this package does.
type Describer interface {
	Traits() Traits
}

// TraitsOf returns p's declared traits. For a policy that declares none it
// assumes the safe ones: content-aware at the front (so passed connections
// come back to the front) behind an l7 front, reading the nodes' load and no
// keys.
func TraitsOf(p Policy) Traits {
	if d, ok := p.(Describer); ok {
		return d.Traits()
	}
	return Traits{Placement: AtFront, Front: FrontL7, Active: true}
}

// Registry is a set of named policy constructors. The zero value (and a nil
// *Registry) holds the built-in policies of this package; Add extends it
// with others, so the simulator can run, and a caller build, a policy
// defined outside this package without editing any name list.
type Registry struct {
	extra map[string]func(Config) Policy
}

// Add registers mk under name. Names already taken, built-in ones included,
// are refused so that a name always means one policy.
func (r *Registry) Add(name string, mk func(Config) Policy) error {
	if name == "" || strings.ContainsAny(name, ", \t") {
		return fmt.Errorf("policy %q: a name is one word without commas", name)
	}
	if _, ok := r.lookup(name); ok {
		return fmt.Errorf("policy %q: already registered", name)
	}
	if r.extra == nil {
		r.extra = map[string]func(Config) Policy{}
	}
	r.extra[name] = mk
	return nil
}

func (r *Registry) lookup(name string) (func(Config) Policy, bool) {
	if mk, ok := constructors[name]; ok {
		return mk, true
	}
	if r == nil {
		return nil, false
	}
	mk, ok := r.extra[name]
	return mk, ok
}

// New builds the policy called name with cfg's knobs; zero fields take their
// defaults. The error names the policy and the bad setting.
func (r *Registry) New(name string, cfg Config) (Policy, error) {
	mk, ok := r.lookup(name)
	if !ok {
		return nil, fmt.Errorf("policy %q: unknown (have %v)", name, r.Names())
	}
	cfg.fill()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return mk(cfg), nil
}

// Names lists the registered names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(constructors))
	for n := range constructors {
		names = append(names, n)
	}
	if r != nil {
		for n := range r.extra {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Traits returns the traits of the policy called name, built with the
// default configuration.
func (r *Registry) Traits(name string) (Traits, error) {
	p, err := r.New(name, Config{})
	if err != nil {
		return Traits{}, err
	}
	return TraitsOf(p), nil
}

// Tuning is the [tuning] table of the front's configuration file: the
// policies' knobs in the units an operator writes (MiB, KiB, durations as
// "20s"). Zero means the policy's default; Config converts it. Knobs
// documents each key; a policy lists those it reads in Traits.Keys.
type Tuning struct {
	Seed          uint64         `toml:"seed"`
	Epsilon       float64        `toml:"epsilon"`
	VirtualNodes  int            `toml:"virtual_nodes"`
	TLow          int            `toml:"t_low"`
	THigh         int            `toml:"t_high"`
	K             time.Duration  `toml:"k"`
	Period        time.Duration  `toml:"period"`
	FeedbackA     float64        `toml:"feedback_a"`
	TargetLoad    float64        `toml:"target_load"`
	LoadLimit     int            `toml:"load_limit"`
	CacheMB       int64          `toml:"cache_mb"`
	NodeCache     string         `toml:"node_cache"`
	NoCacheKB     int64          `toml:"no_cache_kb"`
	HandoffKB     int64          `toml:"handoff_kb"`
	OverloadConns int            `toml:"overload_conns"`
	PopularN      int            `toml:"popular_n"`
	GroupWeights  map[string]int `toml:"group_weights"`
	MaxURLs       int            `toml:"max_urls"`
	MaxURLMB      int64          `toml:"max_url_mb"`
}

// Config converts the tuning to a policy Config. With node_cache set the
// nodes are shoal nodes whose object stores the mirrors follow: objects
// cost them store.Footprint, and unless no_cache_kb says otherwise they
// admit up to an eighth of their budget, at least 500 KB
// (store.Config.DefaultMaxObject).
func (t Tuning) Config() Config {
	c := t.config()
	if t.NodeCache != "" {
		c.NodeFootprint = func(size int64) int64 { return store.Footprint(size, 0) }
		if c.NoCacheAbove == 0 && c.CacheBytes > 0 {
			c.NoCacheAbove = store.Config{MemoryBytes: c.CacheBytes}.DefaultMaxObject()
		}
	}
	return c
}

func (t Tuning) config() Config {
	return Config{
		Seed: t.Seed, Epsilon: t.Epsilon, VirtualNodes: t.VirtualNodes,
		TLow: t.TLow, THigh: t.THigh, K: t.K, Period: t.Period,
		FeedbackA: t.FeedbackA, TargetLoad: t.TargetLoad, LoadLimit: t.LoadLimit,
		CacheBytes: t.CacheMB << 20, NodeCache: t.NodeCache, NoCacheAbove: t.NoCacheKB << 10, HandoffSize: t.HandoffKB << 10,
		OverloadConns: t.OverloadConns, PopularN: t.PopularN, GroupWeights: t.GroupWeights,
		MaxURLs: t.MaxURLs, MaxURLBytes: t.MaxURLMB << 20,
	}
}

// defaultTuning is DefaultConfig in Tuning's units.
func defaultTuning() Tuning {
	c := DefaultConfig()
	return Tuning{
		Seed: c.Seed, Epsilon: c.Epsilon, VirtualNodes: c.VirtualNodes,
		TLow: c.TLow, THigh: c.THigh, K: c.K, Period: c.Period,
		FeedbackA: c.FeedbackA, TargetLoad: c.TargetLoad, LoadLimit: c.LoadLimit,
		CacheMB: c.CacheBytes >> 20, NodeCache: c.NodeCache, NoCacheKB: c.NoCacheAbove >> 10, HandoffKB: c.HandoffSize >> 10,
		OverloadConns: c.OverloadConns, PopularN: c.PopularN, GroupWeights: c.GroupWeights,
		MaxURLs: c.MaxURLs, MaxURLMB: c.MaxURLBytes >> 20,
	}
}

// Knob documents one [tuning] key.
type Knob struct {
	// Key is the TOML key.
	Key string
	// Doc says what it does, in a line.
	Doc string
	// value is the key's field in a Tuning (nil for keys the template shows
	// only as a commented example).
	value func(t *Tuning) any
	// example is written, commented out, when value is nil.
	example string
}

// knobs is every [tuning] key in the order the template lists them.
var knobs = []Knob{
	{Key: "seed", Doc: "random seed: equal seeds, equal decisions", value: func(t *Tuning) any { return t.Seed }},
	{Key: "epsilon", Doc: "a node holds at most ceil((1+eps)*mean) requests", value: func(t *Tuning) any { return t.Epsilon }},
	{Key: "virtual_nodes", Doc: "ring points per node", value: func(t *Tuning) any { return t.VirtualNodes }},
	{Key: "t_low", Doc: "LARD's T_low in active requests: below it a node takes more", value: func(t *Tuning) any { return t.TLow }},
	{Key: "t_high", Doc: "LARD's T_high: above it a node sheds load", value: func(t *Tuning) any { return t.THigh }},
	{Key: "k", Doc: "shrink a server set unchanged this long", value: func(t *Tuning) any { return t.K }},
	{Key: "period", Doc: "feedback period; popular-set rebuild", value: func(t *Tuning) any { return t.Period }},
	{Key: "feedback_a", Doc: "w += A*cbrt(target - load)", value: func(t *Tuning) any { return t.FeedbackA }},
	{Key: "target_load", Doc: "utilisation the feedback steers to", value: func(t *Tuning) any { return t.TargetLoad }},
	{Key: "load_limit", Doc: "a cache holder this loaded falls back to a disk holder", value: func(t *Tuning) any { return t.LoadLimit }},
	{Key: "cache_mb", Doc: "each node's mirrored cache budget", value: func(t *Tuning) any { return t.CacheMB }},
	{Key: "node_cache", Doc: "the nodes' --cache (lru, gdsf, cgdsf): mirrors evict in its order; \"\" = lru", value: func(t *Tuning) any { return t.NodeCache }},
	{Key: "no_cache_kb", Doc: "objects above this are never cached; 0: 500, weblins 100", value: func(t *Tuning) any { return t.NoCacheKB }},
	{Key: "handoff_kb", Doc: "hand off files at least this large (seed 001's S)", value: func(t *Tuning) any { return t.HandoffKB }},
	{Key: "overload_conns", Doc: "an owner this busy is overloaded (seed 001's T)", value: func(t *Tuning) any { return t.OverloadConns }},
	{Key: "popular_n", Doc: "size of the replicated popular set", value: func(t *Tuning) any { return t.PopularN }},
	{Key: "max_urls", Doc: "URLs per table; least recently requested evicted", value: func(t *Tuning) any { return t.MaxURLs }},
	{Key: "max_url_mb", Doc: "URL text those tables hold, in MiB", value: func(t *Tuning) any { return t.MaxURLMB }},
	{Key: "group_weights", Doc: "a group's weight; default: its members' sum", example: "{ fast = 3, slow = 1 }"},
}

// Knobs lists every [tuning] key with its documentation.
func Knobs() []Knob { return slices.Clone(knobs) }

// TuningTemplate writes the [tuning] table with every default and, for each
// key, the policies of r that read it (Traits.Keys), so the template a front
// prints (`shoal front --print-config`) follows the policies. Unknown keys in
// a policy's Traits are an error: the template would not show them.
func (r *Registry) TuningTemplate() (string, error) {
	users := map[string][]string{}
	for _, name := range r.Names() {
		tr, err := r.Traits(name)
		if err != nil {
			return "", err
		}
		for _, k := range tr.Keys {
			if !slices.ContainsFunc(knobs, func(kn Knob) bool { return kn.Key == k }) {
				return "", fmt.Errorf("policy %s: reads [tuning] key %q, which no Knob documents", name, k)
			}
			users[k] = append(users[k], name)
		}
	}
	d := defaultTuning()
	var b strings.Builder
	b.WriteString("[tuning]                       # policy knobs; 0 means the policy's default\n")
	for _, kn := range knobs {
		line := kn.Key + " = "
		if kn.value == nil {
			line = "# " + line + kn.example
		} else {
			line += tomlValue(kn.value(&d))
		}
		doc := kn.Doc
		if u := users[kn.Key]; len(u) > 0 {
			doc = strings.Join(u, "/") + ": " + doc
		}
		fmt.Fprintf(&b, "%-30s # %s\n", line, doc)
	}
	return b.String(), nil
}

// tomlValue writes v as a TOML literal that decodes back into Tuning's field.
func tomlValue(v any) string {
	switch v := v.(type) {
	case time.Duration:
		return strconv.Quote(v.String())
	case string:
		return strconv.Quote(v)
	case float64:
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	}
	return fmt.Sprint(v)
}
