package main

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// TestEveryCommandHasHelp runs each registered command with --help: it must
// print its usage and return without error (flag parsing only, no work).
func TestEveryCommandHasHelp(t *testing.T) {
	want := []string{"bench", "compress", "front", "lab", "node", "sim", "trace", "up"}
	for _, name := range want {
		if _, ok := commands[name]; !ok {
			t.Errorf("command %q is not registered", name)
		}
	}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	stderr := os.Stderr
	os.Stderr = devnull
	defer func() { os.Stderr = stderr }()
	for name, c := range commands {
		if name == "bench" || name == "trace" || name == "lab" {
			continue // these take a mode first; checked below
		}
		if err := c.run([]string{"--help"}); err != nil {
			t.Errorf("shoal %s --help: %v", name, err)
		}
	}
	for _, args := range [][]string{{"bench", "http", "--help"}, {"bench", "tcp", "--help"}, {"bench", "sink", "--help"}, {"bench", "l4front", "--help"}, {"trace", "stats", "--help"}, {"trace", "gen", "--help"}} {
		if err := commands[args[0]].run(args[1:]); err != nil {
			t.Errorf("shoal %v: %v", args, err)
		}
	}
}

// TestDescribeBuild: the version line comes from the build info's VCS
// stamp, and a build without one says why rather than "unknown".
func TestDescribeBuild(t *testing.T) {
	stamp := func(main string, kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "shoal", Version: main}}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	rev := "1b56ed7dcc5f50852365ad2a08a8469d30e5c12f"
	cases := []struct {
		release string
		bi      *debug.BuildInfo
		want    string
	}{
		{"dev", stamp("v0.0.0-20261201152821-1b56ed7dcc5f", "vcs.revision", rev, "vcs.time", "2026-12-01T15:28:21Z", "vcs.modified", "false"),
			"shoal v0.0.0-20261201152821-1b56ed7dcc5f (commit " + rev + ", 2026-12-01T15:28:21Z)"},
		{"v1.2.3", stamp("v0.0.0-20261201152821-1b56ed7dcc5f", "vcs.revision", rev, "vcs.modified", "true"),
			"shoal v1.2.3 (commit " + rev + ", modified)"},
		{"dev", stamp("(devel)"), "shoal dev (no commit recorded: `go run`"},
		{"dev", nil, "shoal dev (no commit recorded"},
	}
	for _, c := range cases {
		if got := describeBuild(c.release, c.bi); !strings.HasPrefix(got, c.want) {
			t.Errorf("describeBuild(%q, …) = %q, want it to start with %q", c.release, got, c.want)
		}
	}
}
