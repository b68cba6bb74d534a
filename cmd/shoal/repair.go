package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"

	"shoal/internal/cluster/handoff"
	"shoal/internal/config"
)

// Flags and wiring of the repair (cross-host handoff) data path, shared by
// `shoal front --path repair` and `shoal node --repair-listen`.

type repairFlags struct {
	keyFile *string
	port    *int
	dev     *string
	steer   *string
	moves   *string
	accept  *string
	listen  *string // node only
	maxConn *int    // node only
}

func addRepairFrontFlags(fs *flag.FlagSet, def config.Repair) *repairFlags {
	return &repairFlags{
		keyFile: fs.String("repair-key-file", def.KeyFile, "--path repair: file holding the cluster key shared with the nodes (≥16 bytes; per-node AES-GCM keys are derived from it)"),
		port:    fs.Int("repair-port", def.Port, "--path repair: the nodes' handoff port (shoal node --repair-listen)"),
		dev:     fs.String("repair-dev", def.Dev, "--path repair: interface towards the nodes (default: the one holding the listen address)"),
		steer:   fs.String("repair-steer", def.Steer, "--path repair: per-flow steering: bpf (TCX program, kernel ≥ 6.6), nftables, or auto (bpf, else nftables)"),
		accept:  fs.String("repair-accept", def.Accept, "--path repair in tag mode (tbccrd, --repair-moves nodes): front (the front accepts each new connection and hands it over) or nodes (the steering program sends a new connection straight to a node, which accepts it on the VIP; the front leaves the connection path; bpf steering only)"),
		moves:   fs.String("repair-moves", def.Moves, "--path repair under a policy that shares its URL table (tbccrd): nodes (the node holding a connection moves it with TCP_REPAIR to the node the table names for each request) or front (a connection stays where its first request sent it)"),
	}
}

func addRepairNodeFlags(fs *flag.FlagSet) *repairFlags {
	return &repairFlags{
		keyFile: fs.String("repair-key-file", "", "cluster key file shared with the front (with --repair-listen); per-node AES-GCM keys are derived from it"),
		maxConn: fs.Int("repair-max-conns", handoff.DefaultRepairMaxConns, "control connections the handoff port holds at once (a new one evicts the oldest that has not authenticated)"),
		listen:  fs.String("repair-listen", "", "handoff port for the front's repair path, e.g. 10.0.0.11:7070 (empty: off; needs CAP_NET_ADMIN and the VIP on lo)"),
	}
}

func readRepairKey(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("--repair-key-file is required for the repair path")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("repair key: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 16 {
		return nil, fmt.Errorf("repair key %s: %d bytes, need at least 16", path, len(b))
	}
	return b, nil
}
