package main

import (
	"os"
	"os/signal"
	"syscall"
)

// ignoreHangup keeps SIGHUP from stopping a long-running role (node, front,
// up): Go's default action for it is to exit, so a closed terminal or a
// stray `kill -HUP` — which nginx and HAProxy take as "reload" — would take
// the server, or a whole cluster, down. Reload is not implemented yet
// (issue 10), so the signal is only logged through logf. Call the returned
// function to stop catching it.
func ignoreHangup(logf func(msg string)) (stop func()) {
	c := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(c, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-c:
				logf("SIGHUP ignored: reload is not implemented; SIGTERM or SIGINT stops")
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(c)
		close(done)
	}
}
