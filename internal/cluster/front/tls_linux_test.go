package front

import (
	"net"
	"syscall"
	"testing"
)

// TestTLSListenerUndefersAccept: Listen sets TCP_DEFER_ACCEPT, and
// TLSListener clears it (see there why).
func TestTLSListenerUndefersAccept(t *testing.T) {
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "local")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	get := func() int {
		raw, err := ln.(*net.TCPListener).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		v := -1
		raw.Control(func(fd uintptr) { v, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT) })
		return v
	}
	if v := get(); v == 0 {
		t.Fatalf("Listen: TCP_DEFER_ACCEPT %d, want it set", v)
	}
	TLSListener(ln, certs)
	if v := get(); v != 0 {
		t.Errorf("TLSListener: TCP_DEFER_ACCEPT %d, want 0", v)
	}
}
