package cdnsim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"shoal/internal/base/trace"
)

// Request is one client request of the workload: when (from the start of
// the workload), from which location, for which URL.
type Request struct {
	At     time.Duration
	Client int // location index
	Host   string
	URL    string
	Size   int64
}

// Workload is the requests in time order and the number of distinct clients.
type Workload struct {
	Requests []Request
	Clients  int
}

// locate maps a client name to a location by a seeded hash: real traces
// name hosts, not places, so every client stands at a location drawn
// uniformly and reproducibly (the same host and seed, the same place).
func locate(host string, seed uint64, locations int) int {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(host))
	return int(h.Sum64() % uint64(locations))
}

// FromSource reads a trace (or a synthetic generator) into a workload for a
// matrix of locations: GET requests answered 2xx or 304 (what a CDN would
// serve), clients placed by locate. limit > 0 keeps only that much time.
func FromSource(src trace.Source, locations int, seed uint64, limit time.Duration) (*Workload, error) {
	w := &Workload{}
	clients := map[string]bool{}
	var start time.Time
	for {
		r, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, trace.ErrMalformed) {
				continue
			}
			return nil, fmt.Errorf("workload: %w", err)
		}
		if r.Method != "GET" || !(r.Status >= 200 && r.Status < 300 || r.Status == 304) {
			continue
		}
		if start.IsZero() {
			start = r.Time
		}
		at := r.Time.Sub(start)
		if limit > 0 && at > limit {
			break
		}
		if !clients[r.Host] {
			clients[r.Host] = true
		}
		w.Requests = append(w.Requests, Request{At: at, Client: locate(r.Host, seed, locations), Host: r.Host, URL: r.URL, Size: max(r.Bytes, 0)})
	}
	w.Clients = len(clients)
	if len(w.Requests) == 0 {
		return nil, fmt.Errorf("workload: no GET request answered 2xx/304")
	}
	return w, nil
}

// Zipf is a synthetic workload: Synth's Zipf popularity and heavy-tailed
// sizes, requests from clients hosts "c0".."c<clients-1>" drawn uniformly.
func Zipf(s trace.Synth, clients, locations int, seed uint64) (*Workload, error) {
	g, err := s.New()
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x21bf))
	var names []string
	for i := range max(clients, 1) {
		names = append(names, "c"+strconv.Itoa(i))
	}
	w, err := FromSource(&hostSetter{g: g, rng: rng, names: names}, locations, seed, 0)
	if err != nil {
		return nil, err
	}
	return w, nil
}

type hostSetter struct {
	g     *trace.Gen
	rng   *rand.Rand
	names []string
}

func (h *hostSetter) Next() (trace.Record, error) {
	r, err := h.g.Next()
	r.Host = h.names[h.rng.IntN(len(h.names))]
	return r, err
}
