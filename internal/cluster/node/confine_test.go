package node

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawGet sends one GET with Connection: close to addr and returns the
// status and every byte the node sent until it closed. A node that does
// not answer within 10 s gives status 0 (a safety net, not a timing).
func rawGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	nc := sendRaw(t, addr, "GET "+path+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
	defer nc.Close()
	raw, _ := io.ReadAll(nc)
	s := string(raw)
	f := strings.SplitN(s, " ", 3)
	if len(f) < 3 || !strings.HasPrefix(f[0], "HTTP/1.") {
		return 0, s
	}
	st, _ := strconv.Atoi(f[1])
	return st, s
}

// TestSwapAfterScan: files and directories replaced,
// while the node runs, by symlinks that leave the root (or by a FIFO) must
// not be served. The node opens every file confined to the root at open
// time (content.Table.Open: openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or
// an O_NOFOLLOW walk), so each request gets 404 and no outside byte, on the
// sendfile path (600 KB, above the cache threshold) and on the cache-miss
// path alike; a file left alone is still served.
func TestSwapAfterScan(t *testing.T) {
	big := bigBody()
	secret := "TOP-SECRET-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "\nroot:x:0:0:root:/root:/bin/sh\n"
	small := strings.Repeat("s", len(secret))
	type swap func(t *testing.T, root, outside string)
	link := func(name, target string) swap {
		return func(t *testing.T, root, outside string) {
			p := filepath.Join(root, name)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(target, "@") { // relative to outside
				target = filepath.Join(outside, target[1:])
			} else if strings.HasPrefix(target, "=") { // inside the root
				target = filepath.Join(root, target[1:])
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name string
		path string
		swap swap
	}{
		{"large file to symlink outside", "/big.bin", link("big.bin", "@secret")},
		{"small uncached file to symlink outside", "/small.txt", link("small.txt", "@small")},
		{"large file to relative symlink", "/big.bin", link("big.bin", "../outside/secret")},
		{"large file to symlink inside the root", "/big.bin", link("big.bin", "=small.txt")},
		{"directory to symlink outside, large file", "/dir/big2.bin", func(t *testing.T, root, outside string) {
			os.RemoveAll(filepath.Join(root, "dir"))
			if err := os.Symlink(filepath.Join(outside, "dir"), filepath.Join(root, "dir")); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory to symlink outside, small file", "/dir/small2.txt", func(t *testing.T, root, outside string) {
			os.RemoveAll(filepath.Join(root, "dir"))
			if err := os.Symlink(filepath.Join(outside, "dir"), filepath.Join(root, "dir")); err != nil {
				t.Fatal(err)
			}
		}},
		{"large file to FIFO", "/big.bin", func(t *testing.T, root, outside string) {
			p := filepath.Join(root, "big.bin")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				// Release a node blocked opening it (the unfixed one).
				if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			root, outside := filepath.Join(base, "site"), filepath.Join(base, "outside")
			for p, body := range map[string]string{
				"site/big.bin": big, "site/small.txt": small, "site/ok.bin": big,
				"site/dir/big2.bin": big, "site/dir/small2.txt": small,
				// Same sizes outside, so a size check cannot hide a leak.
				"outside/secret": secret + big[len(secret):], "outside/dir/big2.bin": secret + big[len(secret):],
				"outside/small": secret, "outside/dir/small2.txt": secret,
			} {
				os.MkdirAll(filepath.Dir(filepath.Join(base, p)), 0o755)
				if err := os.WriteFile(filepath.Join(base, p), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ts := start(t, root, nil)
			c.swap(t, root, outside)
			st, raw := rawGet(t, ts.addr, c.path)
			if strings.Contains(raw, "TOP-SECRET") || strings.Contains(raw, "root:x:") {
				t.Errorf("GET %s served the outside file: %.80q", c.path, raw)
			}
			if st != 404 && st != 403 {
				t.Errorf("GET %s: status %d, want 404 or 403 (%.60q)", c.path, st, raw)
			}
			if st, raw := rawGet(t, ts.addr, "/ok.bin"); st != 200 || !strings.HasSuffix(raw, big) {
				t.Errorf("GET /ok.bin (not swapped): status %d, %d bytes", st, len(raw))
			}
		})
	}
}
