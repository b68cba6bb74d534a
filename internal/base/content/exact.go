package content

// Exact returns the entry whose cleaned URL is exactly url, or nil. Unlike
// Lookup it neither decodes nor cleans, so a name built from another entry's
// URL (the node's "name.gz" and "name.br" variants) cannot be reinterpreted
// through '%' or '?' in a file name. It does not allocate.
func (t *Table) Exact(url string) *Entry {
	return t.entries[url]
}
