package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"shoal/internal/admin"
	"shoal/internal/cluster/publish"
)

func init() {
	register("publish", "push a new version of the site to every node and switch them together", runPublish)
}

func runPublish(args []string) error {
	fs := newFlags("publish", "[--admin URL] [--admin-token-file FILE] [--watch] DIR",
		"Publish the site in DIR as a new version: every node prepares it, then all switch together\n"+
			"(see docs/publish.md). DIR must be readable by the front (shoal up or shoal front with publish_dir).")
	adminURL := fs.String("admin", "http://127.0.0.1:9090", "the front's admin API")
	tokenFile := fs.String("admin-token-file", defaultTokenFile(), "file holding the admin API's bearer token")
	watch := fs.Bool("watch", false, "keep running and publish DIR again each time something in it changes")
	settle := fs.Duration("settle", 500*time.Millisecond, "--watch: wait for this much quiet after a change before publishing")
	asJSON := fs.Bool("json", false, "print the publish report as JSON")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("give exactly one folder to publish")
	}
	dir, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: not a folder", dir)
	}
	tok, err := admin.LoadToken(*tokenFile)
	if err != nil {
		return fmt.Errorf("admin token: %w (give --admin-token-file)", err)
	}
	pub := func() error {
		res, err := postPublish(context.Background(), strings.TrimSuffix(*adminURL, "/"), tok, dir)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		fmt.Printf("published version %d to %d nodes: %d added, %d changed, %d removed (%d files, %d copied); prepared in %v, switched in %v\n",
			res.Version, res.Nodes, len(res.Added), len(res.Changed), len(res.Removed), res.Files, res.Copied,
			res.Prepare.Round(time.Millisecond), res.Switch.Round(time.Microsecond))
		return nil
	}
	if err := pub(); err != nil {
		return err
	}
	if !*watch {
		return nil
	}
	ctx, cancel := interruptible()
	defer cancel()
	return publish.Watch(ctx, dir, *settle, func() {
		if err := pub(); err != nil {
			fmt.Fprintln(os.Stderr, "shoal publish:", err)
		}
	})
}

// defaultTokenFile is where `shoal up` keeps its token by default.
func defaultTokenFile() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "shoal", "admin.token")
}

// postPublish calls POST /publish on the admin API at base.
func postPublish(ctx context.Context, base, token, dir string) (publish.Result, error) {
	var res publish.Result
	body, _ := json.Marshal(map[string]string{"dir": dir})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/publish", bytes.NewReader(body))
	if err != nil {
		return res, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return res, fmt.Errorf("publish: %w (is shoal up or shoal front --admin running there?)", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return res, fmt.Errorf("publish: %s (HTTP %d)", e.Error, resp.StatusCode)
		}
		return res, fmt.Errorf("publish: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("publish: bad answer: %w", err)
	}
	return res, nil
}
