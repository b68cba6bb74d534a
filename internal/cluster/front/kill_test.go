package front

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/cluster/node"
	"shoal/internal/testutil"
)

const helperEnv = "SHOAL_FRONT_HELPER_NODE"

// helperBody is what a helper node answers for every path.
var helperBody = testutil.Pattern(16 << 10)

// TestHelperNode is not a test: run as a child process with helperEnv set
// to a site directory, it is a real shoal node (internal/cluster/node) in its own
// process (so that the parent can kill -9 it), serving helperObjects files
// of helperBody and printing its address on stdout.
func TestHelperNode(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestNodeKilledUnderLoad")
	}
	srv, err := node.New(node.Config{Root: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	srv.Serve(ln)
	os.Exit(0)
}

// helperObjects is how many distinct files the helper nodes serve.
const helperObjects = 64

// helperSite writes the helper nodes' site: /obj/0 … /obj/63.
func helperSite(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "obj"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range helperObjects {
		if err := os.WriteFile(filepath.Join(dir, "obj", strconv.Itoa(i)), helperBody, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startHelperNode runs TestHelperNode in a child process and returns it
// with its base URL.
func startHelperNode(t *testing.T, site string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNode$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+site)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.HasPrefix(line, "error") {
		t.Fatalf("helper node: %q %v", line, err)
	}
	return cmd, "http://" + strings.TrimSpace(line)
}

// TestNodeKilledUnderLoad kills one of two node processes with SIGKILL
// while clients loop GETs through the front: no request may fail except
// one whose response was already streaming when the node died. Again
// with batching from the first request and 32 clients, so that requests
// are pipelined on the node connections when the node dies.
func TestNodeKilledUnderLoad(t *testing.T) {
	t.Run("8 clients", func(t *testing.T) { nodeKilledUnderLoad(t, Config{}, 8) })
	t.Run("pipelined", func(t *testing.T) {
		if st := nodeKilledUnderLoad(t, Config{batchMin: 1}, 32); st.HeadsPiped == 0 {
			t.Fatal("no request was pipelined: the test did not exercise pipelining")
		}
	})
}

func nodeKilledUnderLoad(t *testing.T, cfg Config, clients int) Stats {
	total := 4000
	if testing.Short() {
		total = 1000
	}
	site := helperSite(t)
	n1, u1 := startHelperNode(t, site)
	_, u2 := startHelperNode(t, site)
	addr, s, cl := startFront(t, cfg, u1, u2)

	var issued, ok, streaming atomic.Int64
	var mu sync.Mutex
	var failures []string
	killAt := int64(total / 4)
	var killOnce sync.Once
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			defer hc.CloseIdleConnections()
			for {
				i := issued.Add(1)
				if i > int64(total) {
					return
				}
				if i == killAt {
					killOnce.Do(func() { n1.Process.Kill() })
				}
				resp, err := hc.Get(fmt.Sprintf("http://%s/obj/%d", addr, i%helperObjects))
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("request %d: %v", i, err))
					mu.Unlock()
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil && resp.StatusCode == 200:
					streaming.Add(1) // the node died mid-body: allowed
				case resp.StatusCode != 200 || !bytes.Equal(body, helperBody):
					mu.Lock()
					failures = append(failures, fmt.Sprintf("request %d: status %d, %d body bytes, %v", i, resp.StatusCode, len(body), err))
					mu.Unlock()
				default:
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	nodes := cl.Nodes()
	t.Logf("%d ok, %d cut while streaming, %d failed; retries %d, fresh redials %d, pipelined %d; node 0 up=%v failures=%d",
		ok.Load(), streaming.Load(), len(failures), st.Retries, st.FreshRedials, st.HeadsPiped, nodes[0].Up, nodes[0].Failures)
	if len(failures) > 0 {
		t.Fatalf("%d requests failed, first: %s", len(failures), failures[0])
	}
	if nodes[0].Up {
		t.Fatal("killed node still marked up")
	}
	if ok.Load()+streaming.Load() != int64(total) {
		t.Fatalf("%d answered of %d", ok.Load()+streaming.Load(), total)
	}
	return st
}
