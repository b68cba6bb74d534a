package main

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"

	"shoal/internal/testutil"
)

// startPrinting starts `shoal args...`, reads its standard output until
// every pattern in want matched a line, and returns the first match of
// each; it stops the process (SIGTERM) when the test ends.
func startPrinting(t *testing.T, want []*regexp.Regexp, args ...string) []string {
	t.Helper()
	cmd := asMain(args...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	got := make([]string, len(want))
	left := len(want)
	sc := bufio.NewScanner(stdout)
	printed := ""
	for left > 0 && sc.Scan() {
		printed += sc.Text() + "\n"
		for i, re := range want {
			if got[i] == "" {
				if m := re.FindString(sc.Text()); m != "" {
					got[i] = m
					left--
				}
			}
		}
	}
	if left > 0 {
		t.Fatalf("shoal %s printed %q; want lines matching %v", strings.Join(args, " "), printed, want)
	}
	go io.Copy(io.Discard, stdout)
	return got
}

// TestUpHTTP2And3: `shoal up --tls --http3` serves HTTP/2 that passes
// h2spec --strict and HTTP/3 that quic-go's client fetches through; the
// access log names each request's protocol, /metrics counts them by
// protocol, and the HTTP/1.1 and HTTP/2 answers advertise HTTP/3.
func TestUpHTTP2And3(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "access.log")
	got := startPrinting(t, []*regexp.Regexp{regexp.MustCompile(`https://[0-9.:]+/`), regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/nodes`),
		regexp.MustCompile(`HTTP/3 \(QUIC\) on udp [0-9.:]+`)},
		"up", "--tls", "--http3", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--nodes", "2",
		"--data", filepath.Join(dir, "data"), "--access-log", logFile, "--access-log-format", "json")
	base, adminURL := got[0], strings.TrimSuffix(got[1], "/nodes")
	addr := strings.TrimSuffix(strings.TrimPrefix(base, "https://"), "/")
	testutil.H2Spec(t, addr, true)

	insecure := &tls.Config{InsecureSkipVerify: true}
	h2c := &http.Client{Transport: &http2.Transport{TLSClientConfig: insecure}, Timeout: 20 * time.Second}
	resp := mustGet(t, h2c, base)
	if resp.ProtoMajor != 2 || !strings.HasPrefix(resp.Header.Get("Alt-Svc"), `h3=":`) {
		t.Errorf("over HTTP/2: %s, Alt-Svc %q", resp.Proto, resp.Header.Get("Alt-Svc"))
	}
	tr := &http3.Transport{TLSClientConfig: insecure}
	defer tr.Close()
	resp = mustGet(t, &http.Client{Transport: tr, Timeout: 20 * time.Second}, base)
	if resp.ProtoMajor != 3 {
		t.Errorf("over HTTP/3: %s", resp.Proto)
	}

	metrics := string(readAll(t, mustGet(t, http.DefaultClient, adminURL+"/metrics")))
	for _, p := range []string{"h2", "h3"} {
		if !regexp.MustCompile(`shoal_front_protocol_requests_total\{protocol="` + p + `"\} [1-9]`).MatchString(metrics) {
			t.Errorf("/metrics counts no %s request", p)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the access log flushes every second
	log, _ := os.ReadFile(logFile)
	for _, p := range []string{`"proto":"HTTP/2.0"`, `"proto":"HTTP/3.0"`} {
		if !strings.Contains(string(log), p) {
			t.Errorf("access log has no %s line:\n%s", p, log)
		}
	}
}

// TestPopHTTP2: a PoP gateway (`shoal pop --tls`) passes h2spec --strict.
func TestPopHTTP2(t *testing.T) {
	if testutil.H2SpecPath() == "" {
		t.Skip("h2spec not installed: go install github.com/summerwind/h2spec/cmd/h2spec@latest")
	}
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	os.WriteFile(seed, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	got := startPrinting(t, []*regexp.Regexp{regexp.MustCompile(`gateway https://[0-9.:]+`)},
		"pop", "--name", "h2", "--seed-file", seed, "--peer", "127.0.0.1:0", "--listen", "127.0.0.1:0",
		"--admin", "off", "--nodes", "1", "--tls", "--data", filepath.Join(dir, "data"))
	addr := strings.TrimPrefix(got[0], "gateway https://")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf("gateway address %q: %v", addr, err)
	}
	testutil.H2Spec(t, addr, true)
}

func mustGet(t *testing.T, c *http.Client, url string) *http.Response {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUpProxyProtocol: `shoal up --proxy-protocol-from` takes the client's
// address from a PROXY v2 header sent from a trusted address (the access
// log shows it), and closes a connection that sends one from elsewhere.
func TestUpProxyProtocol(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "access.log")
	start := func(from string) string {
		got := startPrinting(t, []*regexp.Regexp{regexp.MustCompile(`http://[0-9.:]+/`)},
			"up", "--listen", "127.0.0.1:0", "--admin", "off", "--nodes", "1", "--data", filepath.Join(dir, "data"+from),
			"--proxy-protocol-from", from, "--access-log", logFile, "--access-log-format", "json")
		return strings.TrimSuffix(strings.TrimPrefix(got[0], "http://"), "/")
	}
	// A v2 header: PROXY, TCP over IPv4, 203.0.113.7:41000 → 198.51.100.1:80.
	hdr := append([]byte("\r\n\r\n\x00\r\nQUIT\n"), 0x21, 0x11, 0, 12, 203, 0, 113, 7, 198, 51, 100, 1, 0xa0, 0x28, 0, 80)
	send := func(addr string) []byte {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(append(hdr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"...))
		b, _ := io.ReadAll(c)
		return b
	}
	if got := send(start("127.0.0.1/32")); !strings.HasPrefix(string(got), "HTTP/1.1 200") {
		t.Fatalf("trusted: %.80q, want 200", got)
	}
	if got := send(start("10.0.0.0/8")); len(got) != 0 {
		t.Errorf("untrusted: answered %.80q, want the connection closed", got)
	}
	time.Sleep(1500 * time.Millisecond) // the access log flushes every second
	log, _ := os.ReadFile(logFile)
	if !strings.Contains(string(log), `"client":"203.0.113.7"`) || strings.Count(string(log), "\n") != 1 {
		t.Errorf("access log, want one line from 203.0.113.7:\n%s", log)
	}
}
