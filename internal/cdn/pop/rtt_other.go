//go:build !linux

package pop

import (
	"net"
	"time"
)

// tcpRTT is Linux-only (TCP_INFO); elsewhere no sample is taken.
func tcpRTT(net.Conn) (time.Duration, bool) { return 0, false }

func quickAck(net.Conn) {}
