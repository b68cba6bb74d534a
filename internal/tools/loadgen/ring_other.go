//go:build !linux

package loadgen

import (
	"context"
	"errors"
)

// runRing needs io_uring, which only Linux has.
func (r *Runner) runRing(context.Context) (*Result, error) {
	return nil, errors.New("engine uring: Linux only")
}
