package store

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPlanMemory(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		limit                  int64
		nodes                  int
		store, goLimit, inline int64
		short                  bool
	}{
		{0, 1, 0, 0, 0, false}, // no limit: nothing planned
		// 36 less 10 for the process; arena at most 13; Go what the arena
		// and 4 MiB of kernel memory leave: 36-13-4.
		{36 * mib, 1, 26 * mib, 19 * mib, 13 * mib, false},
		// 144 less 10 and 2 for each further node, over 4; arenas 16 each;
		// Go 144-64-4.
		{144 * mib, 4, 32 * mib, 76 * mib, 16 * mib, false},
		// 16: the arena 3; Go at least 10+2.
		{16 * mib, 1, 6 * mib, 12 * mib, 3 * mib, false},
		// 12: the runtime at ease (10+2) and a 1 MiB arena.
		{12 * mib, 1, 2 * mib, 12 * mib, 1 * mib, false},
		// Small: MinStore, no arena; Go never above the limit; short below
		// 8 MiB, and below 8 + 2 for each further node.
		{8 * mib, 1, 1 * mib, 8 * mib, NoInline, false},
		{5 * mib, 1, 1 * mib, 5 * mib, NoInline, true},
		{12 * mib, 4, 1 * mib, 12 * mib, NoInline, true},
	}
	for _, c := range cases {
		p := PlanMemory(c.limit, "src", c.nodes)
		if p.Store/mib != c.store/mib || p.GoLimit/mib != c.goLimit/mib || p.Inline != c.inline || p.Nodes != c.nodes {
			t.Errorf("PlanMemory(%d MiB, %d nodes) = store %d MiB, Go %d MiB, arena %d MiB; want %d, %d, %d",
				c.limit/mib, c.nodes, p.Store/mib, p.GoLimit/mib, p.Inline/mib, c.store/mib, c.goLimit/mib, c.inline/mib)
		}
		if p.Short() != c.short {
			t.Errorf("PlanMemory(%d MiB, %d nodes).Short() = %v", c.limit/mib, c.nodes, p.Short())
		}
		if want := map[bool]int{true: GCPercent}[c.limit > 0]; p.GCPercent != want {
			t.Errorf("PlanMemory(%d MiB): GC percent %d, want %d", c.limit/mib, p.GCPercent, want)
		}
		w := p.WithStore(40 * mib) // by hand, even too large: the Go limit stays
		if w.Store != 40*mib || w.GoLimit != p.GoLimit {
			t.Errorf("PlanMemory(%d MiB).WithStore(40 MiB) = store %d, Go %d MiB", c.limit/mib, w.Store/mib, w.GoLimit/mib)
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
