// Command shoal runs every role of the shoal web-hosting cluster: node, front,
// up, sim, trace and bench. This package holds only flag parsing and wiring;
// the work lives in internal/<package>.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
)

// version is the release name, set at build time with
// -ldflags "-X main.version=v1.2.3"; the commit comes from the Go
// toolchain's VCS stamp.
var version = "dev"

// versionString is "shoal VERSION (commit REV[, modified])".
func versionString() string {
	rev, dirty := "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = ", modified"
			}
		}
	}
	return fmt.Sprintf("shoal %s (commit %s%s)", version, rev, dirty)
}

// command is one subcommand. Each lives in its own file (node.go, up.go, …)
// and registers itself in commands from an init function, so that adding a
// role never touches another role's wiring.
type command struct {
	summary string
	run     func(args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string) error) {
	commands[name] = command{summary: summary, run: run}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "shoal — a web-hosting cluster and CDN\n\nUsage: shoal <command> [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "version", "print the version and commit")
	fmt.Fprintf(w, "\nRun 'shoal <command> --help' for the flags of one command.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		usage(os.Stdout)
		return
	case "-version", "--version", "version":
		fmt.Println(versionString())
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "shoal: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	if err := cmd.run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "shoal %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
