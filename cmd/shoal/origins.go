package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// originFlag is a repeatable --origin: "URL" is the origin of every host
// (the default), "HOST=URL" the origin of one host name. Given on the
// command line it replaces the configuration file's origins as a whole.
type originFlag struct {
	def   string
	hosts map[string]string
	set   bool
}

func (o *originFlag) String() string { return o.def }

func (o *originFlag) Set(v string) error {
	if !o.set { // the first --origin replaces what a file said
		o.def, o.hosts, o.set = "", nil, true
	}
	host, u, named := strings.Cut(v, "=")
	if !named || strings.Contains(host, "/") {
		if o.def != "" {
			return fmt.Errorf("--origin %q: the default origin is already %q (name a host: HOST=URL)", v, o.def)
		}
		o.def = v
		return nil
	}
	if host == "" || u == "" {
		return fmt.Errorf("--origin %q: want URL or HOST=URL", v)
	}
	if o.hosts == nil {
		o.hosts = map[string]string{}
	}
	o.hosts[strings.ToLower(host)] = u
	return nil
}

// specs lists the origins as node.ParseOrigins reads them.
func (o *originFlag) specs() []string {
	var out []string
	if o.def != "" {
		out = append(out, o.def)
	}
	for _, h := range slices.Sorted(maps.Keys(o.hosts)) {
		out = append(out, h+"="+o.hosts[h])
	}
	return out
}
