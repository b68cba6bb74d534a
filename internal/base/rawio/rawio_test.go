//go:build unix

package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"shoal/internal/testutil"
	"testing"
	"time"
)

func TestConnWriteRead(t *testing.T) {
	big := make([]byte, 8<<20) // larger than the socket buffers: partial writes and waits
	for i := range big {
		big[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name string
		a, b []byte
	}{
		{"head only", []byte("HTTP/1.1 200 OK\r\n\r\n"), nil},
		{"head and body", []byte("head:"), []byte("body")},
		{"body only", nil, []byte("body")},
		{"large body", []byte("head:"), big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := testutil.TCPPair(t)
			var w, r Conn
			if !w.Bind(s) || !r.Bind(c) {
				t.Fatal("a TCP connection did not bind")
			}
			want := append(append([]byte(nil), tc.a...), tc.b...)
			done := make(chan error, 1)
			go func() {
				n, err := w.Write(tc.a, tc.b)
				if err == nil && n != len(want) {
					err = errors.New("short write")
				}
				s.Close()
				done <- err
			}()
			got := make([]byte, 0, len(want))
			buf := make([]byte, 64<<10)
			for {
				n, err := r.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("read %d bytes, want %d (or different bytes)", len(got), len(want))
			}
		})
	}
}

func TestConnReadDeadline(t *testing.T) {
	c, _ := testutil.TCPPair(t)
	var r Conn
	r.Bind(c)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := r.Read(make([]byte, 10))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v is not a net.Error timeout", err)
	}
}

func TestBindOnlyTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var c Conn
	if c.Bind(a) || c.Active() {
		t.Fatal("bound a net.Pipe")
	}
}
