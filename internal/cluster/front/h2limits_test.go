package front

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Raw is a hand-driven HTTP/2 client over h2c, for what a well-behaved
// client library will not send.
type h2Raw struct {
	t   *testing.T
	c   net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

func dialH2Raw(t *testing.T, addr string) *h2Raw {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := &h2Raw{t: t, c: c, fr: http2.NewFramer(c, c)}
	r.enc = hpack.NewEncoder(&r.buf)
	io.WriteString(c, h2Preface)
	r.fr.WriteSettings()
	return r
}

// block encodes a GET of path.
func (r *h2Raw) block(path string) []byte {
	r.buf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
		r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return append([]byte(nil), r.buf.Bytes()...)
}

// goaway reads frames until GOAWAY (returned) or the connection ends
// (nil); data counts the DATA bytes read on the way.
func (r *h2Raw) goaway() (g *http2.GoAwayFrame, data int) {
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			return nil, data
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return f, data
		case *http2.DataFrame:
			data += len(f.Data())
		}
	}
}

// TestH2RapidReset opens streams and resets each at once (CVE-2023-44487):
// the front sends GOAWAY ENHANCE_YOUR_CALM once the resets pass MaxGlitches
// and outnumber half its streams, and counts them.
func TestH2RapidReset(t *testing.T) {
	slow := reqBackendHTTP(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(50 * time.Millisecond) })
	addr, s, _ := startFront(t, Config{H2C: true, HTTP2: H2Config{MaxGlitches: 50}}, slow)
	r := dialH2Raw(t, addr)
	for id := uint32(1); id < 2*400; id += 2 {
		if r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block("/"), EndStream: true, EndHeaders: true}) != nil {
			break // the front hung up
		}
		if r.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break
		}
	}
	g, _ := r.goaway()
	if g == nil || g.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", g)
	}
	if st := s.Stats().Protocols; st.H2Glitches <= 50 || st.H2Errors != 1 {
		t.Errorf("glitches %d, errors %d; want > 50 and 1", st.H2Glitches, st.H2Errors)
	}
}

// TestH2ContinuationFlood sends a header block in endless CONTINUATION
// frames (CVE-2024-27316): the front stops it at MaxHeaderFrames.
func TestH2ContinuationFlood(t *testing.T) {
	a := namedBackend(t, "a")
	addr, _, _ := startFront(t, Config{H2C: true}, a.URL)
	r := dialH2Raw(t, addr)
	blk := r.block("/")
	r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:1], EndStream: true})
	for i := 0; i < 1000; i++ {
		if r.fr.WriteContinuation(1, false, []byte{}) != nil {
			break
		}
	}
	g, _ := r.goaway()
	if g == nil || g.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", g)
	}
}

// TestH2StreamLimit opens one stream more than MaxConcurrentStreams while
// the others wait on a slow node: that one is refused (REFUSED_STREAM),
// the rest are answered.
func TestH2StreamLimit(t *testing.T) {
	slow := reqBackendHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		io.WriteString(w, "ok")
	})
	addr, s, _ := startFront(t, Config{H2C: true, HTTP2: H2Config{MaxConcurrentStreams: 3}}, slow)
	r := dialH2Raw(t, addr)
	for id := uint32(1); id <= 7; id += 2 {
		r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block("/"), EndStream: true, EndHeaders: true})
	}
	refused, ended := 0, 0
	for ended < 3 {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d answers: %v", ended, err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.ErrCode == http2.ErrCodeRefusedStream && f.StreamID == 7 {
				refused++
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				ended++
			}
		}
	}
	if refused != 1 || s.Stats().Protocols.H2Refused != 1 {
		t.Errorf("refused %d (counted %d), want stream 7 refused once", refused, s.Stats().Protocols.H2Refused)
	}
}

// TestH2GoawayOnShutdown: Shutdown sends GOAWAY NO_ERROR naming the last
// stream taken, lets that stream's response finish, then closes.
func TestH2GoawayOnShutdown(t *testing.T) {
	slow := reqBackendHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		io.WriteString(w, "finished")
	})
	addr, s, _ := startFront(t, Config{H2C: true}, slow)
	r := dialH2Raw(t, addr)
	r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("/"), EndStream: true, EndHeaders: true})
	time.Sleep(100 * time.Millisecond) // the stream reaches the node
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	g, n := r.goaway()
	if g == nil || g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 1 {
		t.Fatalf("GOAWAY %+v, want NO_ERROR with last stream 1", g)
	}
	_, n2 := r.goaway() // reads on to the close
	if n+n2 != len("finished") {
		t.Errorf("%d body bytes around the GOAWAY, want %d", n+n2, len("finished"))
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
