package httpcache

import (
	"net/http"
	"strings"
)

// Response caching fields a CDN reads before Cache-Control. RFC 9213 §2.1:
// a cache that honours a targeted field uses the first of its list that is
// present and then ignores Cache-Control (and Expires) for its own caching;
// Cache-Control still reaches the client unchanged.
const (
	// FieldCDNCacheControl is RFC 9213's field for every CDN cache.
	FieldCDNCacheControl = "CDN-Cache-Control"
	// FieldSurrogateControl is the W3C Edge Architecture 1.0 field, whose
	// directives may name the device they are for ("max-age=60;shoal").
	FieldSurrogateControl = "Surrogate-Control"
	// FieldSurrogateCapability is the request field by which a surrogate
	// announces itself to the origin (`shoal="Surrogate/1.0"`), so the
	// origin can target directives at it.
	FieldSurrogateCapability = "Surrogate-Capability"
)

// ResponseDirectives returns the directives this cache obeys for a
// response: those of CDN-Cache-Control, else those of Surrogate-Control
// that are untargeted or targeted at device, else Cache-Control. targeted
// reports that one of the first two was used. A targeted field present but
// holding nothing for this cache (every directive aimed at another device,
// or none understood) counts as absent.
func ResponseDirectives(h http.Header, device string) (d Directives, targeted bool) {
	if lines := h.Values(FieldCDNCacheControl); len(lines) > 0 {
		if d = ParseDirectives(lines); d.Any() {
			return d, true
		}
	}
	if lines := h.Values(FieldSurrogateControl); len(lines) > 0 {
		if d = parseSurrogate(lines, device); d.Any() {
			return d, true
		}
	}
	return ParseDirectives(h.Values("Cache-Control")), false
}

// parseSurrogate reads Surrogate-Control: list elements as in Cache-Control,
// each optionally followed by ";device". Elements targeted at another
// device are skipped.
func parseSurrogate(lines []string, device string) Directives {
	d := newDirectives()
	for _, line := range lines {
		for i := 0; i < len(line); {
			end := skipElement(line, i)
			elem := strings.TrimRight(strings.TrimSpace(line[i:end]), ",")
			i = end
			if semi := lastSemicolon(elem); semi >= 0 {
				target := strings.TrimSpace(elem[semi+1:])
				if !strings.EqualFold(target, device) {
					continue
				}
				elem = strings.TrimSpace(elem[:semi])
			}
			forEachDirective(elem, func(name, arg string, hasArg, quoted bool) {
				d.add(name, arg, hasArg, quoted)
			})
		}
	}
	return d
}

// lastSemicolon finds the last ';' outside a quoted string, or -1.
func lastSemicolon(s string) int {
	at, inQuote := -1, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if inQuote {
				i++
			}
		case '"':
			inQuote = !inQuote
		case ';':
			if !inQuote {
				at = i
			}
		}
	}
	return at
}
