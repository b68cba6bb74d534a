package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// WriteTree creates files (slash-separated path → content) under dir, with
// their parent directories; a content starting with "->" makes a symlink to
// the rest of the string instead. The content, node and front tests all
// build their document roots this way.
func WriteTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(body, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// WriteTreeAt is WriteTree with every regular file's modification time set
// to mod, so that Last-Modified (and an ETag derived from it) is known in
// advance, e.g. to compare two servers' answers byte for byte.
func WriteTreeAt(t testing.TB, dir string, files map[string]string, mod time.Time) {
	t.Helper()
	WriteTree(t, dir, files)
	for name, body := range files {
		if strings.HasPrefix(body, "->") {
			continue
		}
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(name)), mod, mod); err != nil {
			t.Fatal(err)
		}
	}
}

// Pattern returns n deterministic pseudo-random bytes (xorshift32): a body
// that gzip cannot shrink and whose every offset is checkable, the same in
// every run.
func Pattern(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
