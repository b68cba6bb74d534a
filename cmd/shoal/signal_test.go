package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildShoal builds this command into a fresh t.TempDir() (removed with
// the test, binary included) and returns the binary's path.
func buildShoal(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "shoal")
	out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// helloSite writes a site of one file, a.txt, and returns its directory
// and the file's body.
func helloSite(t *testing.T) (site, body string) {
	t.Helper()
	site, body = t.TempDir(), "hello, shoal\n"
	if err := os.WriteFile(filepath.Join(site, "a.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return site, body
}

// child is a shoal process under test whose output lines are read as they
// come.
type child struct {
	cmd   *exec.Cmd
	lines chan string   // stdout and stderr lines
	exit  chan struct{} // closed when the process has exited
	err   error         // its Wait error, valid after exit

	mu  sync.Mutex
	all []string // every line so far, for checks after the fact
}

// output returns every line the process printed so far.
func (c *child) output() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

// startChild runs exe with args; t.Cleanup kills it if the test did not
// stop it.
func startChild(t *testing.T, exe string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(exe, args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	c := &child{cmd: cmd, lines: make(chan string, 1024), exit: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			c.mu.Lock()
			c.all = append(c.all, sc.Text())
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default: // nobody is waiting for more lines
			}
		}
		pr.Close()
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.exit)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.exit
	})
	return c
}

// waitLine returns the first line containing want, failing the test if the
// process exits first or 20 s pass.
func (c *child) waitLine(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if strings.Contains(l, want) {
				return l
			}
		case <-c.exit:
			t.Fatalf("%s exited (%v) before printing %q", c.cmd.Args[1], c.err, want)
		case <-timeout:
			t.Fatalf("%s: no line with %q after 20 s", c.cmd.Args[1], want)
		}
	}
}

// field returns the value of key=value in a slog text line.
func field(line, key string) string {
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// getBody fetches url and returns its body, failing the test on any error.
func getBody(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// stop sends SIGTERM and expects a clean exit within 20 s.
func (c *child) stop(t *testing.T) {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exit:
		if c.err != nil {
			t.Errorf("exit after SIGTERM: %v", c.err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("no exit 20 s after SIGTERM")
	}
}

// hangupSurvives sends SIGHUP to c, waits for it to log the signal, checks url is still served, then stops c with SIGTERM and
// expects a clean exit.
func hangupSurvives(t *testing.T, c *child, url, body string) {
	t.Helper()
	if got := getBody(t, url); got != body {
		t.Fatalf("before SIGHUP: body %q, want %q", got, body)
	}
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.waitLine(t, "SIGHUP")
	if got := getBody(t, url); got != body {
		t.Fatalf("after SIGHUP: body %q, want %q", got, body)
	}
	c.stop(t)
}

// TestHangupIgnored sends SIGHUP to real `shoal node`, `shoal front` and
// `shoal up` processes: each must log it and keep serving (SIGHUP
// must not be fatal, as Go's default makes it; it reloads).
func TestHangupIgnored(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	exe := buildShoal(t)
	site, body := helloSite(t)
	startNode := func(t *testing.T) (*child, string) {
		n := startChild(t, exe, "node", "--root", site, "--listen", "127.0.0.1:0")
		return n, "http://" + field(n.waitLine(t, "node serving"), "addr")
	}
	t.Run("node", func(t *testing.T) {
		n, u := startNode(t)
		hangupSurvives(t, n, u+"/a.txt", body)
	})
	t.Run("front", func(t *testing.T) {
		_, nu := startNode(t)
		f := startChild(t, exe, "front", "--nodes", nu, "--listen", "127.0.0.1:0")
		u := "http://" + field(f.waitLine(t, "msg=serving"), "addr")
		hangupSurvives(t, f, u+"/a.txt", body)
	})
	t.Run("up", func(t *testing.T) {
		c := startChild(t, exe, "up", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--admin", "off", "--nodes", "1", "--site", site)
		l := c.waitLine(t, "shoal is up: open ")
		u := strings.TrimSpace(l[strings.Index(l, "http://"):])
		hangupSurvives(t, c, u+"a.txt", body)
	})
}
