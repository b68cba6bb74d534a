package config

import (
	"reflect"
	"slices"
	"strings"
)

// FrontKeys lists every key a front configuration file may set, as dotted
// paths ("limits.max_conn_per_node", "node.url"), sorted; the command's
// test checks every flag of `shoal front` against it, so no flag lacks a
// key.
func FrontKeys() []string { return keysOf(reflect.TypeOf(Front{})) }

// NodeKeys lists every key a node configuration file may set (see
// FrontKeys).
func NodeKeys() []string { return keysOf(reflect.TypeOf(NodeServer{})) }

// keysOf walks t's toml tags; a struct (or slice of structs) field that is
// not a Duration is a table whose keys are listed under its name, and is a
// key itself too.
func keysOf(t reflect.Type) []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			out = append(out, prefix+name)
			ft := f.Type
			for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(Duration{}) {
				walk(ft, prefix+name+".")
			}
		}
	}
	walk(t, "")
	slices.Sort(out)
	return out
}
