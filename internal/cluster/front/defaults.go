package front

import (
	"time"

	"shoal/internal/base/httpwire"
)

// DefaultConfig returns the data plane's defaults, the values Config's
// zero fields take: the one place they are written, which
// internal/config shows in `shoal front --print-config`. MaxClientConns
// is left 0: its default depends on RLIMIT_NOFILE (DefaultMaxClientConns).
func DefaultConfig() Config {
	return Config{
		MaxHeadBytes:    httpwire.DefaultMaxHead,
		HeaderTimeout:   10 * time.Second,
		IdleTimeout:     60 * time.Second,
		WriteTimeout:    60 * time.Second,
		MaxConnsPerIP:   DefaultMaxConnsPerIP,
		DialTimeout:     3 * time.Second,
		ResponseTimeout: 60 * time.Second,
		PoolIdle:        30 * time.Second,
		PoolSize:        128,
		QueueLen:        1024,
		QueueTimeout:    5 * time.Second,
		Hybrid:          DefaultHybridConfig(),
		HTTP2:           DefaultH2Config(),
	}
}

// DefaultHybridConfig returns the hybrid rule's thresholds (seed 002 §3's
// CPU threshold, seed 001's T and S), which HybridConfig's zero fields take.
func DefaultHybridConfig() HybridConfig {
	return HybridConfig{CPUPercent: 30, ActiveConns: 130, MinSize: 100 << 10, SampleEvery: 100 * time.Millisecond}
}

// DefaultRepairPort is the nodes' repair handoff port (shoal node
// --repair-listen) RepairConfig.Port defaults to.
const DefaultRepairPort = 7070
