package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childPids lists the children of pid from /proc (every thread's
// children file).
func childPids(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	if err != nil || len(tasks) == 0 {
		t.Skipf("no /proc children lists: %v", err)
	}
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for s := range strings.FieldsSeq(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestUpPassFDNodeKilled checks node restarts on the real command: kill -9
// one node process of `shoal up --path passfd`; up must log the death,
// start the node again (a new child pid) and keep serving, instead of
// shutting the whole cluster down.
func TestUpPassFDNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	exe := buildShoal(t)
	site, body := helloSite(t)
	c := startChild(t, exe, "up", "--data", t.TempDir(), "--path", "passfd", "--listen", "127.0.0.1:0", "--admin", "off", "--nodes", "2", "--site", site)
	l := c.waitLine(t, "shoal is up: open ")
	u := strings.TrimSpace(l[strings.Index(l, "http://"):]) + "a.txt"
	var before []int
	for end := time.Now().Add(10 * time.Second); len(before) != 2; before = childPids(t, c.cmd.Process.Pid) {
		if time.Now().After(end) {
			t.Fatalf("up has children %v, want 2 nodes", before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := getBody(t, u); got != body {
		t.Fatalf("before the kill: %q", got)
	}
	if err := syscall.Kill(before[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.waitLine(t, "child process died")
	c.waitLine(t, "child process restarted")
	after := childPids(t, c.cmd.Process.Pid)
	if len(after) != 2 || slices.Contains(after, before[0]) {
		t.Errorf("children %v after killing %d (before %v): want 2, the killed one replaced", after, before[0], before)
	}
	for range 20 {
		if got := getBody(t, u); got != body {
			t.Fatalf("after the restart: %q", got)
		}
	}
	c.stop(t)
}
