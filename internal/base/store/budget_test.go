package store

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPlanMemory(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		limit           int64
		nodes           int
		store, goLimit  int64
		withStore, goWS int64 // WithStore(withStore) gives goLimit goWS
	}{
		{0, 1, 0, 0, 16 * mib, 0},                              // no limit: nothing planned
		{36 * mib, 1, 24 * mib, 12 * mib, 30 * mib, 12 * mib},  // a store too large keeps Go's limit
		{144 * mib, 4, 31 * mib, 18 * mib, 16 * mib, 80 * mib}, // 144-12-3·2 = 126, /4 = 31.5 → floor; Go 18
		{8 * mib, 1, 1 * mib, 7 * mib, 4 * mib, 12 * mib},      // tiny: MinStore; the Go limit is what is left
	}
	for _, c := range cases {
		p := PlanMemory(c.limit, "src", c.nodes)
		if p.Store/mib != c.store/mib || p.GoLimit/mib != c.goLimit/mib || p.Nodes != c.nodes {
			t.Errorf("PlanMemory(%d MiB, %d nodes) = store %d MiB, Go %d MiB; want %d, %d",
				c.limit/mib, c.nodes, p.Store/mib, p.GoLimit/mib, c.store/mib, c.goLimit/mib)
		}
		w := p.WithStore(c.withStore)
		if w.Store != c.withStore || w.GoLimit/mib != c.goWS/mib {
			t.Errorf("PlanMemory(%d MiB).WithStore(%d MiB) = store %d, Go %d MiB; want Go %d MiB",
				c.limit/mib, c.withStore/mib, w.Store/mib, w.GoLimit/mib, c.goWS/mib)
		}
	}
}

func TestCgroupFiles(t *testing.T) {
	v1, v2 := cgroupPaths("12:cpu,cpuacct:/x\n4:memory:/process_api/abc\n0::/user.slice/s1\n")
	if v1 != "/process_api/abc" || v2 != "/user.slice/s1" {
		t.Errorf("cgroupPaths: %q %q", v1, v2)
	}
	dir := t.TempDir()
	mi := filepath.Join(dir, "mountinfo")
	os.WriteFile(mi, []byte(
		"30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n"+
			"31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"+
			"32 25 0:28 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu\n"), 0o600)
	m, err := cgroupMounts(mi)
	if err != nil || m["cgroup2"] != "/sys/fs/cgroup/unified" || m["memory"] != "/sys/fs/cgroup/memory" || len(m) != 2 {
		t.Errorf("cgroupMounts: %v %v", m, err)
	}
	// v1: the smaller of the group's limit and the hierarchical one.
	g := filepath.Join(dir, "v1", "g")
	os.MkdirAll(g, 0o700)
	os.WriteFile(filepath.Join(g, "memory.limit_in_bytes"), []byte("9223372036854771712\n"), 0o600)
	os.WriteFile(filepath.Join(g, "memory.stat"), []byte("cache 1\nhierarchical_memory_limit 37748736\n"), 0o600)
	if n, src := limitV1(g); n != 36<<20 || filepath.Base(src) != "memory.stat" {
		t.Errorf("limitV1: %d %s", n, src)
	}
	// v2: the smallest memory.max or memory.high up to the mount.
	root := filepath.Join(dir, "v2")
	leaf := filepath.Join(root, "a", "b")
	os.MkdirAll(leaf, 0o700)
	os.WriteFile(filepath.Join(leaf, "memory.max"), []byte("max\n"), 0o600)
	os.WriteFile(filepath.Join(root, "a", "memory.max"), []byte("50331648\n"), 0o600)
	os.WriteFile(filepath.Join(root, "a", "memory.high"), []byte("41943040\n"), 0o600)
	if n, src := limitV2(root, "/a/b"); n != 40<<20 || src != filepath.Join(root, "a", "memory.high") {
		t.Errorf("limitV2: %d %s", n, src)
	}
	if n, _ := limitV2(root, "/"); n != 0 {
		t.Errorf("limitV2 of the root: %d, want none", n)
	}
}
