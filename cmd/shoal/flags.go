package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// newFlags returns a FlagSet for a subcommand whose --help prints the
// one-line summary, the usage line and every flag with its default.
func newFlags(name, usageLine, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage: shoal %s %s\n\nFlags:\n", summary, name, usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args. --help prints the help to stdout and reports
// help=true (the command then exits 0, as asked for help should); a bad flag
// comes back as an error naming the flag and where the help is, for main to
// print on stderr once, without the whole flag list around it.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	fs.SetOutput(io.Discard)
	err = fs.Parse(args)
	fs.SetOutput(os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.Usage()
			fs.SetOutput(os.Stderr)
			return true, nil
		}
		return false, fmt.Errorf("%w (see 'shoal %s --help')", err, fs.Name())
	}
	return false, nil
}
