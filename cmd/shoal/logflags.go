package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"shoal/internal/config"
)

// logFlags are --log-level and --log-format, which every long-running role
// (front, node, up) takes, so operators get the same log everywhere.
type logFlags struct {
	fs            *flag.FlagSet
	level, format *string
}

// addLogFlags registers --log-level and --log-format with the front's
// configuration defaults (internal/config holds the one default).
func addLogFlags(fs *flag.FlagSet) *logFlags {
	def := config.DefaultFront()
	return &logFlags{
		fs:     fs,
		level:  fs.String("log-level", def.LogLevel, "operational log threshold: "+strings.Join(config.LogLevels, ", ")),
		format: fs.String("log-format", def.LogFormat, "operational log encoding on stderr: "+strings.Join(config.LogFormats, ", ")),
	}
}

// set reports whether the flag called name was given on the command line.
func (l *logFlags) set(name string) bool {
	found := false
	l.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// logger builds the role's logger on w from the flags; level and format
// from a configuration file are used unless the flags were given.
func (l *logFlags) logger(w io.Writer, role, cfgLevel, cfgFormat string) (*slog.Logger, error) {
	return l.loggerVar(w, role, cfgLevel, cfgFormat, nil)
}

// loggerVar is logger with its threshold held in lv, which a reload sets.
func (l *logFlags) loggerVar(w io.Writer, role, cfgLevel, cfgFormat string, lv *slog.LevelVar) (*slog.Logger, error) {
	level, format := *l.level, *l.format
	if cfgLevel != "" && !l.set("log-level") {
		level = cfgLevel
	}
	if cfgFormat != "" && !l.set("log-format") {
		format = cfgFormat
	}
	return newLogger(w, role, level, format, lv)
}

// newLogger returns a slog.Logger writing level and above to w as text or
// JSON, every record carrying role=ROLE. With lv the threshold lives there
// (set to level), so it can change later.
func newLogger(w io.Writer, role, level, format string, lv *slog.LevelVar) (*slog.Logger, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	if lv == nil {
		lv = new(slog.LevelVar)
	}
	lv.Set(l)
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want one of %s", format, strings.Join(config.LogFormats, ", "))
	}
	return slog.New(h).With("role", role), nil
}

// parseLevel maps a log_level value to its slog.Level.
func parseLevel(level string) (slog.Level, error) {
	var lv slog.Level
	if !slices.Contains(config.LogLevels, level) || lv.UnmarshalText([]byte(level)) != nil {
		return 0, fmt.Errorf("--log-level %q: want one of %s", level, strings.Join(config.LogLevels, ", "))
	}
	return lv, nil
}
