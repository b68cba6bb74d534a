package policy

import "testing"

// TestSwitchTraits: the reloadable switch declares the traits of the policy
// it holds, and follows a Set. Without them TraitsOf's safe default made
// every wrapped policy look content-aware.
func TestSwitchTraits(t *testing.T) {
	wrr, err := New("wrr", Config{})
	if err != nil {
		t.Fatal(err)
	}
	lard, err := New("lard", Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSwitch(wrr)
	if got := TraitsOf(s); got.Placement != Blind || got.Front != FrontL4 {
		t.Errorf("switch holding wrr: %+v, want blind behind an l4 front", got)
	}
	s.Set(lard)
	if got := TraitsOf(s); got.Placement != AtFront || got.Front != FrontL7 || len(got.Keys) == 0 {
		t.Errorf("switch holding lard: %+v, want lard's traits", got)
	}
}
