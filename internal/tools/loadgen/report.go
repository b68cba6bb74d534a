package loadgen

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Latencies is the latency block of a report, in milliseconds.
type Latencies struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// LatenciesOf reads the report percentiles off a histogram.
func LatenciesOf(h *Histogram) Latencies {
	return Latencies{
		P50: ms(h.Quantile(0.50)), P90: ms(h.Quantile(0.90)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Max()), Mean: ms(h.Mean()),
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// ErrorCounts maps every error kind's name to its count (zeros included, so
// the JSON schema does not depend on what went wrong).
func ErrorCounts(e *[NumErrorKinds]uint64) map[string]uint64 {
	m := make(map[string]uint64, NumErrorKinds)
	for k := ErrorKind(0); k < NumErrorKinds; k++ {
		m[k.String()] = e[k]
	}
	return m
}

// Summary is the machine-readable report of an HTTP run: the object
// `shoal bench http --json` prints (the keys are the bench harness's
// contract).
type Summary struct {
	URL         string            `json:"url"`
	Mode        string            `json:"mode"` // "closed" or "open"
	Rate        float64           `json:"rate,omitempty"`
	Connections int               `json:"connections"`
	Requests    uint64            `json:"requests"` // complete responses, any status
	OK          uint64            `json:"ok"`       // 2xx and 3xx
	DurationS   float64           `json:"duration_s"`
	CPUS        float64           `json:"cpu_s"` // the load generator's CPU over the run
	RPS         float64           `json:"rps"`
	BytesPerSec float64           `json:"bytes_per_sec"` // response bytes incl. headers
	BodyBytes   int64             `json:"body_bytes"`
	Connects    uint64            `json:"connects"`
	Backlog     uint64            `json:"backlog,omitempty"` // open loop: due but never sent
	LatencyMS   Latencies         `json:"latency_ms"`
	Errors      map[string]uint64 `json:"errors"`
	ErrorsTotal uint64            `json:"errors_total"`
}

// Summarize turns a result into its report.
func Summarize(cfg Config, r *Result) Summary {
	s := Summary{
		URL: cfg.URL, Mode: "closed", Connections: cfg.Connections,
		Requests: r.Requests, OK: r.OK, DurationS: r.Duration.Seconds(), CPUS: r.CPU.Seconds(),
		RPS: r.RPS(), BytesPerSec: r.BytesPerSec(), BodyBytes: r.BodyBytes, Connects: r.Connects, Backlog: r.Backlog,
		LatencyMS: LatenciesOf(&r.Latency), Errors: ErrorCounts(&r.Errors),
	}
	if s.Connections <= 0 {
		s.Connections = 1
	}
	if cfg.Rate > 0 {
		s.Mode, s.Rate = "open", cfg.Rate
	}
	for _, n := range r.Errors {
		s.ErrorsTotal += n
	}
	return s
}

// WriteText prints the human-readable report.
func (s Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	mode := "closed loop"
	if s.Mode == "open" {
		mode = fmt.Sprintf("open loop at %.0f req/s (latency from intended send time)", s.Rate)
	}
	fmt.Fprintf(&b, "%s — %s, %d connections, %.2fs\n", s.URL, mode, s.Connections, s.DurationS)
	fmt.Fprintf(&b, "  requests    %d (ok %d), %d connections opened\n", s.Requests, s.OK, s.Connects)
	if s.Backlog > 0 {
		fmt.Fprintf(&b, "  backlog     %d requests were due but never sent (all connections busy); if that is well above\n"+
			"              the connection count the server fell behind the rate and the percentiles are optimistic\n", s.Backlog)
	}
	fmt.Fprintf(&b, "  throughput  %.1f req/s, %s/s\n", s.RPS, humanBytes(s.BytesPerSec))
	if s.Requests > 0 && s.CPUS > 0 {
		fmt.Fprintf(&b, "  own CPU     %.2fs, %.1f µs a request\n", s.CPUS, s.CPUS*1e6/float64(s.Requests))
	}
	l := s.LatencyMS
	fmt.Fprintf(&b, "  latency ms  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  mean %.3f\n",
		l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
	fmt.Fprintf(&b, "  errors      %d", s.ErrorsTotal)
	if s.ErrorsTotal > 0 {
		for k := ErrorKind(0); k < NumErrorKinds; k++ {
			if n := s.Errors[k.String()]; n > 0 {
				fmt.Fprintf(&b, "  %s %d", k, n)
			}
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

func humanBytes(x float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for x >= 1024 && i < len(units)-1 {
		x /= 1024
		i++
	}
	return fmt.Sprintf("%.2f %s", x, units[i])
}

// TCPSummary is the report of one concurrency level of `shoal bench tcp`.
type TCPSummary struct {
	Connections int               `json:"connections"`
	Ops         uint64            `json:"ops"`
	DurationS   float64           `json:"duration_s"`
	OpsPerSec   float64           `json:"ops_per_sec"`
	LatencyMS   Latencies         `json:"latency_ms"` // mean = mean time per operation
	Errors      map[string]uint64 `json:"errors"`
}

// SummarizeTCP turns a TCP level result into its report.
func SummarizeTCP(r *TCPResult) TCPSummary {
	return TCPSummary{
		Connections: r.Connections, Ops: r.Ops, DurationS: r.Duration.Seconds(), OpsPerSec: r.OpsPerSec(),
		LatencyMS: LatenciesOf(&r.Latency), Errors: ErrorCounts(&r.Errors),
	}
}
