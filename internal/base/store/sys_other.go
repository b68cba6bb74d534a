//go:build !linux

package store

import (
	"errors"
	"os"
)

// Elsewhere than Linux the arena is Go memory and the page cache is not
// steered: the store works, without its memory guarantees.

func mapAnon(n int) ([]byte, error)                    { return make([]byte, n), nil }
func releasePages(b []byte)                            { clear(b) }
func dropCache(f *os.File, off, n int64)               {}
func writeBehind(f *os.File, off, n int64)             {}
func startWriteback(f *os.File, off, n int64)          {}
func resident(f *os.File, off, n int64) (int64, error) { return 0, errors.ErrUnsupported }
func sendfile(out, in int, off *int64, n int) (int, error) {
	return 0, errors.ErrUnsupported
}

const haveSendfile = false

func memFile(name string, body []byte) (*os.File, error) {
	f, err := os.CreateTemp("", "shoal-store-")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	if _, err := f.Write(body); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
