package control

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// CheckConfig tunes active health checks, with HAProxy's meaning of rise and
// fall: a node goes down after Fall consecutive failed checks and comes back
// after Rise consecutive good ones.
type CheckConfig struct {
	// Interval between checks of one node. Default 1s.
	Interval time.Duration
	// Timeout of one check. Default Interval, at least 1 s (HAProxy uses
	// inter as the check timeout): a node busy serving large files must not
	// be declared dead because its status page took 100 ms.
	Timeout time.Duration
	// Rise is the number of good checks that bring a down node up. Default 2.
	Rise int
	// Fall is the number of failed checks that take an up node down. Default 3.
	Fall int
	// Path is the status path. Default "/.shoal/status".
	Path string
}

// DefaultCheckConfig returns the health checks' defaults, which
// CheckConfig's zero fields take (Timeout follows Interval).
func DefaultCheckConfig() CheckConfig {
	return CheckConfig{Interval: time.Second, Rise: 2, Fall: 3, Path: "/.shoal/status"}
}

func (cc *CheckConfig) defaults() {
	d := DefaultCheckConfig()
	if cc.Interval <= 0 {
		cc.Interval = d.Interval
	}
	if cc.Timeout <= 0 {
		cc.Timeout = max(cc.Interval, time.Second)
	}
	if cc.Rise <= 0 {
		cc.Rise = d.Rise
	}
	if cc.Fall <= 0 {
		cc.Fall = d.Fall
	}
	if cc.Path == "" {
		cc.Path = d.Path
	}
}

// Check runs active health checks on every node until ctx ends. Each check
// fetches the node's status report, which also feeds the node's load into
// the policy view (seed 002's resource-collection module; seed 004's dynamic
// feedback).
func (c *Cluster) Check(ctx context.Context, cfg CheckConfig) {
	cfg.defaults()
	client := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	type streak struct {
		good, bad int
		mark      uint64        // downMarks when good started counting
		prev      time.Duration // start of the previous round with a report
		seen      bool          // prev is set
	}
	streaks := map[*Backend]*streak{}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		bs := c.Backends()
		round := c.clock()
		var wg sync.WaitGroup
		results := make([]*Status, len(bs))
		marks := make([]uint64, len(bs))
		for i, b := range bs {
			marks[i] = b.downMarks.Load()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := fetchStatus(ctx, client, b.URL+cfg.Path)
				if err == nil {
					results[i] = s
					c.refreshSizes(ctx, client, b, s.ContentVersion)
				}
			}()
		}
		wg.Wait()
		for i, b := range bs {
			st := streaks[b]
			if st == nil {
				st = &streak{}
				streaks[b] = st
			}
			// Marked down since the streak began (a failed request): Rise
			// good checks start again, and a check that was in flight
			// when it happened does not count.
			now := b.downMarks.Load()
			if now != st.mark {
				st.good, st.mark = 0, now
			}
			if s := results[i]; s != nil {
				if marks[i] == now {
					st.good++
				}
				st.bad = 0
				c.SetStatus(b.Index, s)
				if st.seen {
					c.reconcileHeld(b.Index, s.ActiveConnections, st.prev) // held.go
				}
				st.prev, st.seen = round, true
				if st.good >= cfg.Rise {
					c.SetUp(b.Index, true)
				}
			} else {
				st.good, st.bad = 0, st.bad+1
				if st.bad >= cfg.Fall {
					c.SetUp(b.Index, false)
				}
			}
		}
		select {
		case <-ctx.Done():
			client.CloseIdleConnections()
			return
		case <-t.C:
		}
	}
}

func fetchStatus(ctx context.Context, client *http.Client, url string) (*Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("health %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("health %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("health %s: status %d", url, resp.StatusCode)
	}
	var s Status
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&s); err != nil {
		return nil, fmt.Errorf("health %s: %w", url, err)
	}
	return &s, nil
}
