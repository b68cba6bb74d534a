package main

import (
	"os"
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
