package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// Many distinct URLs through a PoP cost it its memory budget and little
// more: 200,000 URLs of a 50-byte response fetched through `shoal pop
// --origin` with one node and 64 MiB of memory cache grow the PoP's
// resident memory by at most the budget plus 32 MiB (the stored entries'
// index and the PoP's record of its copies are off the Go heap, and the
// front remembers as many URLs as the memory holds objects). Every URL is
// stored: the first ones are still answered from the disk tier at the
// end.
func TestPopMemoryManyURLs(t *testing.T) {
	if testing.Short() || testutil.RaceEnabled {
		t.Skip("fetches 200,000 URLs through a PoP and measures its memory (not with -short or -race)")
	}
	const (
		urls    = 200_000
		cacheMB = 64
		slackMB = 32
		workers = 16
	)
	body := strings.Repeat("x", 50)
	var originHits atomic.Int64
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/warm/") {
			w.Header().Set("Cache-Control", "no-store")
		} else {
			originHits.Add(1)
			w.Header().Set("Cache-Control", "max-age=3600")
		}
		io.WriteString(w, body)
	}))
	defer o.Close()
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	os.WriteFile(seed, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	listen := freeAddr(t)
	pop := startMain(t, os.Stderr, "pop", "--name", "m1", "--seed-file", seed, "--listen", listen, "--peer", freeAddr(t),
		"--admin", "off", "--origin", o.URL, "--data", filepath.Join(dir, "data"), "--nodes", "1",
		"--cache-mb", strconv.Itoa(cacheMB), "--log-level", "warn")
	waitListening(t, listen)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: 30 * time.Second}
	get := func(path string) (string, error) {
		resp, err := client.Get("http://" + listen + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && (resp.StatusCode != 200 || string(b) != body) {
			err = fmt.Errorf("%s: %d %q", path, resp.StatusCode, b)
		}
		return resp.Header.Get("X-Cache"), err
	}
	// Warm up, storing nothing: connections, buffers and the collector's
	// first cycles.
	fetch(t, workers, 2000, func(i int) error { _, err := get(fmt.Sprintf("/warm/%d", i)); return err })
	time.Sleep(time.Second)
	before, err := rss(pop.Process.Pid)
	if err != nil {
		t.Skipf("resident memory unknown: %v", err)
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if r, err := rss(pop.Process.Pid); err == nil && r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	fetch(t, workers, urls, func(i int) error { _, err := get(fmt.Sprintf("/objects/%d?v=%d", i, i%7)); return err })
	elapsed := time.Since(start)
	time.Sleep(2 * time.Second) // what the last requests left settles
	close(stop)
	sampler.Wait()
	after, err := rss(pop.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	growth := max(peak.Load(), after) - before
	t.Logf("%d URLs in %v: resident memory %.1f MiB before, %.1f MiB after, peak %.1f: grew %.1f MiB (budget %d + %d MiB)",
		urls, elapsed.Round(time.Second), mib(before), mib(after), mib(peak.Load()), mib(growth), cacheMB, slackMB)
	if growth > (cacheMB+slackMB)<<20 {
		t.Errorf("resident memory grew %.1f MiB for %d URLs, want at most %d MiB", mib(growth), urls, cacheMB+slackMB)
	}
	if n := originHits.Load(); n < urls {
		t.Errorf("the origin saw %d requests for %d URLs", n, urls)
	}
	// The first URLs left the memory tier long ago: the disk tier answers.
	for _, i := range []int{0, 1, urls / 2} {
		if xc, err := get(fmt.Sprintf("/objects/%d?v=%d", i, i%7)); err != nil || xc != "HIT" {
			t.Errorf("URL %d again: X-Cache %q, %v", i, xc, err)
		}
	}
}

// fetch runs f(0..n-1) on workers goroutines, failing the test at the
// first error.
func fetch(t *testing.T, workers, n int, f func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					failed.Store(true)
					t.Errorf("request %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		t.FailNow()
	}
}

// rss is a process's resident memory (VmRSS) in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
