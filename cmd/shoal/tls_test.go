package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/cluster/front"
	"shoal/internal/testutil"
)

// TestUpTLS: `shoal up --tls` prints an https URL; curl -k through it
// returns the file (SHA-256 checked), `shoal bench http --insecure` loads
// it without an error, and the self-signed key in the data folder is 0600.
func TestUpTLS(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	dir := t.TempDir()
	site := filepath.Join(dir, "www")
	os.MkdirAll(site, 0o755)
	body := make([]byte, 300<<10)
	rand.Read(body)
	os.WriteFile(filepath.Join(site, "big.bin"), body, 0o644)
	data := filepath.Join(dir, "data")
	cmd := asMain("up", "--data", t.TempDir(), "--tls", "--listen", "127.0.0.1:0", "--admin", "off",
		"--site", site, "--nodes", "2", "--data", data)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	var url, printed string
	for url == "" && sc.Scan() {
		printed += sc.Text() + "\n"
		url = regexp.MustCompile(`https://[0-9.:]+/`).FindString(sc.Text())
	}
	if url == "" {
		t.Fatalf("no https URL printed: %q", printed)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	out, err := exec.Command(curl, "-sS", "-k", "--fail", "--max-time", "20", url+"big.bin").Output()
	if err != nil {
		t.Fatalf("curl -k %sbig.bin: %v", url, err)
	}
	if sha256.Sum256(out) != sha256.Sum256(body) {
		t.Fatalf("curl -k: %d bytes, checksum mismatch", len(out))
	}
	if _, err := exec.Command(curl, "-sS", "--fail", "--max-time", "20", url+"big.bin").Output(); err == nil {
		t.Error("curl without -k accepted the self-signed certificate")
	}
	so, se, code := shoal(t, "bench", "http", "--url", url+"big.bin", "--insecure", "--requests", "40", "--connections", "4", "--json")
	var res struct {
		Requests uint64            `json:"requests"`
		Errors   map[string]uint64 `json:"errors"`
	}
	if code != 0 || json.Unmarshal([]byte(so), &res) != nil || res.Requests != 40 {
		t.Fatalf("bench http --insecure: exit %d, %q %q", code, so, se)
	}
	for k, v := range res.Errors {
		if v != 0 {
			t.Errorf("bench http --insecure: %d %s errors", v, k)
		}
	}
	_, se, code = shoal(t, "bench", "http", "--url", url+"big.bin", "--requests", "1")
	if code == 0 || !strings.Contains(se, "--insecure") {
		t.Errorf("bench http without --insecure: exit %d, stderr %q; want an error naming --insecure", code, se)
	}
	fi, err := os.Stat(filepath.Join(data, "tls", "key.pem"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key: %v %v, want mode 0600", err, fi)
	}
}

// TestFrontTLSFlags: --tls-cert and --tls-key must pair up, and a missing
// certificate file stops the front with its name.
func TestFrontTLSFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "a.crt,b.crt", "--tls-key", "a.key"}, "give one key per certificate"},
		{[]string{"--tls-cert", "/nonexistent/a.crt", "--tls-key", "/nonexistent/a.key"}, "/nonexistent/a.crt"},
	} {
		args := append([]string{"front", "--listen", "127.0.0.1:0", "--nodes", "http://127.0.0.1:1", "--health-interval", "0"}, c.args...)
		_, se, code := shoal(t, args...)
		if code == 0 || !strings.Contains(se, c.want) {
			t.Errorf("shoal %v: exit %d, stderr %q; want an error with %q", args, code, se, c.want)
		}
	}
}

// TestFrontTLSReload: SIGHUP makes a running HTTPS front read its
// certificate files again, so a renewed certificate is served to new
// handshakes without a restart; a broken file leaves the old one in place.
func TestFrontTLSReload(t *testing.T) {
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "site.crt"), filepath.Join(dir, "site.key")
	mk := func(host string) {
		t.Helper()
		c, k := filepath.Join(dir, host+".crt"), filepath.Join(dir, host+".key")
		if err := front.WriteSelfSigned(c, k, front.SelfSigned{Hosts: []string{host}}); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(k, key); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(c, crt); err != nil {
			t.Fatal(err)
		}
	}
	mk("old.test")
	listen := freeAddr(t)
	var stderr testutil.SyncBuf
	cmd := startMain(t, &stderr, "front", "--listen", listen, "--nodes", "http://127.0.0.1:1",
		"--health-interval", "0", "--tls-cert", crt, "--tls-key", key)
	served := func() string {
		c, err := tls.Dial("tcp", listen, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return ""
		}
		defer c.Close()
		return strings.Join(c.ConnectionState().PeerCertificates[0].DNSNames, ",")
	}
	waitFor := func(what, want string) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); served() != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: serving %q, want %q; stderr:\n%s", what, served(), want, stderr.String())
			}
		}
	}
	waitFor("start", "old.test")
	mk("new.test")
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor("after SIGHUP", "new.test")

	os.WriteFile(crt, []byte("half a certificate"), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	for end := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "certificates not reloaded"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("a broken certificate file was not reported:\n%s", stderr.String())
		}
	}
	waitFor("after a broken file", "new.test")
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}
