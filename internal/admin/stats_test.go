package admin

import (
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"shoal/internal/cluster/front"
)

// TestStatsKeys: /stats names every counter in snake_case and labels the
// responses by status class, as the rest of the API does (consistent
// names). Each row is a key path into the JSON and the value the
// front's counters put there.
func TestStatsKeys(t *testing.T) {
	cl, srv := setup(t)
	m := NewMetrics(cl, "table")
	st := front.Stats{ConnsAccepted: 3, ConnsActive: 2, Requests: 40, Sent5xx: 1, BytesOut: 5000,
		QueueTimeouts: 4, Status: [6]uint64{0, 1, 30, 6, 2, 1},
		Paths:   map[string]uint64{"relay": 39, "passfd": 1},
		Handoff: front.HandoffStats{Passed: 1, FallbackNoSocket: 2, HybridCPU: 7, HybridRelay: 9},
		Repair:  &front.RepairStats{Moved: 5, Fast: 3, FallbackFreeze: 1, Forged: 8}}
	m.WatchFront(func() front.Stats { return st })
	srv.Config.Handler = NewConfig(cl, m, Config{Token: testToken})
	code, body := call(t, "GET", srv.URL+"/stats", "")
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("GET /stats = %d %v %s", code, err, body)
	}
	for _, c := range []struct {
		path string
		want float64
	}{
		{"conns_accepted", 3}, {"conns_active", 2}, {"requests", 40}, {"sent_5xx", 1}, {"bytes_out", 5000},
		{"queue_timeouts", 4},
		{"status.1xx", 1}, {"status.2xx", 30}, {"status.3xx", 6}, {"status.4xx", 2}, {"status.5xx", 1},
		{"paths.relay", 39}, {"paths.passfd", 1},
		{"handoff.passed", 1}, {"handoff.fallback_no_socket", 2}, {"handoff.hybrid.cpu", 7}, {"handoff.hybrid.relay", 9},
		{"repair.moved", 5}, {"repair.moved_fast", 3}, {"repair.fallback_freeze", 1}, {"repair.refused_forged", 8},
	} {
		var v any = got
		for _, k := range strings.Split(c.path, ".") {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		if n, ok := v.(float64); !ok || n != c.want {
			t.Errorf("/stats %s = %v, want %v", c.path, v, c.want)
		}
	}
	for k := range got {
		if strings.ToLower(k) != k {
			t.Errorf("/stats key %q is not snake_case", k)
		}
	}
	if status, _ := got["status"].(map[string]any); status["0xx"] != nil {
		t.Error(`/stats has a "0xx" status class`)
	}
}

// TestStatsCoversFrontStats: every counter of front.Stats reaches /stats.
// It fills each number with a distinct value, by reflection, and looks for
// every value in the JSON, so a counter added to front.Stats but not to
// Stats (FrontStats) fails here by name.
func TestStatsCoversFrontStats(t *testing.T) {
	st, fields := filledFrontStats(t)
	b, err := json.Marshal(FrontStats(st))
	if err != nil {
		t.Fatal(err)
	}
	var nums []uint64
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case float64:
			nums = append(nums, uint64(v))
		}
	}
	var doc any
	json.Unmarshal(b, &doc)
	walk(doc)
	seen := map[uint64]bool{}
	for _, n := range nums {
		seen[n] = true
	}
	for i, f := range fields {
		if !seen[uint64(1007+7*i)] {
			t.Errorf("front.Stats%s is not in /stats; add it to admin.Stats and FrontStats", f)
		}
	}
}

// TestSetWeightBody: PUT /nodes/{i}/weight takes the JSON object or a bare
// number, and refuses anything else with a message saying what
// it wants. Each row starts from weight 1.
func TestSetWeightBody(t *testing.T) {
	cl, srv := setup(t)
	for _, c := range []struct {
		body     string
		code     int
		contains string
		weight   int // node 0's weight after the call
	}{
		{`5`, 200, `"weight": 5`, 5},
		{" 0\n", 200, `"weight": 0`, 0},
		{`{"weight": 3}`, 200, `"weight": 3`, 3},
		{`{"weight": 0}`, 200, `"weight": 0`, 0},
		{`-1`, 400, "negative", 1},
		{`2.5`, 400, "whole number", 1},
		{`1e3`, 400, "whole number", 1},
		{`"5"`, 400, `want N or {\"weight\": N}`, 1},
		{`[5]`, 400, `want N or {\"weight\": N}`, 1},
		{`5 6`, 400, "after the weight", 1},
		{`{}`, 400, `want N or {\"weight\": N}`, 1},
		{`{"weight": 2, "extra": 1}`, 400, "unknown field", 1},
		{`{"weight": 2}{`, 400, "after the weight", 1},
		{`99999999999999999999`, 400, "whole number", 1},
	} {
		if err := cl.SetWeight(0, 1); err != nil {
			t.Fatal(err)
		}
		code, body := call(t, "PUT", srv.URL+"/nodes/0/weight", c.body)
		if code != c.code || !strings.Contains(body, c.contains) {
			t.Errorf("PUT weight %q = %d %q, want %d containing %q", c.body, code, body, c.code, c.contains)
		}
		if w := cl.Nodes()[0].Weight; w != c.weight {
			t.Errorf("PUT weight %q: weight now %d, want %d", c.body, w, c.weight)
		}
	}
}

// filledFrontStats returns front.Stats with every number set to a distinct
// value (the i-th field to 1007+7i, by reflection) and the fields' names.
func filledFrontStats(t *testing.T) (front.Stats, []string) {
	var st front.Stats
	st.Repair = &front.RepairStats{}
	st.Paths = map[string]uint64{"relay": 0}
	next := uint64(1000)
	var fields []string
	var fill func(v reflect.Value, name string)
	fill = func(v reflect.Value, name string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i), name+"."+v.Type().Field(i).Name)
			}
		case reflect.Pointer:
			fill(v.Elem(), name)
		case reflect.Array:
			for i := 1; i < v.Len(); i++ { // Status[0] is no class
				fill(v.Index(i), name+"["+string(rune('0'+i))+"]")
			}
		case reflect.Uint64, reflect.Int64, reflect.Int, reflect.Float64:
			next += 7
			switch v.Kind() {
			case reflect.Uint64:
				v.SetUint(next)
			case reflect.Float64:
				v.SetFloat(float64(next))
			default:
				v.SetInt(int64(next))
			}
			fields = append(fields, name)
		case reflect.Map:
			next += 7
			st.Paths["relay"] = next
			fields = append(fields, name)
		default:
			t.Fatalf("front.Stats%s: kind %v; teach this test and FrontStats about it", name, v.Kind())
		}
	}
	fill(reflect.ValueOf(&st).Elem(), "")
	if len(fields) < 40 {
		t.Errorf("only %d counters found in front.Stats; the walk is broken", len(fields))
	}
	return st, fields
}

// frontMetrics serves /metrics over filledFrontStats and returns its body
// and the counters' field paths (see filledFrontStats).
func frontMetrics(t *testing.T) (body string, fields []string) {
	t.Helper()
	cl, srv := setup(t)
	st, fields := filledFrontStats(t)
	m := NewMetrics(cl, "table")
	m.WatchFront(func() front.Stats { return st })
	srv.Config.Handler = New(cl, m)
	_, body = call(t, "GET", srv.URL+"/metrics", "")
	return body, fields
}

// TestMetricsCoverFrontStats: every counter of front.Stats reaches /metrics
// (retries, the front's own 4xx/5xx and the fast passes once did not).
// Each number gets a distinct value and /metrics must show every value, so
// a counter added to front.Stats but not to the collector fails by name.
func TestMetricsCoverFrontStats(t *testing.T) {
	body, fields := frontMetrics(t)
	seen := map[float64]bool{}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "shoal_front_") {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			seen[v] = true
		}
	}
	for i, f := range fields {
		if !seen[float64(1007+7*i)] {
			t.Errorf("front.Stats%s (%d) is not in /metrics; add it to frontCollector", f, 1007+7*i)
		}
	}
}

// TestMetricsDocumented: every metric family the front serves is in
// docs/admin.md's metrics table, so an operator can look a name up.
func TestMetricsDocumented(t *testing.T) {
	body, _ := frontMetrics(t)
	doc, err := os.ReadFile("../../docs/admin.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(body, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "#" || f[1] != "HELP" || !strings.HasPrefix(f[2], "shoal_") {
			continue
		}
		if !strings.Contains(string(doc), "`"+f[2]+"`") {
			t.Errorf("docs/admin.md lacks %s: %s", f[2], strings.Join(f[3:], " "))
		}
	}
}
