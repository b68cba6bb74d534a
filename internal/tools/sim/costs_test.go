package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCostModel(t *testing.T) {
	c := DefaultCosts()
	us := time.Microsecond
	ms := time.Millisecond
	cases := []struct {
		name      string
		got, want time.Duration
	}{
		{"transmit 0 B", c.Transmit(0), 0},
		{"transmit 1 B", c.Transmit(1), 40 * us},
		{"transmit 8 KiB", c.Transmit(8 << 10), 16 * 40 * us},
		{"transmit 513 B", c.Transmit(513), 80 * us},
		// 28 ms + 2 blocks × 410 µs
		{"disk 8 KiB", c.Disk(8 << 10), 28*ms + 820*us},
		// 44 KiB exactly: 11 blocks, no extra seek
		{"disk 44 KiB", c.Disk(44 << 10), 28*ms + 11*410*us},
		// 100 KiB: 25 blocks; 56 KiB above 44 KiB → 2 extra seeks
		{"disk 100 KiB", c.Disk(100 << 10), 28*ms + 25*410*us + 2*14*ms},
		{"front l7 = T1", c.Front(PathL7), 120*us + 120*us + 18*us + 8*us},
		{"front tag = T2", c.Front(PathTag), 4*8*us + 18*us},
		{"front l4", c.Front(PathL4), 4*8*us + 8*us},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if r := float64(c.Front(PathL7)) / float64(c.Front(PathTag)); r < 5 {
		t.Errorf("T1/T2 = %.2f, seed 000 §3.1 says more than 5", r)
	}
}

func TestLoadCosts(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("conn_setup = \"200us\"\nno_cache_above = 102400\nt_transfer = 5000\n"), 0o644)
	c, err := LoadCosts(good, DefaultCosts())
	if err != nil {
		t.Fatal(err)
	}
	if c.ConnSetup != 200*time.Microsecond || c.NoCacheAbove != 100<<10 || c.Ttransfer != 5*time.Microsecond {
		t.Errorf("got %+v", c)
	}
	if c.ConnTeardown != 145*time.Microsecond {
		t.Errorf("untouched field changed: %v", c.ConnTeardown)
	}
	for name, body := range map[string]string{
		"typo.toml": "conn_setpu = \"1ms\"\n",
		"neg.toml":  "disk_latency = \"-1ms\"\n",
		"bad.toml":  "conn_setup = \"fast\"\n",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := LoadCosts(p, DefaultCosts()); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err %v, want an error naming the file", name, err)
		}
	}
	if _, err := LoadCosts(filepath.Join(dir, "missing.toml"), DefaultCosts()); err == nil {
		t.Error("missing file: no error")
	}
}

func TestParsePath(t *testing.T) {
	for in, want := range map[string]Path{"": "", "auto": "", "l4": PathL4, "l7": PathL7, "relay": PathL7, "tag": PathTag} {
		if got, err := ParsePath(in); err != nil || got != want {
			t.Errorf("ParsePath(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParsePath("l3"); err == nil {
		t.Error("l3 accepted")
	}
}

// TestCostsScaled: time costs scale, byte costs do not, and a run on
// scaled costs takes f times the virtual time with the same counts when no
// policy acts on a period (wrr, urlhash).
func TestCostsScaled(t *testing.T) {
	c := DefaultCosts().Scaled(0.5)
	if c.DiskLatency != 14*time.Millisecond || c.ConnSetup != 72500*time.Nanosecond || c.Tconn != 60*time.Microsecond {
		t.Errorf("scaled times: disk %v setup %v tconn %v, want 14ms 72.5µs 60µs", c.DiskLatency, c.ConnSetup, c.Tconn)
	}
	if c.NoCacheAbove != 0 || c.QueryBytes != 84 { // 0: the live nodes' admission
		t.Errorf("byte costs changed: %d %d", c.NoCacheAbove, c.QueryBytes)
	}
	acc := []Access{{URL: "/a", Size: 9000}, {URL: "/b", Size: 100}, {URL: "/a", Size: 9000}, {URL: "/c", Size: 60 << 10}, {URL: "/b", Size: 100}}
	for _, pol := range []string{"wrr", "urlhash"} {
		def := DefaultCosts()
		a, err := Run(Config{Policy: pol, Nodes: 2, PerNode: 1, Costs: &def}, NewSliceSource(acc))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(Config{Policy: pol, Nodes: 2, PerNode: 1, Costs: &c}, NewSliceSource(acc))
		if err != nil {
			t.Fatal(err)
		}
		if a.MemHits != b.MemHits || a.DiskReads != b.DiskReads || b.Elapsed != a.Elapsed/2 {
			t.Errorf("%s: default %d hits %d reads in %v, scaled 0.5 %d hits %d reads in %v", pol,
				a.MemHits, a.DiskReads, a.Elapsed, b.MemHits, b.DiskReads, b.Elapsed)
		}
	}
}
