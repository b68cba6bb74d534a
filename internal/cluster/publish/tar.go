package publish

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"shoal/internal/base/sitetar"
)

// WriteVersion writes the tree of version v as a tar stream (PAX, so
// modification times keep their nanoseconds and every host computes the
// same ETags): what nodes on other hosts fetch in their prepare phase
// (GET /publish/versions/{v} on the admin API).
func (c *Coordinator) WriteVersion(w io.Writer, v uint64) error {
	root := filepath.Join(c.cfg.Versions, versionDir(v))
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return fmt.Errorf("publish: version %d: %w", v, fs.ErrNotExist)
	}
	return sitetar.Write(w, root)
}
