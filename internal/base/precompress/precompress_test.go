package precompress_test

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"

	"shoal/internal/base/precompress"
	"shoal/internal/cluster/node"
	"shoal/internal/testutil"
)

func tree(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	root := t.TempDir()
	files := map[string][]byte{
		"index.html":     []byte(strings.Repeat("<p>hello, world</p>\n", 200)),
		"css/site.css":   []byte(strings.Repeat("body { margin: 0 }\n", 100)),
		"js/app.js":      []byte(strings.Repeat("console.log('x');\n", 100)),
		"tiny.txt":       []byte("too small to gain"),
		"photo.jpg":      bytes.Repeat([]byte{0xff, 0xd8}, 4096), // not a text type
		"random.txt":     testutil.Pattern(4096),                 // incompressible: no variant kept
		"old.css.gz":     []byte("an existing .gz is never compressed again"),
		"deep/a/b/c.svg": []byte("<svg xmlns=\"http://www.w3.org/2000/svg\">" + strings.Repeat("<g/>", 300) + "</svg>"),
	}
	for name, b := range files {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, files
}

func gunzip(t *testing.T, b []byte) []byte {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func unbrotli(t *testing.T, b []byte) []byte {
	out, err := io.ReadAll(brotli.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDir(t *testing.T) {
	root, files := tree(t)
	st, err := precompress.Dir(root, precompress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// index.html, site.css, app.js, c.svg get both; random.txt gets none.
	if st.Files != 5 || st.Written != 8 || st.Dropped != 2 || st.Current != 0 {
		t.Fatalf("first run: %+v", st)
	}
	for _, name := range []string{"index.html", "css/site.css", "js/app.js", "deep/a/b/c.svg"} {
		p := filepath.Join(root, name)
		src, _ := os.Stat(p)
		gz, err := os.ReadFile(p + ".gz")
		if err != nil {
			t.Fatal(err)
		}
		br, err := os.ReadFile(p + ".br")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gunzip(t, gz), files[name]) || !bytes.Equal(unbrotli(t, br), files[name]) {
			t.Fatalf("%s: variants do not decode to the source", name)
		}
		for _, v := range []string{".gz", ".br"} {
			vi, _ := os.Stat(p + v)
			if !vi.ModTime().Equal(src.ModTime()) {
				t.Fatalf("%s%s: mtime %v, source %v", name, v, vi.ModTime(), src.ModTime())
			}
		}
	}
	for _, name := range []string{"tiny.txt", "photo.jpg", "random.txt", "old.css.gz"} {
		for _, v := range []string{".gz", ".br"} {
			if _, err := os.Stat(filepath.Join(root, name+v)); err == nil {
				t.Fatalf("%s%s should not exist", name, v)
			}
		}
	}
	// A second run finds everything current; an edited source is redone.
	st, err = precompress.Dir(root, precompress.Config{})
	if err != nil || st.Written != 0 || st.Current != 8 {
		t.Fatalf("second run: %+v %v", st, err)
	}
	p := filepath.Join(root, "css/site.css")
	edited := []byte(strings.Repeat("body { margin: 1px }\n", 100))
	os.WriteFile(p, edited, 0o644)
	later := time.Now().Add(time.Minute)
	os.Chtimes(p, later, later)
	st, err = precompress.Dir(root, precompress.Config{NoBrotli: true})
	if err != nil || st.Written != 1 {
		t.Fatalf("after an edit: %+v %v", st, err)
	}
	gz, _ := os.ReadFile(p + ".gz")
	if !bytes.Equal(gunzip(t, gz), edited) {
		t.Fatal("edited source: stale .gz")
	}
	if _, err := precompress.Dir(root, precompress.Config{GzipLevel: 12}); err == nil {
		t.Fatal("gzip level 12 accepted")
	}
}

// TestCurlCompressed serves a compressed tree with a node and fetches it
// with curl --compressed: the bytes after decoding must equal the source,
// and the node must have sent the precompressed variant.
func TestCurlCompressed(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed: skipped")
	}
	root, files := tree(t)
	if _, err := precompress.Dir(root, precompress.Config{}); err != nil {
		t.Fatal(err)
	}
	srv, err := node.New(node.Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, srv)
	for _, name := range []string{"index.html", "css/site.css", "js/app.js", "deep/a/b/c.svg", "random.txt"} {
		for _, ae := range []string{"", "gzip", "br"} {
			args := []string{"-sS", "--compressed", "-D", "-", "-o", filepath.Join(t.TempDir(), "out"), "http://" + addr + "/" + name}
			if ae != "" {
				args = append(args, "-H", "Accept-Encoding: "+ae)
			}
			cmd := exec.Command(curl, args...)
			head, err := cmd.Output()
			if err != nil {
				t.Fatalf("curl %v: %v", args, err)
			}
			got, _ := os.ReadFile(args[5])
			if !bytes.Equal(got, files[name]) {
				t.Fatalf("%s (%q): decoded %d bytes differ from the source's %d", name, ae, len(got), len(files[name]))
			}
			want := ae
			if ae == "" {
				want = "br" // curl --compressed offers deflate, gzip, br (and zstd)
			}
			if name == "random.txt" {
				want = ""
			}
			ce := ""
			for _, l := range strings.Split(string(head), "\r\n") {
				if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "content-encoding") {
					ce = strings.TrimSpace(v)
				}
			}
			if ce != want {
				t.Fatalf("%s (%q): Content-Encoding %q, want %q", name, ae, ce, want)
			}
		}
	}
}
