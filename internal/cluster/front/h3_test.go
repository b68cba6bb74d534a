package front

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// TestHTTP3 serves HTTP/3 on the UDP port of a TLS front and fetches
// through it with quic-go's client: a GET and a POST of unknown length
// reach the node (routed per request), the counters say HTTP/3, and the
// answers over TLS advertise HTTP/3 with Alt-Svc.
func TestHTTP3(t *testing.T) {
	node := reqBackendHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(body))
	})
	certs, err := LoadCerts([]CertFiles{selfSigned(t, t.TempDir(), "h3", "localhost", "127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	cfg := Config{AltSvc: AltSvcH3(port)}
	addr, s := h2Front(t, cfg, node)
	h3 := NewHTTP3(certs, func() *Server { return s })
	done := make(chan error, 1)
	go func() { done <- h3.Serve(pc) }()

	tr := &http3.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.Close()
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	base := "https://" + pc.LocalAddr().String()
	for _, tc := range []struct {
		method, path, body, want string
	}{
		{"GET", "/a", "", "GET /a "},
		{"POST", "/b", "hello over quic", "POST /b hello over quic"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		if tc.body == "" {
			req.Body = nil
		} else {
			req.ContentLength = -1
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 3 || string(got) != tc.want {
			t.Errorf("%s %s: %s %q, want HTTP/3 and %q", tc.method, tc.path, resp.Proto, got, tc.want)
		}
		if alt := resp.Header.Get("Alt-Svc"); alt != AltSvcH3(port) {
			t.Errorf("Alt-Svc over HTTP/3 %q", alt)
		}
	}
	if st := s.Stats().Protocols; st.H3Requests != 2 || st.H3Conns != 1 {
		t.Errorf("protocol stats %+v, want 2 HTTP/3 requests on 1 connection", st)
	}
	resp, err := h2Client(false).Get("https://" + addr + "/c")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if alt := resp.Header.Get("Alt-Svc"); alt != `h3=":`+strconv.Itoa(port)+`"; ma=86400` {
		t.Errorf("Alt-Svc over HTTP/2 %q", alt)
	}
	h3.Close()
	if err := <-done; err != ErrServerClosed {
		t.Errorf("Serve after Close: %v, want ErrServerClosed", err)
	}
}
