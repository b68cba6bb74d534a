package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFrontRefusalsVisible runs `shoal front --max-conns-per-ip 4` and
// opens five connections from one address: the fifth is answered 503 by
// the front itself, and that answer shows everywhere an operator looks —
// /stats (status 5xx, sent_5xx, answers.per_ip), /metrics
// (shoal_front_answers_total), the dashboard's data and the access log
// (a line with the status and the reason). A load test once got 26 % of
// such 503s with only refused_per_ip counting them.
func TestFrontRefusalsVisible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	exe := buildShoal(t)
	site, _ := helloSite(t)
	n := startChild(t, exe, "node", "--root", site, "--listen", "127.0.0.1:0")
	nodeURL := "http://" + field(n.waitLine(t, "node serving"), "addr")
	log := filepath.Join(t.TempDir(), "access.log")
	adminAddr := freeAddr(t)
	f := startChild(t, exe, "front", "--nodes", nodeURL, "--listen", "127.0.0.1:0", "--admin", adminAddr,
		"--max-conns-per-ip", "4", "--access-log", log, "--access-log-format", "json")
	addr := field(f.waitLine(t, "msg=serving"), "addr")

	var conns []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v %v", len(conns), resp, err)
		}
		resp.Body.Close()
		conns = append(conns, c)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("fifth connection: %v %v, want 503", resp, err)
	}
	resp.Body.Close()

	admin := "http://" + adminAddr
	var st struct {
		Status  map[string]uint64 `json:"status"`
		Sent5xx uint64            `json:"sent_5xx"`
		PerIP   uint64            `json:"refused_per_ip"`
		Answers map[string]uint64 `json:"answers"`
	}
	if err := json.Unmarshal([]byte(getBody(t, admin+"/stats")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Status["5xx"] != 1 || st.Sent5xx != 1 || st.PerIP != 1 || st.Answers["per_ip"] != 1 {
		t.Errorf("/stats: 5xx %d, sent_5xx %d, refused_per_ip %d, answers.per_ip %d; want 1 each",
			st.Status["5xx"], st.Sent5xx, st.PerIP, st.Answers["per_ip"])
	}
	var dash struct {
		Stats struct {
			Status  map[string]uint64 `json:"status"`
			Answers map[string]uint64 `json:"answers"`
		} `json:"stats"`
	}
	if err := json.Unmarshal([]byte(getBody(t, admin+"/dashboard.json")), &dash); err != nil {
		t.Fatal(err)
	}
	if dash.Stats.Status["5xx"] != 1 || dash.Stats.Answers["per_ip"] != 1 {
		t.Errorf("dashboard: 5xx %d, answers.per_ip %d; want 1, 1", dash.Stats.Status["5xx"], dash.Stats.Answers["per_ip"])
	}
	metrics := getBody(t, admin+"/metrics")
	for _, want := range []string{`shoal_front_answers_total{class="5xx",reason="per_ip"} 1`, `shoal_front_responses_total{class="5xx"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	f.stop(t) // flushes the access log
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if m["status"] == 503.0 && m["reason"] == "per_ip" {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("access log has %d per_ip 503 lines, want 1:\n%s", refused, b)
	}
}
