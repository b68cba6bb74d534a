// Package node is shoal's back-end web server (SPEC §1, role "node"): an
// HTTP/1.1 static file server over a content.Store whose bodies are held in
// memory by the node's object store (internal/base/store) as its
// byte-budgeted replacement policy decides.
//
// It does not use net/http. Each connection is served by one goroutine that
// reads into its own fixed buffer, parses every complete request head in it
// with httpwire (pipelining), and answers the whole batch with one write.
// Cached objects carry their response head prebuilt at insert time, and no
// body is on the Go heap: a hit on a small body copies it from the store's
// off-heap arena into the batch (one write for the response), a larger one
// goes with sendfile(2) from the page cache after the head (serve.go), and
// a hit allocates nothing. Timeouts are enforced by one sweeper goroutine that closes
// connections whose state has not changed in time, instead of re-arming a
// runtime timer on every request.
//
// GET /.shoal/status reports the node's load as JSON: the resource report the
// front-end collects (seed 002's resource-collection module). It is answered
// only on connections accepted on the node's own TCP port, where the
// front's health checker and the operator connect, never on a client
// connection handed over by a front (the front refuses /.shoal/ from its
// clients too).
//
// HTTP semantics follow RFC 9110 and, where it leaves a choice, nginx 1.22
// (the server shoal replaces; checked by the differential test against a
// real nginx): preconditions in §13.2.2's order (precond.go), ranges parsed
// and refused as nginx's range filter does, several ranges answered with
// multipart/byteranges (ranges.go), and precompressed "name.br" / "name.gz"
// served as nginx's brotli_static and gzip_static (encoding.go).
//
// In cache mode (Config.Edge, edge*.go) the node is instead an HTTP cache
// in front of an upstream: every method is forwarded, and responses are
// stored and answered as internal/base/httpcache decides (docs/cdn.md).
//
// Deliberate limits: request bodies are not read (a GET/HEAD with a body small
// enough to be already buffered is skipped, otherwise the connection closes
// after the response).
package node

import (
	"io"
	"log/slog"
	"net/netip"
	"time"

	"shoal/internal/base/httpwire"
	"shoal/internal/base/store"
	"shoal/internal/cluster/peer"
)

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// Root is the site root directory (required).
	Root string
	// CacheBytes is the memory budget of the node's object store (its
	// memory tier: bodies in its off-heap arena and in the page cache,
	// internal/base/store). Default 64 MiB; negative disables it (the
	// kernel then keeps what it likes in the page cache). `shoal node`
	// sizes it from the memory cgroup's limit (store.PlanMemory).
	CacheBytes int64
	// CachePolicy is "lru", "gdsf" or "cgdsf" (SPEC §2). Default "gdsf".
	CachePolicy string
	// MaxObject is the size above which files are never held in memory
	// (streamed with sendfile, their pages dropped after). Default 0: an
	// eighth of CacheBytes, at least 500 KB (store.Config.DefaultMaxObject),
	// so large files are cached when they fit, weighed by the replacement
	// policy.
	MaxObject int64
	// DataDir holds the object store's disk tier (stored responses);
	// DataBytes bounds it (default store.DefaultDiskBytes). Default "":
	// no disk tier, the site files being the node's disk.
	DataDir   string
	DataBytes int64
	// Memory is how the node's memory was planned, reported in the status
	// (Status.Memory); `shoal node` fills it in. Default zero: not planned.
	Memory store.Plan
	// CachedElsewhere tells cgdsf whether another node's memory holds a URL
	// (SPEC §2, Weblins). Nil means "no", which makes cgdsf behave as GDSF.
	CachedElsewhere func(url string) bool
	// MaxHead is the request head limit in bytes; larger heads get 431.
	// Default httpwire.DefaultMaxHead + httpwire.ForwardHeadroom (9 KiB):
	// the front's default limit plus what its rewrite may add
	// (X-Forwarded-For, Host), so that a head the front accepted is never
	// refused here because of what the front added. A node
	// behind a front with a larger limit needs that limit plus
	// ForwardHeadroom.
	MaxHead int
	// MaxHeaders is the limit on header fields; more get 431. Default
	// httpwire.DefaultMaxHeaders + httpwire.ForwardFields (102), for the
	// same reason as MaxHead.
	MaxHeaders int
	// ReadTimeout bounds the time from the first byte of a request head to
	// its end (slowloris). Default 10 s.
	ReadTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection. Default 60 s.
	IdleTimeout time.Duration
	// WriteTimeout bounds how long a response may make no progress (a client
	// that stops reading). Default 60 s.
	WriteTimeout time.Duration
	// AccessLog receives one Common Log Format line per request; nil turns
	// the access log off (the default). It is buffered and flushed every
	// second and on Shutdown.
	AccessLog io.Writer
	// TrustedFronts are the addresses whose X-Forwarded-For the access
	// log believes: a request from one of them is logged with the address
	// the front appended, not the front's own. Empty (the default) trusts
	// no one, so a client cannot forge its logged address; `shoal up`
	// trusts loopback, where its front runs.
	TrustedFronts []netip.Prefix
	// LogHealth logs the front's health checks (GET /.shoal/status) in the
	// access log too. Default false: one line per node per second would
	// drown the requests.
	LogHealth bool
	// PublishToken and PublishDir enable the publish control endpoint
	// (POST /.shoal/publish/…, publish.go) the front drives a two-phase
	// publish through: requests must carry PublishToken (the cluster's
	// admin token) as a bearer token, and version trees must lie inside
	// PublishDir. Either empty (the default) turns the endpoint off.
	PublishToken string
	PublishDir   string
	// Logger receives structured operational logs. Default slog.Default().
	Logger *slog.Logger
	// HandoffSocket is reported in the status JSON; empty until connection
	// handoff (SPEC §4) is enabled.
	HandoffSocket string
	// SharedProcess says that this node shares its process with other
	// nodes (`shoal up` runs them all in one), so the process's CPU figure
	// is not this node's; the status report says so and the front reads
	// the node's own busy time as its load instead. Default false.
	SharedProcess bool
	// MaxRanges bounds the ranges one request may ask for; a request for
	// more gets the whole file with 200, as nginx answers a set beyond its
	// max_ranges. Default 200 (Apache httpd's MaxRanges; nginx has no limit
	// unless configured). Ranges are also refused (200) when their lengths
	// add up to more than the file, as nginx does.
	MaxRanges int
	// NoPrecompressed stops serving "name.br" / "name.gz" in place of
	// "name" to clients that accept the coding (encoding.go). Default false:
	// variants are served when present, like nginx's gzip_static and
	// brotli_static turned on.
	NoPrecompressed bool
	// VHosts makes Root a folder of sites, one per host name
	// (ROOT/example.com/...), picked by the Host header or an absolute-form
	// target; ROOT/_default answers other hosts. Cache keys become site +
	// path (vhosts.go). Default false: Root is the one site.
	VHosts bool
	// Aliases maps other host names to a site folder's name
	// ("www.example.com" = "example.com"); only with VHosts.
	Aliases map[string]string
	// Site holds the site's rules (caching headers, error pages, listings,
	// MIME overrides; site.go). Nil reads Root/.shoal.toml when it exists,
	// else no rules: no listings, built-in error texts and types.
	Site *SiteRules
	// ServerName is sent in the Server header. Default "shoal".
	ServerName string
	// MaxConns caps the client connections open at once, handed-off ones
	// included (under passfd the front's limits do not cover them): at it,
	// the connections idle the longest are closed to make room, and a new
	// one is closed at once when none is idle. Default
	// DefaultMaxConns(RLIMIT_NOFILE); negative: no limit.
	MaxConns int
	// Peer turns on fetching from peers' memories and the cache digest
	// exchange (peer.go, internal/cluster/peer) when it has a Key and Peers.
	// Default off. With CachePolicy "cgdsf" and no CachedElsewhere, the
	// peers' digests answer CachedElsewhere.
	Peer peer.Config
	// Edge turns the node into an HTTP cache in front of an upstream
	// (cache mode, edge.go) when it has an Upstream: Root is then not
	// needed and no site is served. Default off.
	Edge EdgeConfig
}

// Defaults for Config.
const (
	DefaultCacheBytes   = 64 << 20
	DefaultCachePolicy  = "gdsf"
	DefaultMaxObject    = 0
	DefaultReadTimeout  = 10 * time.Second
	DefaultIdleTimeout  = 60 * time.Second
	DefaultWriteTimeout = 60 * time.Second
	DefaultMaxRanges    = 200
)

func (c *Config) withDefaults() {
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.CachePolicy == "" {
		c.CachePolicy = DefaultCachePolicy
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxRanges <= 0 {
		c.MaxRanges = DefaultMaxRanges
	}
	if c.ServerName == "" {
		c.ServerName = "shoal"
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns(nofile())
	}
	if c.MaxHead <= 0 {
		c.MaxHead = httpwire.DefaultMaxHead + httpwire.ForwardHeadroom
	}
	if c.MaxHeaders <= 0 {
		c.MaxHeaders = httpwire.DefaultMaxHeaders + httpwire.ForwardFields
	}
}
