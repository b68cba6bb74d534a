package loadgen

import (
	"errors"
	"fmt"
)

// The engines a run can use (Config.Engine).
const (
	EngineGoroutines = "goroutines"
	EngineRing       = "uring"
)

// maxRingConns keeps a uring run's queue (two entries a connection) within
// the kernel's 32,768.
const maxRingConns = 1 << 13

// checkEngine validates cfg.Engine for a URL of the given scheme and fills
// the default.
func checkEngine(cfg *Config, scheme string) error {
	switch cfg.Engine {
	case "", EngineGoroutines:
		cfg.Engine = EngineGoroutines
		return nil
	case EngineRing:
	default:
		return fmt.Errorf("engine %q: %q or %q", cfg.Engine, EngineGoroutines, EngineRing)
	}
	switch {
	case scheme != "http":
		return errors.New("engine uring: plain http only (TLS runs use the goroutines engine)")
	case cfg.Rate > 0:
		return errors.New("engine uring: closed loop only (a --rate run uses the goroutines engine)")
	case cfg.DisableKeepAlive:
		return errors.New("engine uring: keep-alive connections only")
	case cfg.Connections > maxRingConns:
		return fmt.Errorf("engine uring: at most %d connections", maxRingConns)
	}
	return nil
}

// errRingFraming is a response the uring engine cannot frame: it reads
// Content-Length bodies only, so a chunked or close-delimited answer ends
// the run with this error rather than a miscount.
var errRingFraming = errors.New("engine uring: the server sent a chunked or close-delimited body; run with --engine goroutines")
