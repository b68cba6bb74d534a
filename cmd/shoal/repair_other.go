//go:build !linux

package main

import (
	"errors"
	"log/slog"

	"shoal/internal/cluster/front"
	"shoal/internal/cluster/node"
	"shoal/internal/tools/loadgen"
)

// errRepairLinux: TCP_REPAIR and the flow steering exist only on Linux.
var errRepairLinux = errors.New("the repair path needs Linux (TCP_REPAIR, eBPF or nftables steering)")

func (rf *repairFlags) frontPath(string, *slog.Logger) (front.DataPath, func(), error) {
	return nil, nil, errRepairLinux
}

func (rf *repairFlags) startNode(*node.Server, func(msg string, args ...any)) (func(), error) {
	if *rf.listen == "" {
		return func() {}, nil
	}
	return nil, errRepairLinux
}

func serveRepairSink(*loadgen.Sink, string, []byte, chan<- error) (func(), error) {
	return nil, errRepairLinux
}
