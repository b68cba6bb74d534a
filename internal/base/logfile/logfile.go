// Package logfile is a log file that can be reopened at its path, for
// logrotate's rename-then-signal rotation: the rotator renames the file,
// then signals the process (SIGUSR1 in shoal, as in nginx), which reopens
// the path and so starts a new file, while writes that were already on
// their way finish in the old one.
//
// Written by hand: it is a mutex around an *os.File; the libraries that
// rotate by themselves (lumberjack and the like) decide when to rotate,
// which here is the operator's logrotate's job.
package logfile

import (
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// File appends to the file at its path; Reopen switches to a new file at
// that path. It is safe for concurrent use.
type File struct {
	path string
	mode fs.FileMode

	mu sync.Mutex
	f  *os.File
}

// Open appends to path, creating it with mode (less the umask).
func Open(path string, mode fs.FileMode) (*File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, mode)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return &File{path: path, mode: mode, f: f}, nil
}

// Path is the path the file was opened at.
func (l *File) Path() string { return l.path }

// Write appends b to the current file.
func (l *File) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, fmt.Errorf("log file %s: closed", l.path)
	}
	return l.f.Write(b)
}

// Reopen opens the path again and closes the file written so far. When
// the path cannot be opened (its folder gone, say), the old file stays in
// use and the error says so: a log is never lost to a failed rotation.
func (l *File) Reopen() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, l.mode)
	if err != nil {
		return fmt.Errorf("log file: reopen (still writing the old file): %w", err)
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// Close closes the current file; later writes fail.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
