package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A node lives within its memory: a process in a memory cgroup is killed
// when what the cgroup charges (its anonymous memory, the Go heap and the
// arena, and the page cache it reads in) cannot be brought under the
// limit. Page cache is reclaimable and anonymous memory is not, so the
// plan keeps the Go runtime and the arena well inside the limit, gives the
// store's memory tier what is left after the process's own overhead, and
// lets the kernel reclaim file pages if the estimate is off.

// What the plan reserves beside the stores. Measured for a node serving
// 1,700 files (the NASA trace's site) to 32 connections in a memory
// cgroup (docs/benchmarks.md): about 7 MiB of Go runtime at GOGC 25 (a
// 3 MiB live heap), 2 MiB of the binary's pages, and 4 MiB of kernel
// memory (dentries, inodes, sockets) the cgroup charges. A store a MiB
// larger read no less from disk and had the kernel reclaim more of its
// pages (docs/benchmarks.md), so the margin stays.
const (
	// ProcessOverhead is what one process uses beside its stores: the
	// plan gives the stores the rest of the limit.
	ProcessOverhead = 10 << 20
	// NodeOverhead is what each further node of one process adds.
	NodeOverhead = 2 << 20
	// GoHeadroom is the least the Go runtime's soft limit allows above
	// the process's expected use where the budget has room for it. The
	// runtime counts more than its live heap against the limit (free and
	// unused spans, GC metadata, stacks: about 7 MiB beside a 4 MiB heap),
	// so a limit near the expected use has the collector run back to back
	// (measured: 515 collections in 5 s and twice the CPU per request at
	// 12 MiB).
	GoHeadroom = 2 << 20
	// InlineShare bounds each arena to this share of its store: the rest
	// of the store's bodies stay in the page cache, which the kernel can
	// reclaim, so the Go runtime's limit may take what the arenas leave.
	InlineShare = 2
	// KernelReserve is the kernel memory the cgroup charges, which the
	// arena (anonymous memory, never reclaimed) must leave room for.
	KernelReserve = 4 << 20
	// GCPercent is the collector's target the plan sets (GOGC): the heap
	// grows 25 % over the live heap between collections instead of 100 %,
	// which keeps 3 MiB more for the stores; a hit allocates nothing, so
	// collections stay rare (under 1 % of a node's CPU, measured).
	GCPercent = 25
	// MinStore is the smallest memory tier a plan gives a node.
	MinStore = 1 << 20
	// NoInline is Plan.Inline for a budget too small for an arena: below
	// what the Go runtime uses at ease (ProcessOverhead and GoHeadroom) an
	// arena's anonymous memory only takes what the runtime needs, while
	// bodies in the page cache are reclaimed under pressure (at 8 MiB nodes
	// with a 1 MiB arena were killed on the NASA trace, without one they
	// lived: docs/benchmarks.md "Smaller budgets").
	NoInline = -1
	// MinLimit is the smallest budget a node process was measured to live
	// in under load (the NASA trace's site through 32 connections: it lives
	// at 8 MiB, slowed by its collector, and is killed at 7 and 6, where
	// nginx serves): below it the process's own resident memory (the Go
	// runtime and every package the binary links), about 4 MiB at rest,
	// leaves the heap no room (docs/benchmarks.md "Smaller budgets"). A
	// plan below it is Short.
	MinLimit = 8 << 20
)

// Plan is how a process's memory budget is split between its nodes'
// stores and the Go runtime; the node reports it in its status and
// startup log.
type Plan struct {
	// Limit is the memory the process may use, 0 when none is known (no
	// cgroup limit and no --memory): the stores then take their defaults.
	Limit int64 `json:"limit_bytes"`
	// Source says where Limit came from: a cgroup's file, "--memory", or
	// "" when there is none.
	Source string `json:"source,omitempty"`
	// Nodes is the number of nodes sharing the process.
	Nodes int `json:"nodes"`
	// Store is each node's memory tier (0: the store's default), and
	// Inline the most of it each node's arena may take (NoInline: no
	// arena): the arena is anonymous memory the kernel cannot reclaim, so
	// the arenas and the Go runtime at its limit must fit the limit with
	// KernelReserve to spare, while page cache beyond that is only
	// reclaimed.
	Store  int64 `json:"store_bytes"`
	Inline int64 `json:"inline_bytes"`
	// GoLimit is the Go runtime's soft memory limit the plan sets
	// (debug.SetMemoryLimit), 0 when left alone (no limit, or GOMEMLIMIT
	// set in the environment, which wins); GCPercent the collector's
	// target (debug.SetGCPercent), 0 when left alone (GOGC set).
	GoLimit   int64 `json:"go_limit_bytes"`
	GCPercent int   `json:"gc_percent"`
}

// PlanMemory splits limit bytes between nodes nodes: each one's store gets
// an equal share of what is left after ProcessOverhead and NodeOverhead
// per further node (at least MinStore), each arena half of its store at
// most (InlineShare; none below ProcessOverhead and GoHeadroom: NoInline),
// and the Go runtime's soft limit what the arenas and KernelReserve leave,
// so that anonymous memory (arenas and Go) always fits the limit while the
// stores' page cache may be reclaimed; the runtime uses about
// ProcessOverhead of it. Where that is less than the runtime uses at ease
// (ProcessOverhead and GoHeadroom) it gets that much, but never more than
// the limit itself: a soft limit above the cgroup's hard
// one only lets the heap grow until the kernel kills the process (at 8 MiB
// a Go limit of 12 MiB got a node killed under load where nginx served;
// capped at 8 and without an arena it lives, slowed by its collector:
// docs/benchmarks.md "Smaller budgets"). limit 0 plans nothing.
func PlanMemory(limit int64, source string, nodes int) Plan {
	nodes = max(nodes, 1)
	p := Plan{Limit: limit, Source: source, Nodes: nodes}
	if limit <= 0 {
		return p
	}
	n := int64(nodes)
	use := int64(ProcessOverhead + NodeOverhead*(nodes-1))
	p.Store = max(limit-use, MinStore*n) / n
	p.Inline = max(p.Store/InlineShare, MinStore)
	if limit < use+GoHeadroom {
		p.Inline = NoInline
	}
	p.GoLimit = min(max(limit-max(p.Inline, 0)*n-KernelReserve, use+GoHeadroom), limit)
	p.GCPercent = GCPercent
	return p
}

// Least is the smallest limit p's nodes were measured to live in under
// load: MinLimit, and NodeOverhead for each further node.
func (p Plan) Least() int64 { return MinLimit + NodeOverhead*int64(max(p.Nodes, 1)-1) }

// Short reports whether p's limit is below Least, so that the process may
// be killed: the node says so at start.
func (p Plan) Short() bool { return p.Limit > 0 && p.Limit < p.Least() }

// WithStore is p with each node's store set by hand (--cache-mb) to
// bytes; the Go runtime's limit stays, and the arena may take the store
// when nothing was planned.
func (p Plan) WithStore(bytes int64) Plan {
	p.Store = bytes
	if p.Limit <= 0 {
		p.Inline = 0
	}
	return p
}

// CgroupLimit returns the memory limit of the cgroup this process is in,
// the smallest of its own and its ancestors' (cgroup v2 memory.max and
// memory.high; v1 memory.limit_in_bytes, or the hierarchical limit from
// memory.stat), and the file it came from; 0 and "" when there is none.
func CgroupLimit() (int64, string, error) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, "", fmt.Errorf("store: %w", err)
	}
	mounts, err := cgroupMounts("/proc/self/mountinfo")
	if err != nil {
		return 0, "", err
	}
	v1, v2 := cgroupPaths(string(cg))
	if dir, ok := mounts["memory"]; ok && v1 != "" {
		if n, src := limitV1(filepath.Join(dir, v1)); n > 0 {
			return n, src, nil
		}
	}
	if dir, ok := mounts["cgroup2"]; ok && v2 != "" {
		if n, src := limitV2(dir, v2); n > 0 {
			return n, src, nil
		}
	}
	return 0, "", nil
}

// cgroupPaths finds this process's v1 memory cgroup and its v2 cgroup in
// /proc/self/cgroup.
func cgroupPaths(s string) (v1, v2 string) {
	for line := range strings.Lines(s) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2 = f[2]
		}
		for c := range strings.SplitSeq(f[1], ",") {
			if c == "memory" {
				v1 = f[2]
			}
		}
	}
	return v1, v2
}

// cgroupMounts maps "cgroup2" and the v1 controller "memory" to where they
// are mounted, from mountinfo.
func cgroupMounts(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fs, pf := strings.Fields(post), strings.Fields(pre)
		if !ok || len(fs) < 3 || len(pf) < 5 {
			continue
		}
		switch fs[0] {
		case "cgroup2":
			m["cgroup2"] = pf[4]
		case "cgroup":
			for o := range strings.SplitSeq(fs[2], ",") {
				if o == "memory" {
					m["memory"] = pf[4]
				}
			}
		}
	}
	return m, sc.Err()
}

// noLimit is what a cgroup v1 file holds for "no limit" (about 2^63,
// rounded down to a page).
const noLimit = 1 << 62

// limitV1 reads a v1 memory cgroup's effective limit.
func limitV1(dir string) (int64, string) {
	best, src := int64(0), ""
	if n, err := readBytes(filepath.Join(dir, "memory.limit_in_bytes")); err == nil && n > 0 && n < noLimit {
		best, src = n, filepath.Join(dir, "memory.limit_in_bytes")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "memory.stat")); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "hierarchical_memory_limit "); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 && n < noLimit && (best == 0 || n < best) {
					best, src = n, filepath.Join(dir, "memory.stat")
				}
			}
		}
	}
	return best, src
}

// limitV2 reads the smallest memory.max or memory.high from the cgroup up
// to the mount's root.
func limitV2(mount, cg string) (int64, string) {
	best, src := int64(0), ""
	for dir := filepath.Join(mount, cg); ; dir = filepath.Dir(dir) {
		for _, name := range []string{"memory.max", "memory.high"} {
			n, err := readBytes(filepath.Join(dir, name))
			if err == nil && n > 0 && (best == 0 || n < best) {
				best, src = n, filepath.Join(dir, name)
			}
		}
		if len(dir) <= len(mount) || dir == "/" {
			return best, src
		}
	}
}

// readBytes reads a cgroup file holding a byte count; "max" is 0.
func readBytes(file string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("store: " + file + ": not a byte count")
	}
	return n, nil
}
