package front

import (
	"testing"

	"shoal/internal/testutil"
)

// TestH2Spec runs h2spec --strict against a TLS front and an h2c one.
// Over h2c the listener also takes HTTP/1.1, so h2spec's "invalid
// connection preface" is a malformed HTTP/1.1 request to it, answered 400
// before the close h2spec waits for: the one case allowed to fail there.
func TestH2Spec(t *testing.T) {
	a := namedBackend(t, "a")
	addr, _ := h2Front(t, Config{}, a.URL)
	testutil.H2Spec(t, addr, true)
	addr2, _, _ := startFront(t, Config{H2C: true}, a.URL)
	testutil.H2Spec(t, addr2, false, "Sends invalid connection preface")
}
