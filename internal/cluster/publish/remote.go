package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"shoal/internal/base/content"
)

// Remote is a node in another process (or on another host sharing the
// versions folder), driven through its publish control endpoint
// (POST /.shoal/publish/prepare|commit|abort, internal/cluster/node) with the
// cluster's admin token. client nil means http.DefaultClient.
func Remote(nodeURL, token string, client *http.Client) Participant {
	return RemoteFetch(nodeURL, token, "", client)
}

// RemoteFetch is Remote for a node on another host that does not share the
// versions folder: in the prepare phase it downloads the version's tree
// from versionsURL/{v} (the front's GET /publish/versions/{v}) into its own
// --publish-dir. versionsURL "" is Remote.
func RemoteFetch(nodeURL, token, versionsURL string, client *http.Client) Participant {
	if client == nil {
		client = http.DefaultClient
	}
	return remote{base: strings.TrimSuffix(nodeURL, "/"), token: token, fetch: strings.TrimSuffix(versionsURL, "/"), client: client}
}

type remote struct {
	base, token, fetch string
	client             *http.Client
}

func (r remote) Name() string { return r.base }

func (r remote) call(ctx context.Context, op string, q url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, "POST", r.base+"/.shoal/publish/"+op+"?"+q.Encode(), http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", op, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return nil
}

func (r remote) Prepare(ctx context.Context, v uint64, root string) error {
	q := url.Values{"version": {strconv.FormatUint(v, 10)}, "root": {root}}
	if r.fetch != "" {
		q = url.Values{"version": {strconv.FormatUint(v, 10)}, "fetch": {r.fetch + "/" + strconv.FormatUint(v, 10)}}
	}
	return r.call(ctx, "prepare", q, nil)
}

func (r remote) Commit(ctx context.Context, v uint64) (content.Diff, error) {
	var d content.Diff
	err := r.call(ctx, "commit", url.Values{"version": {strconv.FormatUint(v, 10)}}, &d)
	return d, err
}

func (r remote) Abort(ctx context.Context, v uint64) error {
	return r.call(ctx, "abort", url.Values{"version": {strconv.FormatUint(v, 10)}}, nil)
}

func (r remote) Revert(ctx context.Context, v uint64) error {
	return r.call(ctx, "revert", url.Values{"version": {strconv.FormatUint(v, 10)}}, nil)
}
