package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets a test run this test binary as the real `shoal` command:
// with SHOAL_AS_MAIN=1 it calls main with the arguments after "--", so exit
// codes and the split between stdout and stderr are checked for real without
// building (and leaving behind) a second binary.
func TestMain(m *testing.M) {
	if os.Getenv("SHOAL_AS_MAIN") == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"shoal"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// asMain returns a command that runs this test binary as `shoal args...`
// (see TestMain).
func asMain(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "SHOAL_AS_MAIN=1")
	return cmd
}

// startMain starts `shoal args...` with its stderr to stderr; it is killed
// when the test ends.
func startMain(t *testing.T, stderr io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := asMain(args...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// shoal runs the command line and returns stdout, stderr and the exit code.
func shoal(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := asMain(args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("shoal %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// TestCommandLine checks a clean command line: help on stdout with status 0, a
// version, and a clear non-zero exit for input that makes no sense.
func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("# shoal\n\nnot an access log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := "http://" + freeAddr(t) + "/"

	cases := []struct {
		args      []string
		code      int
		stdoutHas string // "" = stdout must be empty
		stderrHas string // "" = stderr must be empty
	}{
		{[]string{"--help"}, 0, "Usage: shoal <command>", ""},
		{[]string{"front", "--help"}, 0, "Usage: shoal front", ""},
		{[]string{"bench", "http", "--help"}, 0, "Usage: shoal bench http", ""},
		{[]string{"bench", "--help"}, 0, "Usage: shoal bench <mode>", ""},
		{[]string{"help", "up"}, 0, "Usage: shoal up", ""},
		{[]string{"help", "bench", "http"}, 0, "Usage: shoal bench http", ""},
		{[]string{"help", "trace"}, 0, "Usage: shoal trace <mode>", ""},
		{[]string{"help", "nope"}, 2, "", "unknown command \"nope\""},
		{[]string{"bench"}, 1, "", "missing mode"},
		{[]string{"trace", "nope"}, 1, "", "unknown mode \"nope\""},
		{[]string{"--version"}, 0, "shoal ", ""},
		{[]string{"version"}, 0, "shoal ", ""},
		{[]string{"front", "--no-such-flag"}, 1, "", "see 'shoal front --help'"},
		{[]string{"no-such-command"}, 2, "", "unknown command"},
		{[]string{"trace", "stats", readme}, 1, "", "no line is an access-log record"},
		{[]string{"sim", "--trace", readme}, 1, "", "no line is an access-log record"},
		{[]string{"bench", "http", "--url", dead, "--duration", "2s"}, 1, "", "nothing answers at"},
		{[]string{"lab", "down", "--id", "no-such-lab"}, 1, "", "no lab \"no-such-lab\""},
		{[]string{"up", "--nodes", "0"}, 1, "", "want at least one node"},
		{[]string{"up", "--path", "nope"}, 1, "", "want one of relay, redirect, passfd, hybrid, repair"},
		{[]string{"front", "--nodes", "http://127.0.0.1:1", "--path", "nope"}, 1, "", "want one of relay, redirect, passfd, hybrid, repair"},
		{[]string{"node", "--root", dir, "--cache-mb", "-1"}, 1, "", "sizes cannot be negative"},
		{[]string{"compress"}, 1, "", "want exactly one DIR"},
		{[]string{"compress", "--gzip-level", "12", dir}, 1, "", "gzip level 12 not in 1..9"},
	}
	for _, c := range cases {
		out, errOut, code := shoal(t, c.args...)
		name := strings.Join(c.args, " ")
		if code != c.code {
			t.Errorf("shoal %s: exit %d, want %d (stderr %q)", name, code, c.code, errOut)
		}
		for _, s := range []struct{ got, want, stream string }{{out, c.stdoutHas, "stdout"}, {errOut, c.stderrHas, "stderr"}} {
			if s.want == "" && s.got != "" {
				t.Errorf("shoal %s: %s = %q, want it empty", name, s.stream, s.got)
			}
			if !strings.Contains(s.got, s.want) {
				t.Errorf("shoal %s: %s = %q, want it to contain %q", name, s.stream, s.got, s.want)
			}
		}
	}
}

// Help text speaks to users: paper and spec references belong in docs/.
func TestHelpHasNoPaperReferences(t *testing.T) {
	for _, args := range [][]string{{}, {"node"}, {"front"}, {"up"}, {"sim"}, {"sim", "cdn"}, {"compress"}, {"trace"}, {"trace", "stats"},
		{"trace", "gen"}, {"bench"}, {"bench", "http"}, {"bench", "tcp"}, {"bench", "sink"}, {"bench", "l4front"}, {"lab", "up"},
		{"pop"}, {"publish"}} {
		out, _, _ := shoal(t, append(args, "--help")...)
		for _, bad := range []string{"seed 0", "SPEC", "§"} {
			if strings.Contains(out, bad) {
				t.Errorf("shoal %s --help mentions %q", strings.Join(args, " "), bad)
			}
		}
	}
}

// `up --policy` lists the policies it accepts, as `front --policy` does.
func TestUpHelpListsPolicies(t *testing.T) {
	out, _, _ := shoal(t, "up", "--help")
	for _, p := range []string{"wrr", "lard", "tbccrd", "weblins", "chbl"} {
		if !strings.Contains(out, p) {
			t.Errorf("shoal up --help does not name policy %q", p)
		}
	}
}

// TestMultiSiteTrace: a generated three-site log (trace gen --sites) is
// summarised per site by trace stats and replayed by the simulator with
// site + path keys (every request replayed, none skipped).
func TestMultiSiteTrace(t *testing.T) {
	f := filepath.Join(t.TempDir(), "ms.log")
	if _, errOut, code := shoal(t, "trace", "gen", "--sites", "3", "--files", "300", "--requests", "3000", "--out", f); code != 0 {
		t.Fatalf("trace gen: %d %s", code, errOut)
	}
	out, errOut, code := shoal(t, "trace", "stats", f)
	if code != 0 {
		t.Fatalf("trace stats: %d %s", code, errOut)
	}
	for _, want := range []string{"requests                    3000", "site1.example", "site2.example", "site3.example"} {
		if !strings.Contains(out, want) {
			t.Errorf("trace stats lacks %q:\n%s", want, out)
		}
	}
	out, errOut, code = shoal(t, "sim", "--trace", f, "--policies", "wrr,lard", "--nodes", "2")
	if code != 0 || !strings.Contains(out+errOut, "3000 requests replayed per run (0 skipped") {
		t.Fatalf("sim: %d\n%s\n%s", code, out, errOut)
	}
}
