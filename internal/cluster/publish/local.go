package publish

import (
	"context"

	"shoal/internal/base/content"
)

// LocalNode is a node in this process (node.Server implements it).
type LocalNode interface {
	PreparePublish(v uint64, root string) error
	CommitPublish(v uint64) (content.Diff, error)
	AbortPublish(v uint64)
	RevertPublish(v uint64) (content.Diff, error)
}

// Local makes a node of this process a participant (`shoal up` with relay
// or redirect runs its nodes in-process).
func Local(name string, n LocalNode) Participant { return local{name, n} }

type local struct {
	name string
	n    LocalNode
}

func (l local) Name() string { return l.name }

func (l local) Prepare(_ context.Context, v uint64, root string) error {
	return l.n.PreparePublish(v, root)
}

func (l local) Commit(_ context.Context, v uint64) (content.Diff, error) {
	return l.n.CommitPublish(v)
}

func (l local) Abort(_ context.Context, v uint64) error {
	l.n.AbortPublish(v)
	return nil
}

func (l local) Revert(_ context.Context, v uint64) error {
	_, err := l.n.RevertPublish(v)
	return err
}
