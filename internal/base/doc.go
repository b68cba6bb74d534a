// Package base is the shared base every tier builds on: the strict HTTP/1.1
// wire format (httpwire), a site's files and their confinement (content,
// vhost, precompress, sitetar), byte-budgeted caches (cache), a node's object
// store over memory and disk (store), tables outside the Go heap (offheap),
// access-log formats (trace),
// authenticated frames between machines (peerwire, wire), the accept loop
// (accept), a timer queue (timeq), the runtime monitor (sysmon), the
// process's own CPU and memory (procstat), raw socket I/O (rawio) and an
// io_uring ring (uring), and plots (figure).
//
// Packages under base import only the standard library, well-kept modules and
// each other: nothing here knows about clusters, PoPs or tools, so either tier
// can use any of it.
package base
