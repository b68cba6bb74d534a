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
}

func (p *describedPolicy) Name() string { return "described" }
func (p *describedPolicy) Traits() policy.Traits {
	return policy.Traits{Placement: p.placement, Front: policy.FrontL7}
}

// TestPassFDHandBackFollowsTraits: under ReturnAuto a node hands a passed
// connection back exactly when the policy declares itself content-aware
// (policy.Traits), whatever its name; a policy that declares nothing is
// taken as content-aware, the safe side.
func TestPassFDHandBackFollowsTraits(t *testing.T) {
	lard, err := policy.New("lard", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	wrr, err := policy.New("wrr", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pol  policy.Policy
		want bool
	}{
		{"built-in blind wrr", wrr, false},
		{"built-in content-aware lard", lard, true},
		{"declared blind", &describedPolicy{placement: policy.Blind}, false},
		{"declared content-aware at the front", &describedPolicy{placement: policy.AtFront}, true},
		{"declared content-aware at the holder", &describedPolicy{placement: policy.AtHolder}, true},
		{"no traits declared", &rrPolicy{}, true},
	}
	for _, c := range cases {
		cl, err := control.New(c.pol, []control.NodeSpec{{URL: "http://127.0.0.1:9"}}, control.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := PassFD(PassFDConfig{}).(*passfdPath)
		if got := p.handBack(&Server{cl: cl}); got != c.want {
			t.Errorf("%s: hand back = %v, want %v", c.name, got, c.want)
		}
	}
}
