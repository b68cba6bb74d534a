package deploy

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/config"
)

// unitService returns the [Service] keys of a unit file (the last value
// of a key given twice).
func unitService(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	section := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = l
		case section == "[Service]":
			if k, v, ok := strings.Cut(l, "="); ok {
				keys[k] = v
			}
		}
	}
	return keys
}

// TestUnitsStopAndReload: every unit gives a stopping process longer than
// shutdown_timeout's default before systemd kills it (the units once cut
// after 15 s while shoal waited 30), and `systemctl reload` sends SIGHUP.
func TestUnitsStopAndReload(t *testing.T) {
	units, _ := filepath.Glob("*.service")
	if len(units) < 4 {
		t.Fatalf("found %d units in deploy/, want the four of docs/deploy.md", len(units))
	}
	for _, u := range units {
		keys := unitService(t, u)
		stop, err := time.ParseDuration(keys["TimeoutStopSec"])
		if err != nil {
			t.Errorf("%s: TimeoutStopSec %q: %v", u, keys["TimeoutStopSec"], err)
		} else if stop <= config.DefaultShutdownTimeout {
			t.Errorf("%s: TimeoutStopSec=%v, want more than shutdown_timeout's %v so requests in flight can finish",
				u, stop, config.DefaultShutdownTimeout)
		}
		if got := keys["ExecReload"]; got != "/bin/kill -HUP $MAINPID" {
			t.Errorf("%s: ExecReload=%q, want /bin/kill -HUP $MAINPID", u, got)
		}
	}
}

// TestLogrotateExample runs deploy/logrotate.conf with the real logrotate
// against a running `shoal node` that logs under a temporary folder: the
// file's path and the postrotate command are the only substitutions
// (systemctl standing for `kill -USR1 PID`). The lines from before the
// rotation must be in the rotated file, the ones after in a new file, and
// the node must go on serving.
func TestLogrotateExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	lr, err := exec.LookPath("logrotate")
	if err != nil {
		t.Skip("logrotate not installed (apt install logrotate)")
	}
	dir := t.TempDir()
	site := filepath.Join(dir, "www")
	os.Mkdir(site, 0o755)
	os.WriteFile(filepath.Join(site, "index.html"), []byte("hi\n"), 0o644)
	logs := filepath.Join(dir, "log")
	os.Mkdir(logs, 0o755)
	log := filepath.Join(logs, "node-1.log")

	node := exec.Command(shoalBin(t), "node", "--root", site, "--listen", "127.0.0.1:0", "--access-log", log)
	stderr, _ := node.StderrPipe()
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Process.Kill(); node.Wait() })
	addr := ""
	sc := bufio.NewScanner(stderr)
	for addr == "" && sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if v, ok := strings.CutPrefix(f, "addr="); ok && strings.Contains(sc.Text(), "node serving") {
				addr = v
			}
		}
	}
	if addr == "" {
		t.Fatal("the node did not say where it serves")
	}
	go io.Copy(io.Discard, stderr)
	get := func() {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/index.html")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET: %d", resp.StatusCode)
		}
	}

	conf, err := os.ReadFile("logrotate.conf")
	if err != nil {
		t.Fatal(err)
	}
	c := string(conf)
	for _, sub := range [][2]string{
		{"/var/log/shoal/", logs + "/"},
		{"systemctl kill --signal=USR1 --kill-who=main 'shoal-*.service'", "kill -USR1 " + strconv.Itoa(node.Process.Pid)},
	} {
		if !strings.Contains(c, sub[0]) {
			t.Fatalf("deploy/logrotate.conf lacks %q: update this test with it", sub[0])
		}
		c = strings.ReplaceAll(c, sub[0], sub[1])
	}
	confPath := filepath.Join(dir, "shoal.logrotate")
	if err := os.WriteFile(confPath, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}

	get()
	get()
	waitLines(t, log, 2)
	out, err := exec.Command(lr, "--force", "--state", filepath.Join(dir, "state"), confPath).CombinedOutput()
	if err != nil {
		t.Fatalf("logrotate: %v\n%s", err, out)
	}
	// The node reopens its log when it handles SIGUSR1, which logrotate
	// sends without waiting: a request until then is still written to the
	// rotated file. So ask until one reaches the new file; every request
	// must be logged exactly once, the first two in the rotated file.
	sent := 2
	for deadline := time.Now().Add(5 * time.Second); countLines(log) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no request reached %s after logrotate's SIGUSR1", filepath.Base(log))
		}
		get()
		sent++
	}
	waitLines(t, log+".1", sent-countLines(log))
	if old := countLines(log + ".1"); old < 2 {
		t.Errorf("%s holds %d lines, want the 2 logged before the rotation", filepath.Base(log)+".1", old)
	}
}

// countLines is the number of lines in the file at path (0 if absent).
func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// waitLines waits up to 5 s (a node flushes its log every second) for the
// file at path to hold exactly n lines.
func waitLines(t *testing.T, path string, n int) {
	t.Helper()
	var got int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if got = strings.Count(string(b), "\n"); got == n {
			return
		}
	}
	t.Fatalf("%s holds %d lines, want %d", filepath.Base(path), got, n)
}
