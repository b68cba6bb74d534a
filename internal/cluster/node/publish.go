package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/sitetar"
	"shoal/internal/cluster/peer"
)

// publishState is the node's side of a two-phase publish (internal/cluster/publish):
// at most one version is prepared at a time.
type publishState struct {
	mu      sync.Mutex
	version uint64 // site version being prepared, 0 when none
	staged  []stagedSite
	// peers is the staged version's membership (peer.MembersName), nil
	// when its tree has none (a full copy, or no membership change to
	// tell): adopted at commit.
	peers   *members
	current uint64 // site version last committed (0: the one started with)
	// stagedRoot is the tree of the staged version, root the tree of the
	// served one ("" before a publish: Config.Root).
	stagedRoot, root string
	// last is what the commit of current changed, answered again to a
	// repeated commit of it (the coordinator retries one whose answer it
	// did not get). prevVersion and prevRoot are the version and tree it
	// replaced, which RevertPublish goes back to.
	last        content.Diff
	prevVersion uint64
	prevRoot    string
	// fetched are the folders of versions this node fetched from the
	// front (several hosts), oldest first; the staged one is last until
	// it commits or aborts.
	fetched []string
}

// PreparePublish scans root, the tree of site version v, and holds it
// ready without serving it: the slow phase, which may fail (a missing or
// unreadable tree) without changing anything. A later prepare replaces an
// earlier one that was never committed.
func (s *Server) PreparePublish(v uint64, root string) error {
	if v <= s.pub.currentVersion() {
		return fmt.Errorf("node: prepare version %d: already at version %d", v, s.pub.currentVersion())
	}
	st, err := s.prepareSites(root)
	if err != nil {
		return fmt.Errorf("node: prepare version %d: %w", v, err)
	}
	ms, err := readMembers(root)
	if err != nil {
		return fmt.Errorf("node: prepare version %d: %w", v, err)
	}
	p := &s.pub
	p.mu.Lock()
	p.version, p.staged, p.peers, p.stagedRoot = v, st, ms, root
	p.mu.Unlock()
	return nil
}

// members is a membership read from a version's tree.
type members struct {
	self  int
	peers []string
}

// readMembers reads root's peer.MembersName, nil when there is none.
func readMembers(root string) (*members, error) {
	f, err := os.Open(filepath.Join(root, peer.MembersName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	self, peers, err := peer.ReadMembers(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", peer.MembersName, err)
	}
	return &members{self, peers}, nil
}

// CommitPublish switches the node to the prepared version v (a pointer
// swap: every request after it, and none before, sees the new table) and
// drops the changed and removed URLs from the memory cache, whose objects
// would otherwise sit there until evicted (a stale one is never served: a
// cache hit must match the new table's ETag). It returns what changed.
// Committing the version already served succeeds again with the same
// answer, so a coordinator that lost the first answer can retry.
func (s *Server) CommitPublish(v uint64) (content.Diff, error) {
	p := &s.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	if v != 0 && v == p.current {
		return p.last, nil
	}
	if p.staged == nil || p.version != v {
		return content.Diff{}, fmt.Errorf("node: commit version %d: not prepared (prepared: %d)", v, p.version)
	}
	d, err := s.commitSites(p.staged)
	if err != nil {
		return content.Diff{}, fmt.Errorf("node: %w", err)
	}
	p.prevVersion, p.prevRoot = p.current, p.root
	if p.prevRoot == "" {
		// The tree the node started with, as it resolves now: a
		// "current" symlink may be moved on by the publisher later.
		p.prevRoot = s.cfg.Root
		if r, err := filepath.EvalSymlinks(s.cfg.Root); err == nil {
			p.prevRoot = r
		}
	}
	p.staged, p.version, p.current, p.last, p.root = nil, 0, v, d, p.stagedRoot
	if ms := p.peers; ms != nil {
		// The version's membership: a node that joined or left is known
		// from now on, for its files' holders and the front's hints.
		p.peers = nil
		if s.peer != nil {
			s.peer.SetPeers(ms.self, ms.peers)
			s.cfg.Logger.Info("peers updated", "version", v, "self", ms.self, "peers", strings.Join(ms.peers, ","))
		} else {
			s.cfg.Logger.Warn("the version names peers but this node has no cluster key: it cannot fetch the files it does not store", "version", v)
		}
	}
	// Keep the fetched trees of this version and the one before (its
	// files may still be going out); drop older ones.
	for len(p.fetched) > 2 {
		os.RemoveAll(p.fetched[0])
		p.fetched = p.fetched[1:]
	}
	s.cfg.Logger.Info("site version switched", "version", v, "root", s.store.Root(),
		"added", len(d.Added), "changed", len(d.Changed), "removed", len(d.Removed))
	return d, nil
}

// RevertPublish takes back the commit of version v: the node serves the
// tree it served before again (scanned anew: versions are immutable, so
// the same files with the same ETags) and drops the objects that differ
// from its cache. The coordinator calls it on the nodes that switched when
// another could not, so that all serve the old version rather than a mix.
// Reverting a version the node does not serve (never committed, or
// already reverted) succeeds and changes nothing.
func (s *Server) RevertPublish(v uint64) (content.Diff, error) {
	p := &s.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	if v == 0 || p.current != v {
		if p.version == v {
			p.staged, p.version, p.peers = nil, 0, nil
		}
		return content.Diff{}, nil
	}
	st, err := s.prepareSites(p.prevRoot)
	if err != nil {
		return content.Diff{}, fmt.Errorf("node: revert version %d to %s: %w", v, p.prevRoot, err)
	}
	ms, err := readMembers(p.prevRoot)
	if err != nil {
		return content.Diff{}, fmt.Errorf("node: revert version %d: %w", v, err)
	}
	d, err := s.commitSites(st) // drops what differs from the cache
	if err != nil {
		return content.Diff{}, fmt.Errorf("node: revert: %w", err)
	}
	if ms != nil && s.peer != nil {
		s.peer.SetPeers(ms.self, ms.peers)
	}
	p.current, p.root, p.last, p.prevRoot = p.prevVersion, p.prevRoot, content.Diff{}, ""
	s.cfg.Logger.Warn("site version reverted", "version", v, "to", p.current, "root", p.root,
		"added", len(d.Added), "changed", len(d.Changed), "removed", len(d.Removed))
	return d, nil
}

// Rescan reads the node's own root (Config.Root, its symlinks resolved
// again) and serves it at once, dropping changed objects from the cache:
// for a single node, `shoal node --watch` and SIGHUP. A cluster publishes
// with the two phases instead, so that its nodes switch together. With
// VHosts every site is reloaded from its own folder, all or none.
func (s *Server) Rescan() (content.Diff, error) {
	p := &s.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := s.prepareSites(s.cfg.Root)
	if err != nil {
		return content.Diff{}, fmt.Errorf("node: rescan: %w", err)
	}
	d, err := s.commitSites(st)
	if err != nil {
		return content.Diff{}, fmt.Errorf("node: %w", err)
	}
	s.cfg.Logger.Info("site rescanned", "root", s.cfg.Root,
		"added", len(d.Added), "changed", len(d.Changed), "removed", len(d.Removed))
	return d, nil
}

// stagedSite is one site's table of a version being prepared.
type stagedSite struct {
	site *vsite
	st   *content.Staged
}

// prepareSites scans the tree root for every site this node serves: root
// itself for a single site; with VHosts root/NAME for each site NAME,
// each confined to its own folder, so a reload never serves one site's
// files, or the folder of sites, under another's host. A version must hold
// every site the node started with (sites are added and removed by a
// restart, which rebuilds the host map); a new folder is logged and left
// out. Any failure stages nothing.
func (s *Server) prepareSites(root string) ([]stagedSite, error) {
	if s.single != nil {
		st, err := s.single.store.Prepare(root)
		if err != nil {
			return nil, err
		}
		return []stagedSite{{s.single, st}}, nil
	}
	names := make([]string, 0, len(s.sites))
	for name := range s.sites {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]stagedSite, 0, len(names))
	for _, name := range names {
		dir := filepath.Join(root, name)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("site %s: no folder %s in the new tree (sites are added and removed by a restart)", name, dir)
		}
		st, err := s.sites[name].store.Prepare(dir)
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", name, err)
		}
		out = append(out, stagedSite{s.sites[name], st})
	}
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			if n := e.Name(); e.IsDir() && !strings.HasPrefix(n, ".") && s.sites[n] == nil {
				s.cfg.Logger.Warn("new site folder left out until the node restarts", "site", n, "root", root)
			}
		}
	}
	return out, nil
}

// commitSites switches every staged site to its new table and drops what
// changed from the memory cache. The diff's URLs carry their site's name
// with VHosts ("example.com/a.css"), as the cache keys do.
func (s *Server) commitSites(staged []stagedSite) (content.Diff, error) {
	if len(staged) == 0 {
		return content.Diff{}, errors.New("commit: nothing prepared")
	}
	var all content.Diff
	for _, ss := range staged {
		d, err := ss.site.store.Commit(ss.st)
		if err != nil {
			return all, fmt.Errorf("site %q: %w", ss.site.name, err)
		}
		if n := ss.site.name; n != "" {
			for _, l := range []*[]string{&d.Added, &d.Changed, &d.Removed} {
				for i, u := range *l {
					(*l)[i] = n + u
				}
			}
		}
		s.invalidate(d)
		all.Added = append(all.Added, d.Added...)
		all.Changed = append(all.Changed, d.Changed...)
		all.Removed = append(all.Removed, d.Removed...)
	}
	return all, nil
}

// invalidate drops changed and removed URLs (cache keys) from the object
// store.
func (s *Server) invalidate(d content.Diff) {
	for _, u := range d.Changed {
		s.objs.Remove(u)
	}
	for _, u := range d.Removed {
		s.objs.Remove(u)
	}
}

// AbortPublish forgets the prepared version v, if it is the one prepared.
func (s *Server) AbortPublish(v uint64) {
	p := &s.pub
	p.mu.Lock()
	if p.version == v {
		p.staged, p.version, p.peers = nil, 0, nil
	}
	p.mu.Unlock()
	s.dropFetched(v)
}

// SiteVersion is the site version the node serves (0: the tree it started
// with, before any publish).
func (s *Server) SiteVersion() uint64 { return s.pub.currentVersion() }

func (p *publishState) currentVersion() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}

// publishPrefix is the node's publish control endpoint (the front's
// internal/cluster/publish.Remote calls it): POST publishPrefix+"prepare?version=N&root=PATH",
// "commit?version=N", "abort?version=N", "revert?version=N". It exists only with
// Config.PublishToken and Config.PublishDir set, and answers only requests
// carrying that token (the cluster's admin token).
const publishPrefix = "/.shoal/publish/"

// publishControl answers a request under publishPrefix and reports
// whether the connection stays open.
func (c *conn) publishControl(now time.Time, closeAfter bool) bool {
	s := c.s
	if s.cfg.PublishToken == "" || s.cfg.PublishDir == "" {
		c.simple(404, "", now, closeAfter, false, "not found")
		return !closeAfter
	}
	if bstr(c.req.Method) != "POST" {
		c.simple(405, "Allow: POST\r\n", now, closeAfter, false, "publish control takes POST")
		return !closeAfter
	}
	var tok []byte
	for _, h := range c.req.Headers {
		if len(h.Name) == 13 && httpwire.EqualFold(h.Name, "authorization") {
			if v, ok := bytes.CutPrefix(h.Value, []byte("Bearer ")); ok {
				tok = v
			}
		}
	}
	want := sha256.Sum256([]byte(s.cfg.PublishToken))
	got := sha256.Sum256(tok)
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
		c.simple(401, "WWW-Authenticate: Bearer realm=\"shoal node\"\r\n", now, true, false, "publish control needs the cluster's admin token")
		return false
	}
	target := string(c.req.Target)
	u, err := url.ParseRequestURI(target)
	if err != nil {
		c.simple(400, "", now, closeAfter, false, "bad request-target")
		return !closeAfter
	}
	q := u.Query()
	v, err := strconv.ParseUint(q.Get("version"), 10, 64)
	if err != nil || v == 0 {
		c.simple(400, "", now, closeAfter, false, "version must be a positive integer")
		return !closeAfter
	}
	var body []byte
	switch strings.TrimPrefix(u.Path, publishPrefix) {
	case "prepare":
		root := q.Get("root")
		if src := q.Get("fetch"); src != "" {
			var err error
			if root, err = s.fetchVersion(v, src); err != nil {
				c.simple(502, "", now, closeAfter, false, err.Error())
				return !closeAfter
			}
		}
		if err := s.checkPublishRoot(root); err != nil {
			c.simple(403, "", now, closeAfter, false, err.Error())
			return !closeAfter
		}
		if err := s.PreparePublish(v, root); err != nil {
			c.simple(409, "", now, closeAfter, false, err.Error())
			return !closeAfter
		}
		body = []byte("{}\n")
	case "commit":
		d, err := s.CommitPublish(v)
		if err != nil {
			c.simple(409, "", now, closeAfter, false, err.Error())
			return !closeAfter
		}
		body, _ = json.Marshal(d)
		body = append(body, '\n')
	case "abort":
		s.AbortPublish(v)
		body = []byte("{}\n")
	case "revert":
		d, err := s.RevertPublish(v)
		if err != nil {
			c.simple(409, "", now, closeAfter, false, err.Error())
			return !closeAfter
		}
		body, _ = json.Marshal(d)
		body = append(body, '\n')
	default:
		c.simple(404, "", now, closeAfter, false, "not found")
		return !closeAfter
	}
	c.serveBytes(200, "application/json", "Cache-Control: no-store\r\n", body, now, closeAfter, false)
	return !closeAfter
}

// checkPublishRoot refuses a version tree outside Config.PublishDir, so the
// token cannot make the node serve any folder of its host.
func (s *Server) checkPublishRoot(root string) error {
	if root == "" || !filepath.IsAbs(root) {
		return fmt.Errorf("root %q must be an absolute path", root)
	}
	dir, err := filepath.EvalSymlinks(s.cfg.PublishDir)
	if err != nil {
		return fmt.Errorf("publish folder: %w", err)
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("root %q: %w", root, err)
	}
	rel, err := filepath.Rel(dir, real)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("root %q is not inside the publish folder %s", root, s.cfg.PublishDir)
	}
	return nil
}

// fetchTimeout bounds the download of one version from the front.
const fetchTimeout = 10 * time.Minute

// fetchVersion downloads version v from src (the front's GET
// /publish/versions/{v}, with the cluster token) into a folder of its own
// under PublishDir and returns the tree's root: how a node on another host
// than the front receives a version (docs/publish.md).
func (s *Server) fetchVersion(v uint64, src string) (string, error) {
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("fetch %q: want an http or https URL", src)
	}
	s.dropFetched(v) // an earlier, aborted attempt at the same number
	dir, err := os.MkdirTemp(s.cfg.PublishDir, fmt.Sprintf("fetched-v%06d-", v))
	if err != nil {
		return "", fmt.Errorf("fetch version %d: %w", v, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", src, nil)
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("fetch version %d: %w", v, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.PublishToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("fetch version %d: %w", v, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		os.RemoveAll(dir)
		return "", fmt.Errorf("fetch version %d from %s: HTTP %d", v, src, resp.StatusCode)
	}
	root := filepath.Join(dir, "site")
	if err := sitetar.Extract(resp.Body, root); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("fetch version %d: %w", v, err)
	}
	p := &s.pub
	p.mu.Lock()
	p.fetched = append(p.fetched, dir)
	p.mu.Unlock()
	return root, nil
}

// dropFetched removes fetched trees of version v that never committed.
func (s *Server) dropFetched(v uint64) {
	p := &s.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	if v <= p.current {
		return
	}
	prefix := fmt.Sprintf("fetched-v%06d-", v)
	kept := p.fetched[:0]
	for _, d := range p.fetched {
		if strings.HasPrefix(filepath.Base(d), prefix) {
			os.RemoveAll(d)
			continue
		}
		kept = append(kept, d)
	}
	p.fetched = kept
}
