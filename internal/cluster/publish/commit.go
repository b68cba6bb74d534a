package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"shoal/internal/base/content"
)

// DefaultCommitRetry is how long Config.CommitRetry gives a node that did
// not switch to answer a commit (or a rollback) again: long enough for a
// node process to restart, or a link to come back, short enough that the
// cluster does not serve two versions for minutes.
const DefaultCommitRetry = 15 * time.Second

// retryBackoff is the first pause between two rounds of retries; it
// doubles up to maxBackoff.
const (
	retryBackoff = 50 * time.Millisecond
	maxBackoff   = time.Second
)

// commitOutcome is what the commit phase did: each node's diff (the
// nodes that switched), and on failure which nodes could not switch and
// which of the others could not be switched back.
type commitOutcome struct {
	diffs      []content.Diff
	attempts   int    // commit rounds, the first included
	failed     []int  // nodes that never took the commit
	failErr    error  // their last errors
	stuck      []int  // nodes that switched and could not be switched back
	stuckErr   error  // their last errors
	rolledBack bool   // failed is not empty and every other node is back
	committed  []bool // per node: serves the new version now
	names      func(idx []int) string
}

// commit switches every node to version v (whose tree for node i is
// roots[i]) and makes sure they end on one version: a node whose commit
// fails is asked again, with a new prepare if it lost the one it had (a
// restart), every round until CommitRetry has passed. Commit is idempotent
// on the nodes, so a commit whose answer was lost is simply answered
// again. If a node still has not switched then, the nodes that did are
// switched back (Participant.Revert, retried the same way) and the failed
// ones told to drop what they prepared: the cluster serves the previous
// version again, everywhere.
func (c *Coordinator) commit(ctx context.Context, nodes []Participant, v uint64, roots []string) commitOutcome {
	ctx = context.WithoutCancel(ctx) // once switching began, it finishes either way
	out := commitOutcome{diffs: make([]content.Diff, len(nodes)), committed: make([]bool, len(nodes)),
		names: func(idx []int) string { return participantNames(nodes, idx) }}
	errs := c.retry(ctx, nodes, func(ctx context.Context, i int, p Participant, again bool) error {
		d, err := p.Commit(ctx, v)
		if err != nil && again {
			// A node that lost its prepared version (restarted) prepares
			// it again; one that switched already answers the commit.
			if perr := p.Prepare(ctx, v, roots[i]); perr == nil {
				d, err = p.Commit(ctx, v)
			}
		}
		if err == nil {
			out.diffs[i], out.committed[i] = d, true
		}
		return err
	}, &out.attempts)
	for i, err := range errs {
		if err != nil {
			out.failed = append(out.failed, i)
		}
	}
	if len(out.failed) == 0 {
		return out
	}
	out.failErr = errors.Join(errs...)
	var back []Participant
	var backIdx []int
	for i, p := range nodes {
		if out.committed[i] {
			back, backIdx = append(back, p), append(backIdx, i)
		}
	}
	var n int
	rerrs := c.retry(ctx, back, func(ctx context.Context, _ int, p Participant, _ bool) error {
		return p.Revert(ctx, v)
	}, &n)
	for k, err := range rerrs {
		if err == nil {
			out.committed[backIdx[k]] = false
		} else {
			out.stuck = append(out.stuck, backIdx[k])
		}
	}
	out.stuckErr = errors.Join(rerrs...)
	for _, i := range out.failed { // best effort: they are unreachable
		cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		nodes[i].Abort(cctx, v)
		cancel()
	}
	out.rolledBack = len(out.stuck) == 0
	return out
}

// retry runs f on every node at once, then again on those that failed,
// with a pause that doubles from retryBackoff to maxBackoff, until all
// succeeded or CommitRetry has passed; again is false on the first round.
// It returns each node's last error and counts the rounds in rounds.
func (c *Coordinator) retry(ctx context.Context, nodes []Participant, f func(context.Context, int, Participant, bool) error, rounds *int) []error {
	errs := make([]error, len(nodes))
	pending := make([]int, len(nodes))
	for i := range pending {
		pending[i] = i
	}
	deadline := time.Now().Add(c.cfg.CommitRetry)
	pause := retryBackoff
	for round := 0; len(pending) > 0; round++ {
		if round > 0 {
			if time.Now().Add(pause).After(deadline) {
				break
			}
			time.Sleep(pause)
			pause = min(2*pause, maxBackoff)
		}
		*rounds = round + 1
		sub := make([]Participant, len(pending))
		for k, i := range pending {
			sub[k] = nodes[i]
		}
		again := round > 0
		rerrs := each(ctx, sub, c.cfg.Timeout, func(ctx context.Context, k int, p Participant) error {
			return f(ctx, pending[k], p, again)
		})
		var still []int
		for k, i := range pending {
			errs[i] = rerrs[k]
			if rerrs[k] != nil {
				still = append(still, i)
			}
		}
		pending = still
	}
	return errs
}

// err describes a commit that did not switch every node, or nil.
func (o commitOutcome) err(v uint64) error {
	if len(o.failed) == 0 {
		return nil
	}
	if o.rolledBack {
		return fmt.Errorf("publish version %d: commit failed on %s after %d attempts; rolled back: every node serves the previous version again: %w",
			v, o.names(o.failed), o.attempts, o.failErr)
	}
	var on []int
	for i, c := range o.committed {
		if c {
			on = append(on, i)
		}
	}
	return fmt.Errorf("publish version %d: commit failed on %s after %d attempts, and %s could not be switched back: "+
		"%s serve version %d, the others the previous version; publish again: %w",
		v, o.names(o.failed), o.attempts, o.names(o.stuck), o.names(on), v, errors.Join(o.failErr, o.stuckErr))
}

// participantNames lists the names of nodes[idx...].
func participantNames(nodes []Participant, idx []int) string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = nodes[i].Name()
	}
	return strings.Join(names, ", ")
}
