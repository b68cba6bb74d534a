package node

import "testing"

// TestEchoesFrontToken: every kind of answer (memory hit, miss, sendfile,
// 304, 404, 405) carries the front's token back; a value fronts do not
// write is not echoed.
func TestEchoesFrontToken(t *testing.T) {
	_, _, c := startSite(t)
	for _, tc := range []struct {
		name, req string
		head      bool
		status    int
		want      string
	}{
		{"miss", get("/hello.txt", "Shoal-Seq: 9f3a\r\n"), false, 200, "9f3a"},
		{"hit", get("/hello.txt", "shoal-seq: 1\r\n"), false, 200, "1"},
		{"sendfile", get("/big.bin", "Shoal-Seq: ffffffffffffffff\r\n"), false, 200, "ffffffffffffffff"},
		{"head", "HEAD /1k.bin HTTP/1.1\r\nHost: test\r\nShoal-Seq: 2b\r\n\r\n", true, 200, "2b"},
		{"not modified", get("/hello.txt", "If-None-Match: *\r\nShoal-Seq: 3c\r\n"), true, 304, "3c"},
		{"missing", get("/nope", "Shoal-Seq: 4d\r\n"), false, 404, "4d"},
		{"method", "DELETE /hello.txt HTTP/1.1\r\nHost: test\r\nShoal-Seq: 5e\r\n\r\n", false, 405, "5e"},
		{"none", get("/hello.txt"), false, 200, ""},
		{"uppercase", get("/hello.txt", "Shoal-Seq: 9F\r\n"), false, 200, ""},
		{"too long", get("/hello.txt", "Shoal-Seq: 11111111111111111\r\n"), false, 200, ""},
		{"not hex", get("/hello.txt", "Shoal-Seq: 12g\r\n"), false, 200, ""},
	} {
		c.send(tc.req)
		r := c.read(tc.head)
		if r.status != tc.status || r.h.Get("Shoal-Seq") != tc.want || len(r.h.Values("Shoal-Seq")) > 1 {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.h.Values("Shoal-Seq"), tc.status, tc.want)
		}
	}
}
