package loadgen

import (
	"context"
	"net"
	"testing"
	"time"
)

func startSink(t *testing.T, recv, send int) (*Sink, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{Recv: recv, Send: send}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

func TestTCPAgainstSink(t *testing.T) {
	_, addr := startSink(t, 100, 5000)
	res, err := RunTCP(context.Background(), TCPConfig{Addr: addr, Connections: 4, SendBytes: 100, RecvBytes: 5000, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Errors != [NumErrorKinds]uint64{} || res.Latency.Count() != res.Ops || res.Connections != 4 {
		t.Errorf("ops %d errors %v latency samples %d", res.Ops, res.Errors, res.Latency.Count())
	}
}

func TestTCPErrors(t *testing.T) {
	// The sink replies with fewer bytes than the client expects.
	_, addr := startSink(t, 10, 50)
	res, err := RunTCP(context.Background(), TCPConfig{Addr: addr, Connections: 2, SendBytes: 10, RecvBytes: 100, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 0 || res.Errors[ErrShortBody] == 0 {
		t.Errorf("short reply: ops %d errors %v", res.Ops, res.Errors)
	}
	// Nobody listening.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	res, _ = RunTCP(context.Background(), TCPConfig{Addr: dead, SendBytes: 1, RecvBytes: 1, Duration: 50 * time.Millisecond})
	if res.Ops != 0 || res.Errors[ErrConnect] == 0 {
		t.Errorf("dead port: ops %d errors %v", res.Ops, res.Errors)
	}
	if _, err := RunTCP(context.Background(), TCPConfig{}); err == nil {
		t.Error("empty address accepted")
	}
}
