package main

import (
	"os"
	"os/signal"
	"syscall"
)

// The signals a long-running role (node, front, up) takes, as nginx does:
//
//   - SIGHUP reloads: front, its --config file and certificates; node,
//     its --root; up, publishes its site folder again. It also reopens the
//     access log, as it always has.
//   - SIGUSR1 reopens the log files and does nothing else: what logrotate
//     sends after renaming them (deploy/logrotate.conf), which must not
//     touch the configuration or, on `shoal up`, republish the site.
//   - SIGINT and SIGTERM stop gracefully.
//
// docs/operations.md lists them for operators.
var (
	sigReload = syscall.SIGHUP
	sigReopen = syscall.SIGUSR1
)

// ignoreHangup keeps SIGHUP and SIGUSR1 from stopping a long-running role
// while it starts: Go's default action for both is to exit, so a closed
// terminal, a stray `kill -HUP` or a log rotation in that window would take
// the server, or a whole cluster, down. Once a role's signal loop runs, it
// takes them itself and calls the returned function to stop catching them
// here.
func ignoreHangup(logf func(msg string)) (stop func()) {
	c := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(c, sigReload, sigReopen)
	go func() {
		for {
			select {
			case s := <-c:
				what := "reload begins"
				if s == sigReopen {
					what = "log reopening begins"
				}
				logf(signalName(s) + " ignored while starting: " + what + " once serving; SIGTERM or SIGINT stops")
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

// signalName is "SIGHUP", "SIGUSR1", … as operators type them.
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGTERM:
		return "SIGTERM"
	case os.Interrupt:
		return "SIGINT"
	}
	return s.String()
}
