package up

import (
	"slices"
	"testing"
	"time"
)

// TestDigestPeriodReachesNodeProcesses: Config.DigestPeriod becomes the
// node processes' --digest-period; unset, the nodes keep their default.
func TestDigestPeriodReachesNodeProcesses(t *testing.T) {
	for _, c := range []struct {
		period time.Duration
		want   string // "" = no flag
	}{{0, ""}, {100 * time.Millisecond, "100ms"}, {5 * time.Second, "5s"}} {
		p := &Procs{Cluster: &Cluster{Config: Config{DataDir: t.TempDir(), DigestPeriod: c.period}}}
		args, err := p.peerArgs([]string{"127.0.0.1:1", "127.0.0.1:2"}, true)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(args, "--digest-period")
		switch {
		case c.want == "" && i >= 0:
			t.Errorf("period %v: %v has --digest-period", c.period, args)
		case c.want != "" && (i < 0 || i+1 >= len(args) || args[i+1] != c.want):
			t.Errorf("period %v: %v lacks --digest-period %s", c.period, args, c.want)
		}
	}
}
