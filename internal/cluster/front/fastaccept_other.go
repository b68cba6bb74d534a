//go:build !linux

package front

import "net"

// The raw accept path (fastaccept.go) is Linux-only; elsewhere every
// connection takes the normal path.
func (s *Server) fastAccept(net.Listener) (net.Listener, *rawAccept) { return nil, nil }

type rawAccept struct{}

func (s *Server) serveRaw(net.Listener, *rawAccept) error { return nil }
