package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
		cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "up", "--site", site, "--nodes", "1", "--admin", "off",
			"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--shutdown-timeout", tc.timeout)
		cmd.Env = append(os.Environ(), "SHOAL_AS_MAIN=1")
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
