package node

import (
	"bufio"
	"bytes"
	"testing"
	"time"
)

// fakeTagged is a tag-mode fakeHanded: the table sends /b.txt to node 1
// and everything else here (node 0); moves succeed and keep their key, as
// handoff's router does until the move is acknowledged.
type fakeTagged struct {
	*fakeHanded
	moved chan string
}

func (f *fakeTagged) TagMode() bool     { return true }
func (f *fakeTagged) Self() int         { return 0 }
func (f *fakeTagged) Served(key string) {}
func (f *fakeTagged) Route(key string) int {
	if key == "/b.txt" {
		return 1
	}
	return 0
}
func (f *fakeTagged) MoveTo(node int, key string, rest []byte) error {
	f.moved <- key
	return nil
}

// TestTagMoveKeepsKey: the key a connection moves with is still the
// request's URL after the connection's read buffer went back to the free list
// and was written over, as the next connection's requests would write it.
func TestTagMoveKeepsKey(t *testing.T) {
	f := &fakeTagged{fakeHanded: &fakeHanded{pre: []byte(twoRequests)}, moved: make(chan string, 1)}
	s, c := servePair(t, f.fakeHanded, f)
	if got := readBody(t, bufio.NewReader(c)); got != "AAAA" {
		t.Fatalf("first body %q, want AAAA", got)
	}
	var key string
	select {
	case key = <-f.moved:
	case <-time.After(10 * time.Second):
		t.Fatal("no move for /b.txt")
	}
	// The connection's buffer goes to a free list (its own with the conn, a
	// lent one to inBufs) once its serve loop ends; whatever the lists hand
	// out meanwhile is scribbled over.
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if fc := s.freeConns.get(); fc != nil {
			copy(fc.ownIn, bytes.Repeat([]byte("X"), len(fc.ownIn)))
			s.freeConns.put(fc, maxFreeConns)
		}
		if b := s.inBufs.get(); b != nil {
			copy(b, bytes.Repeat([]byte("X"), len(b)))
			s.inBufs.put(b, maxInBufs)
		}
		if key != "/b.txt" {
			t.Fatalf("moved with key %q, want /b.txt", key)
		}
	}
}
