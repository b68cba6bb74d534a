package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// memCgroup makes a memory cgroup limited to limit bytes (v2 when the
// unified hierarchy has the memory controller, else v1) and returns its
// cgroup.procs file; the test is skipped without root or a memory
// controller to use.
func memCgroup(t *testing.T, limit int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a memory cgroup")
	}
	name := fmt.Sprintf("shoal-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	var dir, limitFile string
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(b), "memory") {
		dir, limitFile = filepath.Join("/sys/fs/cgroup", name), "memory.max"
	} else if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.procs"); err == nil {
		dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes"
	} else {
		t.Skip("no memory cgroup controller (v2 unified or v1 /sys/fs/cgroup/memory)")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.Remove(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(fmt.Sprint(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "cgroup.procs")
}

// inCgroup is asMain run by a shell that first moves itself into the
// cgroup whose procs file is given, so the command starts inside it.
func inCgroup(procs string, args ...string) *exec.Cmd {
	main := asMain(args...)
	cmd := exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, procs}, main.Args...)...)
	cmd.Env = main.Env
	return cmd
}

// A node started in a memory cgroup with no memory flag sizes its store and
// the Go runtime's limit from the cgroup's limit (store.PlanMemory), says so
// in its status, and holds small bodies in its arena only where the budget
// has room for one. 48 MiB: less 10 MiB of the process's own, a 38 MiB store;
// the arena at most half of it, and Go limited to what the arena and 4 MiB of
// kernel memory leave (48-19-4). 10 MiB: below what the runtime uses at ease,
// so the smallest store, no arena (a small file is served from the page
// cache), and Go limited to the budget itself.
func TestNodeSizesFromCgroup(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		limit, store, goLimit int64
		arena                 bool
	}{
		{48 * mib, 38 * mib, 25 * mib, true},
		{10 * mib, 1 * mib, 10 * mib, false},
	} {
		t.Run(fmt.Sprintf("%dMiB", c.limit/mib), func(t *testing.T) {
			m := nodeMemoryInCgroup(t, c.limit)
			if m.Plan.Limit != c.limit || !strings.HasPrefix(m.Plan.Source, "/sys/fs/cgroup") || m.Plan.Store != c.store ||
				m.Store.Capacity != c.store || m.Plan.GoLimit != c.goLimit || m.GoLimit != c.goLimit {
				t.Errorf("memory status %+v; want a %d MiB limit from the cgroup, a %d MiB store and a %d MiB Go limit in force",
					m, c.limit/mib, c.store/mib, c.goLimit/mib)
			}
			if m.Store.Objects != 1 || (m.Store.Inline > 0) != c.arena || (m.Plan.Inline > 0) != c.arena {
				t.Errorf("after two requests for a small file: %d objects in memory, %d bytes of arena (plan %d); want 1 object, arena %v",
					m.Store.Objects, m.Store.Inline, m.Plan.Inline, c.arena)
			}
		})
	}
}

// nodeMemory is the memory part of a node's /.shoal/status.
type nodeMemory struct {
	Plan struct {
		Limit   int64  `json:"limit_bytes"`
		Source  string `json:"source"`
		Store   int64  `json:"store_bytes"`
		Inline  int64  `json:"inline_bytes"`
		GoLimit int64  `json:"go_limit_bytes"`
	} `json:"plan"`
	GoLimit int64 `json:"go_limit_bytes"`
	Store   struct {
		Capacity int64 `json:"memory_capacity"`
		Objects  int   `json:"memory_objects"`
		Inline   int64 `json:"inline_bytes"`
	} `json:"store"`
}

// nodeMemoryInCgroup starts a node with no memory flag in a memory cgroup of
// limit bytes, asks it twice for a small file and returns its memory status.
func nodeMemoryInCgroup(t *testing.T, limit int64) nodeMemory {
	procs := memCgroup(t, limit)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o644)
	addr := freeAddr(t)
	cmd := inCgroup(procs, "node", "--root", root, "--listen", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var st struct {
		Memory nodeMemory `json:"memory"`
	}
	var err error
	for range 100 {
		var resp *http.Response
		if resp, err = http.Get("http://" + addr + "/a.txt"); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/a.txt") // the second request
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp, err = http.Get("http://" + addr + "/.shoal/status"); err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Memory
}

// `shoal up` in a memory cgroup splits its limit between its nodes' caches
// (144 MiB less 10 MiB for the process and 2 MiB for each further node, over
// 4 nodes: 32 MiB each) and prints the plan.
func TestUpSizesFromCgroup(t *testing.T) {
	procs := memCgroup(t, 144<<20)
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	os.MkdirAll(site, 0o755)
	os.WriteFile(filepath.Join(site, "index.html"), []byte("<h1>hi</h1>\n"), 0o644)
	cmd := inCgroup(procs, "up", "--site", site, "--data", filepath.Join(dir, "data"), "--listen", freeAddr(t), "--admin", "off")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(lines) < 3 {
		lines = append(lines, sc.Text())
	}
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "4 nodes") || !strings.Contains(all, "32 MiB gdsf cache per node") ||
		!strings.Contains(all, "memory: 144 MiB from /sys/fs/cgroup") || !strings.Contains(all, "Go runtime's limit of 76 MiB") {
		t.Errorf("shoal up printed:\n%s\nwant 4 nodes of 32 MiB from a 144 MiB cgroup limit, Go limited to 76 MiB", all)
	}
}
