package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestUpIdleFloodUnderNofile: `shoal up` under a descriptor limit of
// 1,024 (prlimit) takes 1,100 idle keep-alive connections on its front
// and 1,100 on its admin API, from other addresses; its operator on
// 127.0.0.1 must still read the admin API and fetch through the front.
// Without bounds on the admin listener its connections took every
// descriptor and both ports timed out.
func TestUpIdleFloodUnderNofile(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,200 connections")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	site, body := helloSite(t)
	args := append([]string{"--nofile=1024:1024", os.Args[0], "-test.run=^$", "--"},
		"up", "--data", t.TempDir(), "--site", site, "--nodes", "2", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	cmd := exec.Command(prlimit, args...)
	cmd.Env = append(os.Environ(), "SHOAL_AS_MAIN=1")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	br := bufio.NewReader(out)
	var frontURL, adminURL string
	for frontURL == "" || adminURL == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("shoal up ended its output: %v", err)
		}
		if i := strings.Index(line, "open http://"); i >= 0 {
			frontURL = strings.TrimSuffix(strings.TrimSpace(line[i+len("open "):]), "/")
		}
		if i := strings.Index(line, "admin http://"); i >= 0 {
			adminURL = strings.TrimSuffix(strings.Fields(line[i+len("admin "):])[0], "/nodes")
		}
	}
	go io.Copy(io.Discard, br)
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for _, base := range []string{frontURL, adminURL} {
		addr := strings.TrimPrefix(base, "http://")
		for i := range 1100 {
			d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(2+i%50))}}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				continue // the backlog is full: as good as refused
			}
			flood = append(flood, c)
			// One request, then idle with keep-alive; the answer is not read.
			fmt.Fprintf(c, "GET /nodes HTTP/1.1\r\nHost: localhost\r\n\r\n")
		}
	}
	time.Sleep(500 * time.Millisecond)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, u := range []string{adminURL + "/nodes", frontURL + "/a.txt"} {
		resp, err := client.Get(u)
		if err != nil {
			t.Errorf("GET %s with 2,200 idle connections held: %v", u, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d %.80q", u, resp.StatusCode, b)
		}
		if strings.HasSuffix(u, "/a.txt") && string(b) != body {
			t.Errorf("GET %s: %q", u, b)
		}
	}
}
