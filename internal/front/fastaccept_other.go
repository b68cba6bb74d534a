//go:build !linux

package front

import "net"

// The raw accept path (fastaccept.go) is Linux-only; elsewhere every
// connection takes the normal path.
func (s *Server) fastAccept(net.Listener) (net.Listener, *passfdPath) { return nil, nil }

func (s *Server) serveRaw(net.Listener, *passfdPath) error { return nil }
