// Command shoal runs every role of the shoal web-hosting cluster: node, front,
// up, sim, trace and bench. This package holds only flag parsing and wiring;
// the work lives in internal/<package>.
package main

import (
	"fmt"
	"os"
	"sort"
)

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

func usage() {
	fmt.Fprintf(os.Stderr, "shoal — a web-hosting cluster and CDN\n\nUsage: shoal <command> [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'shoal <command> --help' for the flags of one command.\n")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "shoal: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := cmd.run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "shoal %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
