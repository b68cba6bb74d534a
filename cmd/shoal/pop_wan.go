//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"shoal/internal/admin"
	"shoal/internal/cdn/pop"
	"shoal/internal/cdn/wan"
	"shoal/internal/up"
)

// defaultMatrix is the delay matrix of `sudo shoal up --pops N`: PoPs on a
// line 15 ms RTT apart plus 10 ms, so that every pair differs.
func defaultMatrix(n int) wan.Matrix {
	m := wan.Matrix{RTT: make([][]float64, n)}
	for i := range n {
		m.RTT[i] = make([]float64, n)
		for j := range n {
			if i != j {
				m.RTT[i][j] = 10 + 15*float64(max(i-j, j-i))
			}
		}
	}
	return m
}

// runUpPopsWAN runs n `shoal pop` processes, each in its own network
// namespace of a WAN lab (internal/cdn/wan) with the default delay matrix; this
// host reaches them on 10.77.0.0/24.
func runUpPopsWAN(r popsRun) error {
	n := r.n
	dir, seedFile, err := popsSeed(n)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The PoPs' admin APIs are on WAN addresses, not loopback: reads need
	// the token too. One token for all, in the run's folder.
	tokenFile := filepath.Join(dir, "admin.token")
	token, err := admin.LoadOrCreateToken(tokenFile)
	if err != nil {
		return err
	}
	m := defaultMatrix(n)
	w, err := wan.Start(context.Background(), m)
	if err != nil {
		return fmt.Errorf("WAN lab: %w (sudo shoal up --pops N --loopback avoids it)", err)
	}
	var procs []*os.Process
	var origin *up.Origin
	stopAll := func(ctx context.Context) error {
		for _, p := range procs {
			p.Signal(os.Interrupt)
		}
		for _, p := range procs {
			p.Wait()
		}
		if origin != nil {
			origin.Shutdown(ctx)
		}
		return w.Close()
	}
	if r.origin == "" {
		// The origin is on this host, which the PoPs reach on the lab.
		if origin, err = up.StartOrigin(r.dataDir, wan.HostAddr.String()+":0", slog.Default()); err != nil {
			w.Close()
			return err
		}
		r.origin = origin.URL
		fmt.Printf("  origin: %s (a node serving the sample site, %s)\n", origin.URL, origin.Root)
	}
	st := popState{SeedFile: seedFile, Origin: r.origin}
	for i := range n {
		a := wan.Addr(i).String()
		args := []string{"pop", "--name", fmt.Sprintf("pop%d", i+1), "--seed-file", seedFile, "--peer", a + ":7946",
			"--listen", a + ":8080", "--admin", a + ":9090", "--admin-token-file", tokenFile, "--nodes", fmt.Sprint(r.nodes), "--cache-mb", fmt.Sprint(r.cacheMB), "--origin", r.origin}
		if r.dataDir != "" {
			args = append(args, "--data", r.dataDir)
		}
		if i > 0 {
			args = append(args, "--join", wan.Addr(0).String()+":7946")
		}
		cmd := w.Exec(context.Background(), i, exe, args...)
		logf, _ := os.Create(filepath.Join(dir, fmt.Sprintf("pop%d.log", i+1)))
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			stopAll(context.Background())
			return err
		}
		procs = append(procs, cmd.Process)
		adminURL := "http://" + a + ":9090"
		if err := waitJoined(adminURL, token, 60*time.Second); err != nil {
			b, _ := os.ReadFile(logf.Name())
			stopAll(context.Background())
			return fmt.Errorf("pop%d: %w: %s", i+1, err, b)
		}
		fmt.Printf("  pop%d: gateway http://%s:8080/  admin %s/pops  peer %s:7946  (netns %s)\n", i+1, a, adminURL, a, w.NS[i])
		st.PoPs = append(st.PoPs, popStateItem{Name: fmt.Sprintf("pop%d", i+1), Gateway: "http://" + a + ":8080/",
			Admin: adminURL, Peer: a + ":7946", PID: cmd.Process.Pid})
	}
	if err := waitRings(func() ([]ringMember, error) { return readRings(st, token) }, 60*time.Second); err != nil {
		stopAll(context.Background())
		return err
	}
	fmt.Printf("shoal is up: %d PoPs in a WAN lab (root): namespaces %s%s-*, RTT between pop i and j = 10 + 15·|i−j| ms;\n"+
		"  this host is %s on it; admin reads need the token: curl -H \"Authorization: Bearer $(cat %s)\" ADMIN/pops\n"+
		"  If shoal is killed: ip netns del <each namespace>. Ctrl-C stops it.\n", n, wan.Prefix, w.ID, wan.HostAddr, tokenFile)
	printTryCDN(st)
	if r.state != "" {
		b, _ := json.MarshalIndent(st, "", "  ")
		if err := os.WriteFile(r.state, append(b, '\n'), 0o644); err != nil {
			stopAll(context.Background())
			return fmt.Errorf("--state: %w", err)
		}
	}
	return waitAndStop(stopAll, nil)
}

// readRings reads each PoP's view size and Chord successor from its admin
// API.
func readRings(st popState, token string) ([]ringMember, error) {
	c := &http.Client{Timeout: time.Second}
	get := func(url string, v any) error {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		r, err := c.Do(req)
		if err != nil {
			return err
		}
		defer r.Body.Close()
		return json.NewDecoder(r.Body).Decode(v)
	}
	var ms []ringMember
	for _, p := range st.PoPs {
		var pv pop.PopsView
		var cv pop.ChordView
		if err := get(p.Admin+"/pops", &pv); err != nil {
			return nil, err
		}
		if err := get(p.Admin+"/chord", &cv); err != nil {
			return nil, err
		}
		id, _ := strconv.ParseUint(pv.ID, 16, 64)
		m := ringMember{id: id, members: pv.Members}
		if len(cv.Successors) > 0 {
			m.succ = uint64(cv.Successors[0].ID)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func waitJoined(adminURL, token string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", adminURL+"/pops", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if r, err := c.Do(req); err == nil {
			var v struct {
				Joined bool `json:"joined"`
			}
			json.NewDecoder(r.Body).Decode(&v)
			r.Body.Close()
			if v.Joined {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not joined after %v", limit)
}
