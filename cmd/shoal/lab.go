package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"shoal/internal/cluster/handoff"
)

func init() {
	register("lab", "build or remove the network-namespace test topology for the repair path", runLab)
}

func runLab(args []string) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			args = []string{"up", "--help"}
		} else {
			return errors.New("usage: shoal lab up|down [flags] (see shoal lab up --help)")
		}
	}
	verb := args[0]
	fs := newFlags("lab "+verb, "[--id ID] [--nodes N] [--all]",
		"Build (up) or remove (down) network namespaces client, front, node1..N and a bridge, shaped like an LVS "+
			"direct-routing cluster for the repair data path (root only; see internal/cluster/handoff.Lab).")
	id := fs.String("id", "", "lab id prefixing the namespace names (up: random if empty; down: required unless --all)")
	nodes := fs.Int("nodes", 3, "number of node namespaces (up)")
	all := fs.Bool("all", false, "down: remove every shoal lab on this host")
	verbose := fs.Bool("v", false, "print each ip command")
	if help, err := parseFlags(fs, args[1:]); help || err != nil {
		return err
	}
	ctx := context.Background()
	logf := func(string) {}
	if *verbose {
		logf = func(c string) { fmt.Fprintln(os.Stderr, "+", c) }
	}
	if verb == "up" {
		l := handoff.NewLab(*id, *nodes)
		l.Log = logf
		if err := l.Up(ctx); err != nil {
			return err
		}
		fmt.Printf("lab %s is up\n", l.ID)
		fmt.Printf("  client  %-22s %s\n", l.ClientNS(), l.Client)
		fmt.Printf("  front   %-22s %s + VIP %s on eth0\n", l.FrontNS(), l.Front, l.VIP)
		for i, a := range l.NodeAddrs {
			fmt.Printf("  node%d   %-22s %s + VIP on lo\n", i+1, l.NodeNS(i), a)
		}
		fmt.Printf("run a process inside with: ip netns exec %s <command>\n", l.FrontNS())
		fmt.Printf("remove with: shoal lab down --id %s\n", l.ID)
		return nil
	}
	var ids []string
	switch {
	case *all:
		var err error
		if ids, err = handoff.LabIDs(); err != nil {
			return err
		}
	case *id != "":
		have, err := handoff.LabIDs()
		if err != nil {
			return err
		}
		if !slices.Contains(have, *id) {
			return fmt.Errorf("lab down: no lab %q on this host (labs: %s)", *id, strings.Join(append(have, "none")[:max(len(have), 1)], ", "))
		}
		ids = []string{*id}
	default:
		return errors.New("lab down: give --id ID or --all")
	}
	var errs []error
	for _, i := range ids {
		l := handoff.LabFromNamespaces(i)
		l.Log = logf
		if err := l.Down(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Printf("lab %s removed\n", i)
	}
	return errors.Join(errs...)
}
