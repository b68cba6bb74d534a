package front

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// h2specRun runs h2spec (github.com/summerwind/h2spec) --strict against
// host:port, over TLS when tls is set, and fails the test with its report
// unless every test passes but those whose description is in allowed. It
// skips when h2spec is not installed.
func h2specRun(t *testing.T, addr string, tls bool, allowed ...string) {
	t.Helper()
	bin, err := exec.LookPath("h2spec")
	if err != nil {
		t.Skip("h2spec not installed (go install github.com/summerwind/h2spec/cmd/h2spec@latest)")
	}
	host, port, _ := net.SplitHostPort(addr)
	args := []string{"--strict", "-h", host, "-p", port, "-o", "5"}
	if tls {
		args = append(args, "-t", "-k")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	text := string(out)
	if err != nil || !strings.Contains(text, " 0 failed") {
		failed := failures(text)
		if !onlyAllowed(failed, allowed) {
			t.Fatalf("h2spec %s: %v\n%s", strings.Join(args, " "), err, failed)
		}
	}
	t.Logf("h2spec: %s", lastLine(text))
}

// failures keeps the failed cases of h2spec's report and its summary.
func failures(report string) string {
	var b strings.Builder
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		if strings.Contains(l, "×") || strings.Contains(l, "Failures:") || i >= len(lines)-3 {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// onlyAllowed reports whether every failed case in failed is one of
// allowed.
func onlyAllowed(failed string, allowed []string) bool {
	n := 0
	for _, l := range strings.Split(failed, "\n") {
		if i := strings.Index(l, "× "); i >= 0 && !strings.Contains(l[:i], "Failures") {
			n++
			ok := false
			for _, a := range allowed {
				ok = ok || strings.Contains(l, a)
			}
			if !ok {
				return false
			}
		}
	}
	return n > 0
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestH2Spec runs h2spec --strict against a TLS front and an h2c one.
// Over h2c the listener also takes HTTP/1.1, so h2spec's "invalid
// connection preface" is a malformed HTTP/1.1 request to it, answered 400
// before the close h2spec waits for: the one case allowed to fail there.
func TestH2Spec(t *testing.T) {
	a := namedBackend(t, "a")
	addr, _ := h2Front(t, Config{}, a.URL)
	h2specRun(t, addr, true)
	addr2, _, _ := startFront(t, Config{H2C: true}, a.URL)
	h2specRun(t, addr2, false, "Sends invalid connection preface")
}

// TestH2SpecServe serves a TLS front for manual h2spec runs until
// H2SPEC_SERVE seconds pass (skipped unless set).
func TestH2SpecServe(t *testing.T) {
	d := os.Getenv("H2SPEC_SERVE")
	if d == "" {
		t.Skip("H2SPEC_SERVE not set")
	}
	a := namedBackend(t, "a")
	addr, _ := h2Front(t, Config{}, a.URL)
	os.WriteFile("/tmp/h2spec.addr", []byte(addr), 0o644)
	n, _ := strconv.Atoi(d)
	time.Sleep(time.Duration(n) * time.Second)
}
