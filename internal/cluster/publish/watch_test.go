package publish

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatch: a burst of writes, in a folder made after the watch began
// too, gives one publish once the tree is quiet; changes under a hidden
// folder give none.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, ".git"), 0o755)
	var n atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, dir, 200*time.Millisecond, func() { n.Add(1) }) }()
	time.Sleep(100 * time.Millisecond) // the watches are in place
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	time.Sleep(50 * time.Millisecond) // the new folder is watched
	for i := range 5 {
		os.WriteFile(filepath.Join(dir, "sub", "f"), []byte{byte(i)}, 0o644)
		os.WriteFile(filepath.Join(dir, "a.html"), []byte{byte(i)}, 0o644)
	}
	for deadline := time.Now().Add(5 * time.Second); n.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("%d publishes after one burst, want 1", got)
	}
	os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o644)
	for deadline := time.Now().Add(5 * time.Second); n.Load() == 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.Load(); got != 2 {
		t.Fatalf("%d publishes after a change in a new folder, want 2", got)
	}
	os.WriteFile(filepath.Join(dir, ".git", "index"), []byte("x"), 0o644)
	time.Sleep(500 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 2 {
		t.Fatalf("%d publishes after a change under .git, want still 2", got)
	}
}
