package trace

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// loadNASA returns the decompressed NASA trace, or skips.
func loadNASA(b *testing.B) []byte {
	p := filepath.Join("..", "..", "..", "..", "shared", "data", "traces", "nasa_aug95_19950801_fullday_derived.log.gz")
	f, err := os.Open(p)
	if err != nil {
		b.Skipf("NASA trace absent: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkParseLine parses one typical CLF line (allocates Host and URL).
func BenchmarkParseLine(b *testing.B) {
	line := []byte(`in24.inetnebr.com - - [01/Aug/1995:00:00:01 -0400] "GET /shuttle/missions/sts-68/news/sts-68-mcc-05.txt HTTP/1.0" 200 1839`)
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := ParseLine(line, CLF); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkReaderNASA streams the whole decompressed NASA trace through a
// Reader (interned strings); allocs/op and lines/s are per trace line.
func BenchmarkReaderNASA(b *testing.B) {
	data := loadNASA(b)
	lines := bytes.Count(data, []byte{'\n'})
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), Auto)
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != lines {
			b.Fatalf("%d records, want %d", n, lines)
		}
	}
	b.ReportMetric(float64(b.N*lines)/b.Elapsed().Seconds(), "lines/s")
}

func BenchmarkAppendCLF(b *testing.B) {
	r := Record{Host: "in24.inetnebr.com", Time: time.Date(1995, 8, 1, 0, 0, 1, 0, edt), Method: "GET",
		URL: "/shuttle/missions/sts-68/news/sts-68-mcc-05.txt", Proto: "HTTP/1.0", Status: 200, Bytes: 1839}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCLF(buf[:0], r)
	}
}

func BenchmarkSynthNext(b *testing.B) {
	g, err := Synth{Files: 100000, Requests: 1 << 62, Seed: 1}.New()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
