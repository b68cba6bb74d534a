package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
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
// the Go runtime's limit from the cgroup's limit (store.PlanMemory: 48 MiB
// less 10 MiB of the process's own; the arena at most half of that, and Go
// limited to what the arena and 4 MiB of kernel memory leave: 48-19-4), and
// says so in its status.
func TestNodeSizesFromCgroup(t *testing.T) {
	procs := memCgroup(t, 48<<20)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o644)
	addr := freeAddr(t)
	cmd := inCgroup(procs, "node", "--root", root, "--listen", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var st struct {
		Memory struct {
			Plan struct {
				Limit   int64  `json:"limit_bytes"`
				Source  string `json:"source"`
				Store   int64  `json:"store_bytes"`
				GoLimit int64  `json:"go_limit_bytes"`
			} `json:"plan"`
			GoLimit int64 `json:"go_limit_bytes"`
			Store   struct {
				Capacity int64 `json:"memory_capacity"`
			} `json:"store"`
		} `json:"memory"`
	}
	var err error
	for range 100 {
		var resp *http.Response
		if resp, err = http.Get("http://" + addr + "/.shoal/status"); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	m := st.Memory
	if m.Plan.Limit != 48<<20 || !strings.HasPrefix(m.Plan.Source, "/sys/fs/cgroup") || m.Plan.Store != 38<<20 ||
		m.Store.Capacity != 38<<20 || m.Plan.GoLimit != 25<<20 || m.GoLimit != 25<<20 {
		t.Errorf("memory status %+v; want a 48 MiB limit from the cgroup, a 38 MiB store and a 25 MiB Go limit in force", m)
	}
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

// A node in a small memory cgroup (8 MiB, where nginx serves the stack
// set-up's trace) lives through 32 connections of load: the plan caps the Go
// runtime's limit at the cgroup's (8 MiB) and the node collects more often
// instead of growing. With the runtime's limit at 12 MiB, above the
// cgroup's, the kernel killed it.
func TestNodeLivesInSmallCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a node in a memory cgroup; skipped with -short")
	}
	procs := memCgroup(t, 8<<20)
	root := t.TempDir()
	const files = 400
	sizes := make([]int, files)
	for i := range files {
		sizes[i] = 2<<10 + i*97%60<<10 // 2–62 KiB, 12 MiB in all
		body := strings.Repeat(string(rune('a'+i%26)), sizes[i])
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	cmd := inCgroup(procs, "node", "--root", root, "--listen", addr, "--log-level", "warn")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: 20 * time.Second}
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := client.Get("http://" + addr + "/f0.txt"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("the node did not answer within 30 s")
		}
	}
	const conns, each = 32, 150
	errs := make(chan error, conns)
	for c := range conns {
		go func() {
			for k := range each {
				i := (c*each + k*7) % files
				resp, err := client.Get(fmt.Sprintf("http://%s/f%d.txt", addr, i))
				if err != nil {
					errs <- err
					return
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || n != int64(sizes[i]) {
					errs <- fmt.Errorf("f%d.txt: %d, %d of %d bytes, %v", i, resp.StatusCode, n, sizes[i], err)
					return
				}
			}
			errs <- nil
		}()
	}
	failed := 0
	var first error
	for range conns {
		if err := <-errs; err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the node in an 8 MiB cgroup ended under load (%v); %d of %d connections failed, the first: %v",
			err, failed, conns, first)
	default:
	}
	if failed > 0 {
		t.Errorf("%d of %d connections failed, the first: %v", failed, conns, first)
	}
}
