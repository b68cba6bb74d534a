package mbpp

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// TestTrafficPerRound measures messages and bytes per MBPP round (-v
// logs them). "steady": link RTTs do not change, so
// only tokens and acks travel; "churn": every RTT sample moves by up to
// ±30 %, so most entries change every round (the worst case of the delta
// encoding).
func TestTrafficPerRound(t *testing.T) {
	sizes := []int{8, 64, 512}
	if testing.Short() || testutil.RaceEnabled {
		sizes = sizes[:2]
	}
	for _, n := range sizes {
		for _, churn := range []bool{false, true} {
			name := fmt.Sprintf("%d/steady", n)
			if churn {
				name = fmt.Sprintf("%d/churn", n)
			}
			t.Run(name, func(t *testing.T) {
				v := newVnet(t)
				v.delay = func(a, b ID) time.Duration { return time.Duration(2+(a^b)%20) * time.Millisecond }
				if churn {
					r := rand.New(rand.NewPCG(1, 2))
					v.jitter = func() time.Duration { return time.Duration(r.IntN(24)) * time.Millisecond }
				}
				ids := v.ring(n, 10*time.Minute)
				round := testConfig(1).Round(n, 12*time.Millisecond)
				v.run(v.now.Add(3 * round))
				v.msgs, v.bytes = map[Kind]int{}, map[Kind]int{}
				c0 := v.nodes[ids[0]].Stats().Cycles
				v.run(v.now.Add(5 * round))
				rounds := float64(v.nodes[ids[0]].Stats().Cycles - c0)
				if rounds < 3 {
					t.Fatalf("only %v rounds", rounds)
				}
				var msgs, bytes int
				for k := range v.msgs {
					msgs += v.msgs[k]
					bytes += v.bytes[k]
				}
				if churn == false && float64(v.msgs[KindPing])/rounds > 1.2*float64(n) {
					t.Fatalf("%v pings per round for %d PoPs", float64(v.msgs[KindPing])/rounds, n)
				}
				t.Logf("N=%d %s: %.0f msgs/round (ping %.0f pong %.0f ack %.0f), %.0f bytes/round (ping %.0f), %.1f bytes/PoP/round",
					n, name, float64(msgs)/rounds, float64(v.msgs[KindPing])/rounds, float64(v.msgs[KindPong])/rounds,
					float64(v.msgs[KindAck])/rounds, float64(bytes)/rounds, float64(v.bytes[KindPing])/rounds, float64(bytes)/rounds/float64(n))
			})
		}
	}
}
