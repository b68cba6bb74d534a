//go:build linux

package handoff

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkRepairFrontCPU measures the repair path's cost to the front:
// the front process's CPU time per request (summed over its threads from
// /proc/<pid>/task/*/schedstat, in µs) for relay and repair (with each
// steering backend), 1 KB, 100 KB
// and 1 MB objects, one request per connection and keep-alive, with 16
// concurrent client connections in the lab. The nodes and the kernel's
// forwarding of the clients' ACKs are not counted (they are not the front
// process); the front's interface bytes per request are reported too.
//
//	go test -run '^$' -bench RepairFrontCPU -benchtime 2000x ./internal/cluster/handoff/
func BenchmarkRepairFrontCPU(b *testing.B) {
	for _, pc := range []struct{ name, path, steer string }{
		{"relay", "relay", "nftables"}, {"repair-nft", "repair", "nftables"}, {"repair-bpf", "repair", "bpf"},
	} {
		path := pc.name
		rc := startRepairClusterPath(b, 3, 24, pc.path, "--repair-steer", pc.steer)
		time.Sleep(500 * time.Millisecond)
		c0 := procCPU(b, rc.front.cmd.Process.Pid)
		time.Sleep(time.Second)
		b.Logf("path %s: idle front uses %v CPU per second", path, procCPU(b, rc.front.cmd.Process.Pid)-c0)
		for _, size := range []int{1 << 10, 100 << 10, 1 << 20} {
			man := rc.sizeManifest(b, size)
			for _, mode := range []string{"close", "keepalive"} {
				name := fmt.Sprintf("path=%s/size=%dKB/%s", path, size>>10, mode)
				b.Run(name, func(b *testing.B) {
					pid := rc.front.cmd.Process.Pid
					cpu0 := procCPU(b, pid)
					rx0 := rxBytes(b, rc.lab.FrontNS())
					b.ResetTimer()
					var out strings.Builder
					cl, _ := helper(b, rc.lab.ClientNS(), "fetch", &out, rc.base, "16", strconv.Itoa(b.N), man, mode)
					if err := cl.Wait(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					cpu := procCPU(b, pid) - cpu0
					rx := rxBytes(b, rc.lab.FrontNS()) - rx0
					var r fetchResult
					if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r); err != nil || r.OK != b.N {
						b.Fatalf("client: %q (%v)", out.String(), err)
					}
					b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "front-cpu-µs/req")
					b.ReportMetric(float64(rx)/float64(b.N), "front-rx-B/req")
				})
			}
		}
		rc.stopAll()
	}
}

// sizeManifest writes a manifest of only the files of one size.
func (rc *repairCluster) sizeManifest(b testing.TB, size int) string {
	var sb strings.Builder
	for _, e := range rc.manifest {
		if e.size == size {
			fmt.Fprintf(&sb, "%s %d %s\n", e.path, e.size, e.sum)
		}
	}
	p := filepath.Join(b.TempDir(), "manifest")
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

var schedstatRe = regexp.MustCompile(`^(\d+) `)

// procCPU sums the CPU time of every thread of pid.
func procCPU(b testing.TB, pid int) time.Duration {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("no tasks for pid %d: %v", pid, err)
	}
	var ns int64
	for _, t := range tasks {
		s, err := os.ReadFile(t)
		if err != nil {
			continue // thread exited
		}
		if m := schedstatRe.FindSubmatch(s); m != nil {
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			ns += n
		}
	}
	return time.Duration(ns)
}
