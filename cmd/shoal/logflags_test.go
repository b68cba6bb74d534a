package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestNewLogger checks --log-level and --log-format: the threshold drops
// lower records, json gives one object per line, bad values name the valid
// ones.
func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		level, format string
		want          string // output of one Debug and one Warn record ("" when refused)
		err           string
	}{
		{"info", "text", `level=WARN msg=w role=front`, ""},
		{"debug", "text", "level=DEBUG msg=d role=front", ""},
		{"warn", "json", `"level":"WARN","msg":"w","role":"front"}`, ""},
		{"error", "json", "", ""},
		{"verbose", "text", "", "debug, info, warn, error"},
		{"info", "yaml", "", "text, json"},
	} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, "front", tc.level, tc.format, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s/%s: error %v, want one naming %q", tc.level, tc.format, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s/%s: %v", tc.level, tc.format, err)
		}
		log.Debug("d")
		log.Warn("w")
		out := buf.String()
		if tc.want == "" && out != "" || !strings.Contains(out, tc.want) {
			t.Errorf("%s/%s: output %q, want %q", tc.level, tc.format, out, tc.want)
		}
		if tc.level == "warn" && strings.Contains(out, `"msg":"d"`) {
			t.Errorf("debug record passed level warn: %q", out)
		}
	}
}
