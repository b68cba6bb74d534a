package policy

import (
	"slices"
	"strings"
	"testing"
)

// TestBuiltinTraits spells out, by hand, what the front and the simulator
// used to keep in name lists (front's contentBlind, sim's nodeDispatched
// and DefaultPath): every built-in policy must declare the same.
func TestBuiltinTraits(t *testing.T) {
	want := map[string]Traits{
		"rr":      {Placement: Blind, Front: FrontL4},
		"wrr":     {Placement: Blind, Front: FrontL4},
		"gwrr":    {Placement: Blind, Front: FrontL4},
		"lc":      {Placement: Blind, Front: FrontL4, Active: true},
		"wlc":     {Placement: Blind, Front: FrontL4, Active: true},
		"dfwrr":   {Placement: Blind, Front: FrontL4},
		"p2c":     {Placement: Blind, Front: FrontL4, Active: true},
		"urlhash": {Placement: AtFront, Front: FrontL7},
		"chbl":    {Placement: AtFront, Front: FrontL7, Active: true},
		"lard":    {Placement: AtFront, Front: FrontL7, Active: true},
		"lardr":   {Placement: AtFront, Front: FrontL7, Active: true},
		"tbccrd":  {Placement: AtHolder, Front: FrontTag, Active: true},
		"weblins": {Placement: AtHolder, Front: FrontL4, Active: true},
	}
	if got := Names(); !slices.Equal(got, slices.Sorted(func(yield func(string) bool) {
		for n := range want {
			if !yield(n) {
				return
			}
		}
	})) {
		t.Fatalf("Names() = %v; the table above lists %d policies", got, len(want))
	}
	for name, w := range want {
		p, err := New(name, Config{})
		if err != nil {
			t.Fatal(err)
		}
		got := TraitsOf(p)
		if got.Placement != w.Placement || got.Front != w.Front {
			t.Errorf("%s: %v behind %v, want %v behind %v", name, got.Placement, got.Front, w.Placement, w.Front)
		}
		if got.Active != w.Active {
			t.Errorf("%s: Active = %v, want %v", name, got.Active, w.Active)
		}
		if got.Placement.ContentAware() != (w.Placement != Blind) {
			t.Errorf("%s: ContentAware = %v", name, got.Placement.ContentAware())
		}
	}
}

// TestRegistryAdd: a registry holds the built-in policies plus those added,
// refuses a name twice, and New reaches the added constructor with the
// filled and validated configuration.
func TestRegistryAdd(t *testing.T) {
	var r Registry
	var seen Config
	mk := func(c Config) Policy { seen = c; return &RR{} }
	if err := r.Add("mine", mk); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mine", "wrr", "", "a,b"} {
		if err := r.Add(name, mk); err == nil {
			t.Errorf("Add(%q) accepted", name)
		}
	}
	if !slices.Contains(r.Names(), "mine") || slices.Contains(Names(), "mine") {
		t.Errorf("registry names %v, built-in %v", r.Names(), Names())
	}
	if _, err := r.New("mine", Config{}); err != nil || seen.TLow != 25 {
		t.Errorf("New(mine) = %v with T_low %d, want the filled default 25", err, seen.TLow)
	}
	if _, err := r.New("mine", Config{TLow: 9, THigh: 3}); err == nil || !strings.Contains(err.Error(), "policy mine") {
		t.Errorf("New(mine) with bad thresholds = %v", err)
	}
	if _, err := New("mine", Config{}); err == nil {
		t.Error("the built-in set knows a policy added to another registry")
	}
	if tr, err := r.Traits("mine"); err != nil || tr.Placement != Blind {
		t.Errorf("Traits(mine) = %+v, %v; want rr's blind", tr, err)
	}
}

// keysPolicy reads whatever keys it is given.
type keysPolicy struct {
	RR
	keys []string
}

func (p *keysPolicy) Traits() Traits { return Traits{Placement: Blind, Keys: p.keys} }

// TestTuningTemplate: each key's line names the policies that read it, and
// a policy reading a key no Knob documents is an error, not a silent gap.
func TestTuningTemplate(t *testing.T) {
	s, err := (*Registry)(nil).TuningTemplate()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`t_low = 25                     # lard/lardr: `,
		`k = "20s"                      # lardr: `,
		`feedback_a = 5.0               # dfwrr: `,
		`max_urls = 65536               # lard/lardr/tbccrd/weblins: `,
		`# group_weights = { fast = 3, slow = 1 } # gwrr: `,
	} {
		if !strings.Contains(s, "\n"+want) {
			t.Errorf("template lacks line %q:\n%s", want, s)
		}
	}
	var r Registry
	r.Add("seedy", func(Config) Policy { return &keysPolicy{keys: []string{"seed"}} })
	if s, err := r.TuningTemplate(); err != nil || !strings.Contains(s, "# p2c/seedy: ") {
		t.Errorf("seed line does not name the added policy (%v):\n%s", err, s)
	}
	r.Add("typo", func(Config) Policy { return &keysPolicy{keys: []string{"t_lo"}} })
	if _, err := r.TuningTemplate(); err == nil || !strings.Contains(err.Error(), `policy typo: reads [tuning] key "t_lo"`) {
		t.Errorf("unknown key: err = %v", err)
	}
}
