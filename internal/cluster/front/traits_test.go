package front

import (
	"testing"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/policy"
)

// describedPolicy is a policy the front knows only by the traits it
// declares: its name is in no list of the front's.
type describedPolicy struct {
	rrPolicy
	placement policy.Placement
	active    bool
}

func (p *describedPolicy) Name() string { return "described" }
func (p *describedPolicy) Traits() policy.Traits {
	return policy.Traits{Placement: p.placement, Front: policy.FrontL7, Active: p.active}
}

// TestPassFDHandBackFollowsTraits: under ReturnAuto a node hands a passed
// connection back exactly when the policy declares itself content-aware
// (policy.Traits), whatever its name, and the front holds a passed
// connection against its node (and asks for its end) exactly when the
// policy reads the nodes' load; a policy that declares nothing is taken as
// content-aware and load-aware, the safe side.
func TestPassFDHandBackFollowsTraits(t *testing.T) {
	lard, err := policy.New("lard", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	wrr, err := policy.New("wrr", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := policy.New("lc", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		pol         policy.Policy
		back, track bool
	}{
		{"built-in blind wrr", wrr, false, false},
		{"built-in blind, load-aware lc", lc, false, true},
		{"built-in content-aware lard", lard, true, true},
		{"declared blind", &describedPolicy{placement: policy.Blind}, false, false},
		{"declared blind, load-aware", &describedPolicy{placement: policy.Blind, active: true}, false, true},
		{"declared content-aware at the front", &describedPolicy{placement: policy.AtFront}, true, false},
		{"declared content-aware at the holder", &describedPolicy{placement: policy.AtHolder, active: true}, true, true},
		{"no traits declared", &rrPolicy{}, true, true},
	}
	for _, c := range cases {
		cl, err := control.New(c.pol, []control.NodeSpec{{URL: "http://127.0.0.1:9"}}, control.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := PassFD(PassFDConfig{}).(*passfdPath)
		if back, track := p.handBack(&Server{cl: cl}); back != c.back || track != c.track {
			t.Errorf("%s: hand back %v, hold %v; want %v, %v", c.name, back, track, c.back, c.track)
		}
	}
}

// TestPassFDHandBackAllocatesNothing: the answer is cached per policy, so
// asking it for each request allocates nothing.
func TestPassFDHandBackAllocatesNothing(t *testing.T) {
	wrr, err := policy.New("wrr", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := control.New(policy.NewSwitch(wrr), []control.NodeSpec{{URL: "http://127.0.0.1:9"}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := PassFD(PassFDConfig{}).(*passfdPath)
	s := &Server{cl: cl}
	p.handBack(s)
	if n := testing.AllocsPerRun(100, func() { p.handBack(s) }); n != 0 {
		t.Errorf("handBack allocates %v times a call, want 0", n)
	}
}
