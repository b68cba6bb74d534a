package node

import (
	"encoding/json"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Status is the node's resource report, served as JSON at /.shoal/status and
// collected by the front-end (seed 002's resource-collection module; the
// dynamic-feedback policies of SPEC §3 read it).
type Status struct {
	ActiveConnections int64   `json:"active_connections"`
	Requests          int64   `json:"requests"`
	BytesSent         int64   `json:"bytes_sent"`
	CacheObjects      int     `json:"cache_objects"`
	CacheBytes        int64   `json:"cache_bytes"`
	CacheHitRatio     float64 `json:"cache_hit_ratio"`
	ByteHitRatio      float64 `json:"byte_hit_ratio"`
	CPUPercent        float64 `json:"cpu_percent"` // process CPU time over wall time since the previous report, 100 = one core
	RSSBytes          int64   `json:"rss_bytes"`
	Goroutines        int     `json:"goroutines"`
	HandoffSocket     string  `json:"handoff_socket"`
	ConnsRefused      int64   `json:"conns_refused"` // connections closed at once at Config.MaxConns, none idle
	IdleClosed        int64   `json:"idle_closed"`   // idle connections closed to make room at Config.MaxConns
}

// Status returns the current resource report. CPU percent is measured
// between successive calls (the first call measures since New).
func (s *Server) Status() Status {
	st := Status{
		ActiveConnections: s.active.Load(),
		Requests:          s.requests.Load(),
		BytesSent:         s.bytesSent.Load(),
		CPUPercent:        s.usage.cpuPercent(),
		RSSBytes:          rssBytes(),
		Goroutines:        runtime.NumGoroutine(),
		HandoffSocket:     s.cfg.HandoffSocket,
		ConnsRefused:      s.refused.Load(),
		IdleClosed:        s.shed.Load(),
	}
	if s.cache != nil {
		cs := s.cache.Stats()
		st.CacheObjects = s.cache.Len()
		st.CacheBytes = s.cache.Bytes()
		st.CacheHitRatio = cs.ObjectHitRatio()
		st.ByteHitRatio = cs.ByteHitRatio()
	}
	return st
}

func (s *Server) statusJSON() []byte {
	b, err := json.Marshal(s.Status())
	if err != nil { // cannot happen for this struct
		return []byte("{}")
	}
	return append(b, '\n')
}

// usageSampler turns getrusage(2) totals into a CPU percentage between
// samples.
type usageSampler struct {
	mu      sync.Mutex
	lastCPU time.Duration
	lastAt  time.Time
}

func (u *usageSampler) init() {
	u.lastCPU, u.lastAt = cpuTime(), time.Now()
}

func (u *usageSampler) cpuPercent() float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	cpu, now := cpuTime(), time.Now()
	wall := now.Sub(u.lastAt)
	d := cpu - u.lastCPU
	u.lastCPU, u.lastAt = cpu, now
	if wall <= 0 {
		return 0
	}
	return float64(d) / float64(wall) * 100
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssBytes reads the resident set size from /proc/self/statm (pages).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	i := 0
	for i < len(b) && b[i] != ' ' {
		i++
	}
	var pages int64
	for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		pages = pages*10 + int64(b[i]-'0')
	}
	return pages * int64(os.Getpagesize())
}
