//go:build linux

package up

import (
	"bufio"
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
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// childNofileEnv makes TestUpChildLowNofile run a cluster under that
// RLIMIT_NOFILE (it is the helper process of the test below).
const childNofileEnv = "SHOAL_UP_TEST_NOFILE"

// Thousands of idle keep-alive connections once used up
// `up`'s descriptors, so normal clients timed out and the admin API failed
// with "accept4: too many open files". Here a cluster runs in a child
// process under a 256-descriptor limit, one address opens 400 keep-alive
// connections, and a client from another address and the admin API must
// still be served.
func TestAdminAndClientsServedAtDescriptorLimit(t *testing.T) {
	site := t.TempDir()
	if err := os.WriteFile(filepath.Join(site, "index.html"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUpChildLowNofile$")
	cmd.Env = append(os.Environ(), childNofileEnv+"=256", "SHOAL_UP_TEST_SITE="+site)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		testutil.WaitOrKill(cmd, 10*time.Second)
	}()
	var frontURL, adminURL string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "URL" {
			frontURL, adminURL = f[1], f[3]
			break
		}
	}
	if frontURL == "" {
		t.Fatal("child cluster did not start")
	}
	go io.Copy(io.Discard, stdout)
	addr := strings.TrimSuffix(strings.TrimPrefix(frontURL, "http://"), "/")

	const attack = 400
	var wg sync.WaitGroup
	conns := make([]net.Conn, attack)
	for i := range attack {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				return
			}
			conns[i] = c
			c.SetDeadline(time.Now().Add(3 * time.Second))
			io.WriteString(c, "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				io.Copy(io.Discard, resp.Body)
			}
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // idle keep-alive connections, not just answered ones
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()

	normal := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	for _, u := range []string{frontURL + "index.html", adminURL + "/nodes"} {
		resp, err := normal.Get(u)
		if err != nil {
			t.Errorf("GET %s with %d keep-alive connections open: %v", u, attack, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s with %d keep-alive connections open: status %d", u, attack, resp.StatusCode)
		}
	}
}

// TestUpChildLowNofile is the helper process of
// TestAdminAndClientsServedAtDescriptorLimit: it lowers its descriptor
// limit, starts a cluster, prints its URLs and runs until stdin closes.
func TestUpChildLowNofile(t *testing.T) {
	v := os.Getenv(childNofileEnv)
	if v == "" {
		t.Skip("helper process of TestAdminAndClientsServedAtDescriptorLimit")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	cl, err := Start(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", Nodes: 2,
		Site: os.Getenv("SHOAL_UP_TEST_SITE"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fmt.Printf("URL %s ADMIN %s\n", cl.URL, cl.AdminURL)
	io.Copy(io.Discard, os.Stdin)
}
