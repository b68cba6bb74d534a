package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// TestShutdownLetsDownloadsFinish stops `shoal up` with SIGTERM one second
// into a 50 MB download read at about 10 MB/s: with --shutdown-timeout 30s
// the download completes and the command exits 0; with 1s it is cut. (The
// timeout was a hard-coded 4 s, which cut such a download.)
func TestShutdownLetsDownloadsFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5 s download")
	}
	site := t.TempDir()
	const size = 50 << 20
	f, err := os.Create(filepath.Join(site, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	f.Close()
	for _, tc := range []struct {
		timeout  string
		complete bool
	}{{"30s", true}, {"1s", false}} {
		cmd := asMain("up", "--data", t.TempDir(), "--site", site, "--nodes", "1", "--admin", "off",
			"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--shutdown-timeout", tc.timeout)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.Contains(line, "open http://") {
			cmd.Process.Kill()
			t.Fatalf("shoal up said %q (%v)", line, err)
		}
		url := strings.TrimSpace(line[strings.Index(line, "http://"):])
		go io.Copy(io.Discard, out)
		resp, err := http.Get(url + "big.bin")
		if err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
		time.AfterFunc(time.Second, func() { cmd.Process.Signal(syscall.SIGTERM) })
		var got int64
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			got += int64(n)
			if err != nil {
				break
			}
			time.Sleep(6 * time.Millisecond) // about 10 MB/s
		}
		resp.Body.Close()
		werr := cmd.Wait()
		if tc.complete && (got != size || werr != nil) {
			t.Errorf("--shutdown-timeout %s: got %d of %d bytes, exit %v", tc.timeout, got, size, werr)
		}
		if !tc.complete && got == size {
			t.Errorf("--shutdown-timeout %s: the download was not cut (%d bytes)", tc.timeout, got)
		}
		t.Logf("--shutdown-timeout %s: %d MB of 50 received", tc.timeout, got>>20)
	}
}

// TestUpHUPRepublishes edits the --site folder of a running `shoal up` and
// sends SIGHUP: the edit is then served (it used to kill the process).
func TestUpHUPRepublishes(t *testing.T) {
	site := t.TempDir()
	os.WriteFile(filepath.Join(site, "a.html"), []byte("before"), 0o644)
	cmd := asMain("up", "--data", t.TempDir(), "--site", site, "--nodes", "2", "--admin", "off",
		"--listen", "127.0.0.1:0", "--data", t.TempDir())
	out, _ := cmd.StdoutPipe()
	var stderr testutil.SyncBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, "open http://") {
		t.Fatalf("shoal up said %q (%v)", line, err)
	}
	url := strings.TrimSpace(line[strings.Index(line, "http://"):]) + "a.html"
	go io.Copy(io.Discard, out)
	body := func() string {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := body(); got != "before" {
		t.Fatalf("before: %q", got)
	}
	os.WriteFile(filepath.Join(site, "a.html"), []byte("after, longer"), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	for end := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "site published again"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no republish; stderr:\n%s", stderr.String())
		}
	}
	for range 4 { // every node
		if got := body(); got != "after, longer" {
			t.Fatalf("after SIGHUP: %q", got)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
