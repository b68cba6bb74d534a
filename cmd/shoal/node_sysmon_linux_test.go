//go:build linux

package main

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/base/sysmon"
	"shoal/internal/testutil"
)

// TestNodeSysmonIdle: `shoal node` moves the Go runtime's monitor thread to
// SCHED_IDLE by default (the thread it names is in that class), and leaves
// it alone with --sysmon-idle=false.
func TestNodeSysmonIdle(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(root+"/a.txt", []byte("a\n"), 0o644)
	line := regexp.MustCompile(`sysmon thread at SCHED_IDLE.* tid=(\d+)`)
	for _, on := range []bool{true, false} {
		var stderr testutil.SyncBuf
		startMain(t, &stderr, "node", "--root", root, "--listen", freeAddr(t), "--log-level", "debug",
			"--sysmon-idle="+strconv.FormatBool(on))
		deadline := time.Now().Add(10 * time.Second)
		for !regexp.MustCompile(`node serving`).MatchString(stderr.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("--sysmon-idle=%v: the node did not start:\n%s", on, stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		m := line.FindStringSubmatch(stderr.String())
		if !on {
			if m != nil {
				t.Errorf("--sysmon-idle=false moved a thread:\n%s", stderr.String())
			}
			continue
		}
		if m == nil {
			t.Fatalf("no sysmon line:\n%s", stderr.String())
		}
		tid, _ := strconv.Atoi(m[1])
		if p, err := sysmon.Policy(tid); err != nil || p != unix.SCHED_IDLE {
			t.Errorf("thread %d: policy %d (%v), want SCHED_IDLE", tid, p, err)
		}
	}
}
