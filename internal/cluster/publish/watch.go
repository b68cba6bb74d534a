package publish

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch calls publish each time something under dir changes, once the tree
// has been quiet for settle (an editor's save, a build writing many files,
// `git checkout` all become one publish). inotify watches one folder at a
// time, so every folder is watched, and new ones as they appear; hidden
// names (".git") are ignored, as publishing leaves them out. It returns
// when ctx ends, or on a watcher error.
func Watch(ctx context.Context, dir string, settle time.Duration, publish func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	defer w.Close()
	if err := addTree(w, dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	timer := time.NewTimer(settle)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			return fmt.Errorf("watch %s: %w", dir, err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if hidden(dir, ev.Name) {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					addTree(w, ev.Name)
				}
			}
			timer.Reset(settle)
		case <-timer.C:
			publish()
		}
	}
}

// addTree watches root and every folder below it that is not hidden.
func addTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		return w.Add(p)
	})
}

// hidden reports whether p, under dir, has a segment starting with '.'.
func hidden(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	for seg := range strings.SplitSeq(filepath.ToSlash(rel), "/") {
		if strings.HasPrefix(seg, ".") && seg != "." {
			return true
		}
	}
	return false
}
