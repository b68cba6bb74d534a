package front

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shoal/internal/cluster/node"
)

// TestRelayKeepsRepresentationHeaders checks that the relay passes the
// node's content negotiation and range answers through unchanged: Vary,
// Content-Encoding, ETag and Accept-Ranges on 200, multipart/byteranges on
// 206, 304 and 412 (Accept-Ranges and Vary must be correct on every path,
// including the front's relay).
func TestRelayKeepsRepresentationHeaders(t *testing.T) {
	root := t.TempDir()
	css := strings.Repeat("p { margin: 0 }\n", 64)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(css))
	w.Close()
	os.WriteFile(filepath.Join(root, "a.css"), []byte(css), 0o644)
	os.WriteFile(filepath.Join(root, "a.css.gz"), gz.Bytes(), 0o644)
	os.WriteFile(filepath.Join(root, "b.txt"), []byte("0123456789"), 0o644)
	addr, _, _ := startFront(t, Config{}, startNode(t, node.Config{Root: root}))
	cl := dialFront(t, addr)

	req := func(path, extra string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n"
	}
	resp, body := cl.do(req("/a.css", "Accept-Encoding: gzip\r\n"))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" ||
		resp.Header.Get("Accept-Ranges") != "bytes" || body != gz.String() {
		t.Fatalf("gzip through the relay: %d %v", resp.StatusCode, resp.Header)
	}
	gzTag := resp.Header.Get("ETag")
	resp, body = cl.do(req("/a.css", ""))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Vary") != "Accept-Encoding" || body != css {
		t.Fatalf("identity through the relay: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = cl.do(req("/a.css", "Accept-Encoding: gzip\r\nIf-None-Match: "+gzTag+"\r\n"))
	if resp.StatusCode != 304 || resp.Header.Get("Vary") != "Accept-Encoding" || resp.Header.Get("Accept-Ranges") != "" {
		t.Fatalf("304 through the relay: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = cl.do(req("/b.txt", "If-Match: \"nope\"\r\n"))
	if resp.StatusCode != 412 {
		t.Fatalf("If-Match through the relay: %d", resp.StatusCode)
	}
	resp, body = cl.do(req("/b.txt", "Range: bytes=0-1,5-6\r\n"))
	if resp.StatusCode != 206 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "multipart/byteranges; boundary=") ||
		!strings.Contains(body, "Content-Range: bytes 0-1/10\r\n\r\n01") || !strings.Contains(body, "Content-Range: bytes 5-6/10\r\n\r\n56") ||
		resp.Header.Get("Accept-Ranges") != "" {
		t.Fatalf("multi-range through the relay: %d %v %q", resp.StatusCode, resp.Header, body)
	}
}
