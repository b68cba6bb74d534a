package testutil

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// H2SpecPath finds h2spec (github.com/summerwind/h2spec, the HTTP/2
// conformance tester): on PATH, else where `go install` puts it. "" when
// it is not installed.
func H2SpecPath() string {
	if p, err := exec.LookPath("h2spec"); err == nil {
		return p
	}
	dirs := []string{os.Getenv("GOBIN")}
	if gp, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, d := range filepath.SplitList(strings.TrimSpace(string(gp))) {
			dirs = append(dirs, filepath.Join(d, "bin"))
		}
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, "h2spec")); err == nil && !fi.IsDir() {
			return filepath.Join(d, "h2spec")
		}
	}
	return ""
}

// H2Spec runs `h2spec --strict` against addr (over TLS with tls set,
// trusting any certificate) and fails the test with the failed cases
// unless every case passes but those whose description contains one of
// allowed. It skips the test when h2spec is not installed, saying how to
// install it.
func H2Spec(t testing.TB, addr string, tls bool, allowed ...string) {
	t.Helper()
	bin := H2SpecPath()
	if bin == "" {
		t.Skip("h2spec not installed: go install github.com/summerwind/h2spec/cmd/h2spec@latest")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--strict", "-h", host, "-p", port, "-o", "5"}
	if tls {
		args = append(args, "-t", "-k")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	text := string(out)
	if err != nil || !strings.Contains(text, " 0 failed") {
		failed := h2specFailures(text)
		if !onlyAllowed(failed, allowed) {
			t.Fatalf("h2spec %s: %v\n%s", strings.Join(args, " "), err, failed)
		}
	}
	t.Logf("h2spec %s: %s", addr, lastLine(text))
}

// h2specFailures keeps the failed cases of h2spec's report and its summary.
func h2specFailures(report string) string {
	var b strings.Builder
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		if strings.Contains(l, "×") || i >= len(lines)-3 {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// onlyAllowed reports whether failed names at least one failed case and
// every one of them contains one of allowed.
func onlyAllowed(failed string, allowed []string) bool {
	n := 0
	for _, l := range strings.Split(failed, "\n") {
		if !strings.Contains(l, "× ") {
			continue
		}
		n++
		ok := false
		for _, a := range allowed {
			ok = ok || strings.Contains(l, a)
		}
		if !ok {
			return false
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
