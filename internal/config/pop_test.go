package config

import (
	"strings"
	"testing"
	"time"
)

func basePop() Pop {
	return Pop{Name: "a", SeedFile: "s", Nodes: 2, CacheMB: 64,
		MBPP:  PopMBPP{Hold: Duration{time.Second}, AckTimeout: Duration{time.Second}, RTTRef: Duration{time.Second}, LearningFactor: 0.125, WeightLink: 1, WeightServer: 3, WatchdogRounds: 3},
		Chord: PopChord{Successors: 4, Stabilise: Duration{time.Second}, FixFingers: Duration{time.Second}, CheckPredecessor: Duration{time.Second}}}
}

func TestParsePop(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"name = \"paris\"\n[mbpp]\nhold = \"50ms\"\n", ""},
		{"name = \"paris\"\n[mbpp]\nholdd = \"50ms\"\n", `pop.toml:3: unknown key "mbpp.holdd"`},
		{"nodes = 0\n", "pop.toml:1: nodes = 0"},
		{"[chord]\nsuccessors = 2\n", "pop.toml:2: successors = 2"},
		{"[mbpp]\nlearning_factor = 2.0\n", "pop.toml:2: learning_factor 2 is outside"},
	} {
		p, err := ParsePop("pop.toml", []byte(tc.file), basePop())
		if tc.want == "" {
			if err != nil || p.Name != "paris" || p.MBPP.Hold.Duration != 50*time.Millisecond || p.Chord.Successors != 4 {
				t.Fatalf("%q: %+v %v", tc.file, p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%q: error %v, want %q", tc.file, err, tc.want)
		}
	}
	// The template parses back to the same values.
	b := basePop()
	if p, err := ParsePop("t", []byte(PopTemplate(b)), Pop{}); err != nil || p.MBPP != b.MBPP || p.Chord != b.Chord {
		t.Fatalf("template round trip: %+v %v\n%s", p, err, PopTemplate(b))
	}
}
