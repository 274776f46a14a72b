// Command pause holds a pod's namespaces open: the container runtime starts
// it first in every pod sandbox. It waits for SIGTERM or SIGINT and, as the
// sandbox's PID 1 when the pod shares its process namespace, reaps the
// orphans re-parented to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
