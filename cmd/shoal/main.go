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
// -ldflags "-X main.version=v1.2.3". Left at "dev", the Go toolchain's VCS
// stamp names the build instead (versionString).
var version = "dev"

// versionString is what `shoal --version` prints.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return describeBuild(version, bi)
}

// describeBuild is "shoal VERSION (commit REV, TIME[, modified])" from the
// build info's VCS stamp, which `go build` and `go install` record in a git
// clone. VERSION is release when set at build time, else the module's
// pseudo-version from the stamp (v0.0.0-DATE-REV). A build without a stamp
// (`go run`, `go test`, -buildvcs=false, a copy without .git) says so and
// how to get one, instead of an unexplained "unknown".
func describeBuild(release string, bi *debug.BuildInfo) string {
	var rev, at, dirty string
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = ", modified"
				}
			}
		}
		if release == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			release = bi.Main.Version
		}
	}
	if rev == "" {
		return fmt.Sprintf("shoal %s (no commit recorded: `go run`, -buildvcs=false and copies without .git carry none; "+
			"`go build -buildvcs=true ./cmd/shoal` in a git clone records it)", release)
	}
	if at != "" {
		at = ", " + at
	}
	return fmt.Sprintf("shoal %s (commit %s%s%s)", release, rev, at, dirty)
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
	fmt.Fprintf(w, "\nRun 'shoal <command> --help' (or 'shoal help <command>') for the flags of one command.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		if len(os.Args) > 2 && os.Args[1] == "help" {
			// `shoal help up` is `shoal up --help`; `shoal help bench
			// http` is `shoal bench http --help`.
			if cmd, ok := commands[os.Args[2]]; ok {
				if err := cmd.run(append(os.Args[3:], "--help")); err != nil {
					fmt.Fprintf(os.Stderr, "shoal %s: %v\n", os.Args[2], err)
					os.Exit(1)
				}
				return
			}
			fmt.Fprintf(os.Stderr, "shoal help: unknown command %q\n\n", os.Args[2])
			usage(os.Stderr)
			os.Exit(2)
		}
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
