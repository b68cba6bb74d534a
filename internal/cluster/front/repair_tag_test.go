//go:build linux

package front

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestPushRiding: the first kick pushes at once, a kick within the period
// does not push again but arms the timer, which pushes it later; nothing
// is pushed after done.
func TestPushRiding(t *testing.T) {
	done, kick := make(chan struct{}), make(chan struct{}) // unbuffered: a send returns once the loop took it
	var n atomic.Int32
	pushed := make(chan struct{}, 10)
	ended := make(chan struct{})
	go func() {
		pushRiding(done, kick, 500*time.Millisecond, func() { n.Add(1); pushed <- struct{}{} })
		close(ended)
	}()
	kick <- struct{}{}
	<-pushed // the first kick: at once
	kick <- struct{}{}
	kick <- struct{}{} // the loop has handled the second kick: within the period, no push
	if got := n.Load(); got != 1 {
		t.Fatalf("%d pushes after two kicks within the period, want 1", got)
	}
	select {
	case <-pushed: // the armed timer
	case <-time.After(10 * time.Second):
		t.Fatal("a kick within the period was never pushed")
	}
	close(done)
	<-ended
}
