package content

import "fmt"

// Staged is a scanned table waiting to be swapped in: the first phase of a
// two-phase publish (internal/cluster/publish). Preparing does the slow, fallible
// part — reading the whole tree — so that committing is a pointer swap
// that cannot fail, which is what lets several nodes switch together.
type Staged struct {
	t *Table
}

// Root is the resolved root the staged table was scanned from.
func (st *Staged) Root() string { return st.t.root }

// Files is the number of files in the staged table.
func (st *Staged) Files() int { return st.t.files }

// Prepare scans newRoot completely and returns it staged, without changing
// what the Store serves. Discarding the result aborts the publish.
func (s *Store) Prepare(newRoot string) (*Staged, error) {
	t, err := scan(newRoot)
	if err != nil {
		return nil, fmt.Errorf("publish: prepare: %w", err)
	}
	return &Staged{t: t}, nil
}

// Commit swaps st in as the current Table with Version+1 and returns what
// changed against the table it replaces. A Staged commits once; a second
// Commit of the same one is an error.
func (s *Store) Commit(st *Staged) (Diff, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == nil || st.t == nil {
		return Diff{}, fmt.Errorf("publish: commit: nothing prepared")
	}
	old := s.cur.Load()
	t := st.t
	st.t = nil
	t.version = old.version + 1
	d := diff(old, t)
	s.cur.Store(t)
	return d, nil
}
