package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Upstream is where a node in cache mode (Config.Origin) sends what it
// cannot answer from its store: a miss, a revalidation, and every request
// whose method a cache does not answer (POST, PUT, DELETE, ...).
//
// The request carries the client's method, the URL the client asked for
// (URL.Scheme "http" or "https" as the client connected, URL.Host and
// req.Host the client's Host, URL.Path and URL.RawQuery as sent), the
// client's end-to-end headers (hop-by-hop ones already removed, Via
// appended) and its body (nil when there is none). Conditional headers the
// cache adds when it revalidates are in req.Header like the client's own.
//
// Fetch returns the response as the next hop sent it: status, headers and
// body unchanged (the caller closes the body). An error means no response
// at all (refused, timed out, reset); the node answers the client 502 or
// 504 with a short body that never names the upstream. It is an interface
// so the CDN tier can put its miss chain (a peer node, another PoP, the
// shield, then the origin) in front of OriginUpstream without the node
// knowing.
type Upstream interface {
	Fetch(ctx context.Context, req *http.Request) (*http.Response, error)
}

// ErrUpstreamTimeout marks a Fetch that ran out of time: the node answers
// 504 rather than 502.
var ErrUpstreamTimeout = errors.New("upstream timed out")

// OriginUpstream is the last hop: the origin server(s) over HTTP or HTTPS
// (net/http's Transport, which pools connections and speaks TLS and HTTP/2
// to an https origin). The request's Host picks the origin (Hosts, then
// Default); the Host header sent is the client's, as a CDN forwards it, so
// one origin can serve several sites by name.
type OriginUpstream struct {
	// Default answers hosts not in Hosts; nil refuses them.
	Default *url.URL
	// Hosts maps a lower-case host name (no port) to its origin.
	Hosts map[string]*url.URL
	// Transport makes the requests. Default: a Transport with
	// OriginDialTimeout, OriginHeaderTimeout and no compression added.
	Transport http.RoundTripper

	once sync.Once // sets the default Transport on first use
}

// Defaults for OriginUpstream's transport.
const (
	// OriginDialTimeout bounds connecting to an origin.
	OriginDialTimeout = 5 * time.Second
	// OriginHeaderTimeout bounds the wait for an origin's response head
	// (a body may then take as long as it streams).
	OriginHeaderTimeout = 30 * time.Second
)

// ParseOrigins reads --origin values: "URL" sets the default origin and
// "HOST=URL" the origin of one host. URLs must be absolute http or https;
// a path prefix is kept and the request's path appended to it.
func ParseOrigins(specs []string) (*OriginUpstream, error) {
	o := &OriginUpstream{Hosts: map[string]*url.URL{}}
	for _, s := range specs {
		host, raw, named := strings.Cut(s, "=")
		if !named || strings.Contains(host, "/") {
			host, raw, named = "", s, false
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("origin %q: want an http:// or https:// URL", s)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		if !named {
			if o.Default != nil {
				return nil, fmt.Errorf("origin %q: a default origin is already set", s)
			}
			o.Default = u
			continue
		}
		o.Hosts[strings.ToLower(host)] = u
	}
	if o.Default == nil && len(o.Hosts) == 0 {
		return nil, errors.New("no origin given")
	}
	return o, nil
}

// NewOriginTransport is OriginUpstream's default transport: pooled
// connections, bounded connect and head waits, and no Accept-Encoding of its
// own (the client's is forwarded, and a body is stored as the origin coded it).
func NewOriginTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: OriginDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   OriginDialTimeout,
		ResponseHeaderTimeout: OriginHeaderTimeout,
		DisableCompression:    true,
	}
}

// Fetch sends req to the origin of its host.
func (o *OriginUpstream) Fetch(ctx context.Context, req *http.Request) (*http.Response, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	name := strings.ToLower(host)
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	}
	base := o.Hosts[name]
	if base == nil {
		base = o.Default
	}
	if base == nil {
		return nil, fmt.Errorf("no origin for host %q", host)
	}
	out := req.Clone(ctx)
	out.URL = &url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path + req.URL.Path,
		RawPath: rawPath(base, req.URL), RawQuery: req.URL.RawQuery}
	out.Host = host
	out.RequestURI = ""
	if req.Body == nil || req.Body == http.NoBody {
		out.Body = nil
	}
	o.once.Do(func() {
		if o.Transport == nil {
			o.Transport = NewOriginTransport()
		}
	})
	resp, err := o.Transport.RoundTrip(out)
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return nil, fmt.Errorf("origin: %w: %w", ErrUpstreamTimeout, err)
		}
		return nil, fmt.Errorf("origin: %w", err)
	}
	return resp, nil
}

// rawPath keeps the client's escaping of the path when it has one.
func rawPath(base, u *url.URL) string {
	if u.RawPath == "" {
		return ""
	}
	return base.EscapedPath() + u.RawPath
}
