package policy

import (
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// TestConfigTOML checks that the knobs decode from a TOML file as a front
// or simulator config would give them, and that defaults fill the rest.
func TestConfigTOML(t *testing.T) {
	const doc = `
epsilon = 0.5
k = "30s"
t_low = 10
period = "1m"
group_weights = { big = 3 }
node_cache_bytes = [0, 1048576]
`
	var cfg Config
	if _, err := toml.Decode(doc, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.fill()
	if cfg.Epsilon != 0.5 || cfg.K != 30*time.Second || cfg.TLow != 10 || cfg.THigh != 65 ||
		cfg.Period != time.Minute || cfg.GroupWeights["big"] != 3 || cfg.LoadLimit != 65 {
		t.Errorf("decoded %+v", cfg)
	}
	if cfg.cacheBytes(0) != 32<<20 || cfg.cacheBytes(1) != 1<<20 || cfg.cacheBytes(7) != 32<<20 {
		t.Errorf("cache bytes %d %d %d", cfg.cacheBytes(0), cfg.cacheBytes(1), cfg.cacheBytes(7))
	}
}
