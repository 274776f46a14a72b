package main

import (
	"os"
	"path/filepath"
	"strings"
)

// kernelHasIPv6 reports whether the kernel runs IPv6, as kube-proxy's
// platformCheckSupported decides whether to run an IPv6 proxier beside
// the IPv4 one: the kernel lists its IPv6 addresses in net/if_inet6
// (absent when booted with ipv6.disable=1), and sys/net/ipv6/conf/all/
// disable_ipv6 is not 1. proc is the proc file system's mount point.
func kernelHasIPv6(proc string) bool {
	if _, err := os.Stat(filepath.Join(proc, "net", "if_inet6")); err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(proc, "sys", "net", "ipv6", "conf", "all", "disable_ipv6"))
	return err != nil || strings.TrimSpace(string(b)) != "1"
}
