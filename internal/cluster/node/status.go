package node

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"shoal/internal/base/cache"
	"shoal/internal/base/procstat"
	"shoal/internal/base/store"
	"shoal/internal/cluster/peer"
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
	// CacheHits and CacheMisses are the cache's lookups (peers' included),
	// so that hit ratios can be summed over nodes exactly.
	CacheHits     int64   `json:"cache_hits"`
	CacheMisses   int64   `json:"cache_misses"`
	CPUPercent    float64 `json:"cpu_percent"` // process CPU time over wall time since the previous report, 100 = one core
	RSSBytes      int64   `json:"rss_bytes"`
	Goroutines    int     `json:"goroutines"`
	HandoffSocket string  `json:"handoff_socket"`
	// ContentVersion is the content tree's version: when it changes, the
	// front fetches the size index again (sizes.go).
	ContentVersion uint64 `json:"content_version"`
	// InService is the number of requests being answered now; BusyPercent
	// the time spent answering requests (summed over connections) over the
	// wall time since the previous report, 100 = one request in service all
	// along. Both are this node's own even when nodes share a process
	// (SharedProcess), unlike CPUPercent, which is the process's. CPUs is
	// GOMAXPROCS, the cores CPUPercent is spread over.
	InService     int64   `json:"in_service"`
	BusyPercent   float64 `json:"busy_percent"`
	CPUs          int     `json:"cpus"`
	SharedProcess bool    `json:"shared_process"`
	ConnsRefused  int64   `json:"conns_refused"` // connections closed at once at Config.MaxConns, none idle
	IdleClosed    int64   `json:"idle_closed"`   // idle connections closed to make room at Config.MaxConns
	// SiteVersion is the published site version served (0: the tree the
	// node started with), so an operator can see every node switched.
	SiteVersion uint64 `json:"site_version"`
	// BusyNanos is BusyPercent's numerator since start: the time spent
	// answering requests, summed over connections, in nanoseconds. Its
	// growth over that of Requests is the node's mean time on a request,
	// what the simulator is calibrated with (sim.Measured.NodeBusy).
	BusyNanos int64 `json:"busy_ns"`
	// Served counts the file bytes answered and those that came from a
	// memory (this node's cache or a peer's), inline as object_bytes and
	// memory_bytes: the cluster's byte hit ratio is their sums' quotient.
	cache.Served
	// Peer counts fetches from peers' memories and the cache digests
	// exchanged (peer.go); absent when peer cooperation is off.
	Peer *peer.Stats `json:"peer,omitempty"`
	// Edge counts a cache-mode node's hits, misses, revalidations and
	// upstream bytes (edge.go); absent when cache mode is off.
	Edge *EdgeStats `json:"edge,omitempty"`
	// Memory is how the node's memory was planned and what its object
	// store holds, by tier.
	Memory *MemoryStatus `json:"memory,omitempty"`
}

// MemoryStatus is the memory part of Status: the plan the node was
// started with (from its cgroup's limit, or flags), the Go runtime's
// memory limit in force, and the object store's counters.
type MemoryStatus struct {
	Plan    store.Plan  `json:"plan"`
	GoLimit int64       `json:"go_limit_bytes"`
	Store   store.Stats `json:"store"`
	// GCCPUSeconds is the Go collector's CPU time since the process
	// started (runtime/metrics' estimate), CPUSeconds the process's
	// (getrusage): their quotient between two reports is the share of the
	// CPU the collector took. HeapBytes is the Go heap in use.
	GCCPUSeconds float64 `json:"gc_cpu_seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	HeapBytes    int64   `json:"heap_bytes"`
}

// goMetrics are the runtime/metrics samples MemoryStatus reports.
var goMetrics = [...]string{"/cpu/classes/gc/total:cpu-seconds", "/memory/classes/heap/objects:bytes"}

// memoryStatus reads the memory part of the status.
func (s *Server) memoryStatus(st store.Stats) *MemoryStatus {
	ms := &MemoryStatus{Plan: s.cfg.Memory, Store: st, GoLimit: debug.SetMemoryLimit(-1), CPUSeconds: procstat.CPU().Seconds()}
	var samples [len(goMetrics)]metrics.Sample
	for i, name := range goMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples[:])
	if v := samples[0].Value; v.Kind() == metrics.KindFloat64 {
		ms.GCCPUSeconds = v.Float64()
	}
	if v := samples[1].Value; v.Kind() == metrics.KindUint64 {
		ms.HeapBytes = int64(v.Uint64())
	}
	return ms
}

// Status returns the current resource report. CPU percent is measured
// between successive calls (the first call measures since New).
func (s *Server) Status() Status {
	st := Status{
		ActiveConnections: s.active.Load(),
		Requests:          s.requests.Load(),
		BytesSent:         s.bytesSent.Load(),
		InService:         s.inService.Load(),
		CPUs:              runtime.GOMAXPROCS(0),
		SharedProcess:     s.cfg.SharedProcess,
		RSSBytes:          procstat.RSS(),
		Goroutines:        runtime.NumGoroutine(),
		HandoffSocket:     s.cfg.HandoffSocket,
		ConnsRefused:      s.refused.Load(),
		IdleClosed:        s.shed.Load(),
		SiteVersion:       s.SiteVersion(),
	}
	if s.store != nil {
		st.ContentVersion = s.store.Version()
	}
	if s.edge != nil {
		es := s.edge.Stats()
		st.Edge = &es
	}
	mem := s.memoryBytes.Load() // first: every memory byte was an object byte before
	st.Served = cache.Served{ObjectBytes: s.objectBytes.Load(), MemoryBytes: mem}
	st.BusyNanos = s.busy.Load()
	st.CPUPercent, st.BusyPercent = s.usage.percents(st.BusyNanos)
	if s.peer != nil {
		ps := s.peer.Stats()
		st.Peer = &ps
	}
	ost := s.objs.Stats()
	st.CacheObjects, st.CacheBytes = ost.MemoryObjects, ost.MemoryBytes
	st.CacheHits, st.CacheMisses = ost.MemoryHits, ost.Misses+ost.DiskHits
	cs := cache.Stats{Hits: st.CacheHits, Misses: st.CacheMisses, HitBytes: ost.MemoryHitBytes, MissBytes: ost.MissBytes}
	st.CacheHitRatio, st.ByteHitRatio = cs.ObjectHitRatio(), cs.ByteHitRatio()
	st.Memory = s.memoryStatus(ost)
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
	mu       sync.Mutex
	lastCPU  time.Duration
	lastBusy int64 // Server.busy at the last sample
	lastAt   time.Time
}

func (u *usageSampler) init() {
	u.lastCPU, u.lastAt = procstat.CPU(), time.Now()
}

// percents returns the process CPU and the node's busy time (busy, the
// nanoseconds spent answering requests so far) as percentages of the wall
// time since the previous sample.
func (u *usageSampler) percents(busy int64) (cpu, busyPct float64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, now := procstat.CPU(), time.Now()
	wall := now.Sub(u.lastAt)
	d, b := c-u.lastCPU, busy-u.lastBusy
	u.lastCPU, u.lastBusy, u.lastAt = c, busy, now
	if wall <= 0 {
		return 0, 0
	}
	return float64(d) / float64(wall) * 100, float64(b) / float64(wall) * 100
}
