package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// HelperCmd returns the command that runs this test binary again as a
// helper process: only the test entry (whose body calls HelperMain), with
// env set to spec in its environment and stderr shared with the test. wrap
// builds the command from the binary and its arguments, e.g. handoff.Exec
// to start it inside a network namespace (nil: exec.Command). Start it with
// StartReady.
func HelperCmd(t testing.TB, wrap func(name string, args ...string) *exec.Cmd, entry, env, spec string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if wrap == nil {
		wrap = exec.Command
	}
	cmd := wrap(exe, "-test.run=^"+entry+"$", "-test.v=false")
	cmd.Env = append(os.Environ(), env+"="+spec)
	cmd.Stderr = os.Stderr
	return cmd
}

// HelperMain is the body of a helper entry test: in a process started by
// HelperCmd it runs run on the fields of the spec found in env and exits,
// 0 on success and 1 (the error on stderr) on failure; in a normal test run
// (env unset) it skips the entry.
func HelperMain(t *testing.T, env string, run func(spec []string) error) {
	spec := os.Getenv(env)
	if spec == "" {
		t.Skip("helper process entry point")
	}
	if err := run(strings.Fields(spec)); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
