package content

import "testing"

// TestNginxTypes checks extensions that only nginx's mime.types knows (Go's
// built-in table and a bare Debian host do not), and that the pinned web
// types still win.
func TestNginxTypes(t *testing.T) {
	cases := map[string]string{
		".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		".7z":   "application/x-7z-compressed",
		".m3u8": "application/vnd.apple.mpegurl",
		".ts":   "video/mp2t",
		".kml":  "application/vnd.google-earth.kml+xml",
		".JAR":  "application/java-archive",
		".js":   "text/javascript; charset=utf-8", // pinned (RFC 9239), nginx says application/javascript
		".ico":  "image/vnd.microsoft.icon",       // pinned (IANA), nginx says image/x-icon
		".nope": DefaultContentType,
		// In the host's /etc/mime.types (Debian: audio/x-wav, image/x-xbitmap)
		// but not in nginx's: the host's table is not read, so every node
		// answers as nginx does.
		".wav": DefaultContentType,
		".xbm": DefaultContentType,
		"":     DefaultContentType,
	}
	for ext, want := range cases {
		if got := contentType(ext); got != want {
			t.Errorf("contentType(%q) = %q, want %q", ext, got, want)
		}
	}
}
