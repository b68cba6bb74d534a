package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rotate is logrotate's step: rename the log, then signal the process. It
// returns the renamed file's path.
func rotate(t *testing.T, c *child, log string, sig syscall.Signal) string {
	t.Helper()
	old := log + ".1"
	if err := os.Rename(log, old); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	c.waitLine(t, signalName(sig)+": access log reopened")
	return old
}

// linesWith waits up to 5 s (logs are flushed every second) for the file
// at path to hold n lines and returns them; it fails the test otherwise.
func linesWith(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(b) == 0 {
			lines = nil
		}
		if len(lines) >= n || time.Now().After(deadline) {
			if len(lines) != n {
				t.Fatalf("%s holds %d lines, want %d:\n%s", filepath.Base(path), len(lines), n, b)
			}
			return lines
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noErrors fails the test for every ERROR line c printed.
func noErrors(t *testing.T, c *child) {
	t.Helper()
	for _, l := range c.output() {
		if strings.Contains(l, "level=ERROR") {
			t.Errorf("logged an error: %s", l)
		}
	}
}

// TestReopenLogs runs real `shoal node`, `shoal front` and `shoal up`
// processes with an access log and rotates it as logrotate does (rename,
// then SIGUSR1): the requests before go to the renamed file, the ones
// after to a new file at the path, and nothing else changes. On `shoal
// up`, SIGUSR1 after a `shoal publish` keeps the published version (SIGHUP
// used to be the only way to reopen the log, and it publishes the site
// folder again); SIGHUP keeps that meaning. A front without --config
// takes SIGHUP without an error.
func TestReopenLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	exe := buildShoal(t)
	site, body := helloSite(t)
	startNode := func(t *testing.T, args ...string) (*child, string) {
		n := startChild(t, exe, append([]string{"node", "--root", site, "--listen", "127.0.0.1:0"}, args...)...)
		return n, "http://" + field(n.waitLine(t, "node serving"), "addr")
	}
	t.Run("node", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "access.log")
		n, u := startNode(t, "--access-log", log)
		getBody(t, u+"/a.txt")
		linesWith(t, log, 1)
		old := rotate(t, n, log, syscall.SIGUSR1)
		getBody(t, u+"/a.txt")
		getBody(t, u+"/a.txt")
		linesWith(t, log, 2)
		linesWith(t, old, 1)
		n.stop(t)
		noErrors(t, n)
	})
	t.Run("front", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "access.log")
		_, nu := startNode(t)
		f := startChild(t, exe, "front", "--nodes", nu, "--listen", "127.0.0.1:0", "--access-log", log)
		u := "http://" + field(f.waitLine(t, "msg=serving"), "addr")
		getBody(t, u+"/a.txt")
		// The line is written just after the answer: wait for it, or it
		// may land in either file.
		linesWith(t, log, 1)
		old := rotate(t, f, log, syscall.SIGUSR1)
		getBody(t, u+"/a.txt")
		getBody(t, u+"/a.txt")
		linesWith(t, log, 2)
		linesWith(t, old, 1)
		// SIGHUP without --config: the log reopened, no error.
		f.cmd.Process.Signal(syscall.SIGHUP)
		f.waitLine(t, "SIGHUP: no --config")
		if got := getBody(t, u+"/a.txt"); got != body {
			t.Errorf("after SIGHUP: %q", got)
		}
		f.stop(t)
		noErrors(t, f)
	})
	t.Run("up", func(t *testing.T) {
		dir := t.TempDir()
		log, next := filepath.Join(dir, "access.log"), filepath.Join(dir, "next")
		os.Mkdir(next, 0o755)
		os.WriteFile(filepath.Join(next, "a.txt"), []byte("published\n"), 0o644)
		c := startChild(t, exe, "up", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
			"--nodes", "2", "--site", site, "--access-log", log)
		l := c.waitLine(t, "shoal is up: open ")
		u := strings.TrimSpace(l[strings.Index(l, "http://"):])
		adminURL := strings.Fields(strings.TrimSpace(c.waitLine(t, "  admin http://")))[1]
		adminURL = strings.TrimSuffix(adminURL, "/nodes")
		tokenLine := c.waitLine(t, "admin token in ")
		token := strings.Fields(tokenLine[strings.Index(tokenLine, "admin token in ")+len("admin token in "):])[0]
		if _, errOut, code := shoal(t, "publish", "--admin", adminURL, "--admin-token-file", token, next); code != 0 {
			t.Fatalf("shoal publish: %d %s", code, errOut)
		}
		if got := getBody(t, u+"a.txt"); got != "published\n" {
			t.Fatalf("after publish: %q", got)
		}
		linesWith(t, log, 1)
		old := rotate(t, c, log, syscall.SIGUSR1)
		if got := getBody(t, u+"a.txt"); got != "published\n" {
			t.Errorf("after SIGUSR1 the published version is gone: %q", got)
		}
		linesWith(t, log, 1)
		linesWith(t, old, 1)
		// SIGHUP still publishes the site folder again.
		c.cmd.Process.Signal(syscall.SIGHUP)
		c.waitLine(t, "SIGHUP: site published again")
		if got := getBody(t, u+"a.txt"); got != body {
			t.Errorf("after SIGHUP: %q, want the site folder's %q", got, body)
		}
		c.stop(t)
		noErrors(t, c)
	})
}
