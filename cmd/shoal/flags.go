package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// newFlags returns a FlagSet for a subcommand whose --help prints the
// one-line summary, the usage line and every flag with its default.
func newFlags(name, usageLine, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "%s\n\nUsage: shoal %s %s\n\nFlags:\n", summary, name, usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and turns -h/--help into a clean nil-error exit.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}
