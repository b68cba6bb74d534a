package front

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestListen checks the listener's options and that a client that sends
// its request at once is accepted with the bytes already there.
func TestListen(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	rc.Control(func(fd uintptr) {
		v, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT)
	})
	if err != nil || v <= 0 {
		t.Errorf("TCP_DEFER_ACCEPT = %d, %v; want > 0", v, err)
	}
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc2, _ := c.(*net.TCPConn).SyscallConn()
	rc2.Control(func(fd uintptr) { v, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE) })
	if err != nil || v != 0 {
		t.Errorf("SO_KEEPALIVE = %d, %v; want 0", v, err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 18)
	if _, err := io.ReadFull(c, b); err != nil || string(b[:3]) != "GET" {
		t.Fatalf("read %q, %v", b, err)
	}
}
