package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
)

// IPv6 reports whether the dataplane serves IPv6: false on a kernel
// without it (booted with ipv6.disable=1, or with
// net.ipv6.conf.all.disable_ipv6 set), where it serves IPv4 alone, as
// kube-proxy then runs single-stack.
func (d *Dataplane) IPv6() bool { return d.settings.ipv6 }

// hasIPv6 decides what kube-proxy's platformCheckSupported decides, from
// a namespace's /proc/net and /proc/sys: IPv6 is there when net's if_inet6
// exists (ipv6.disable=1 leaves it out) and sys's
// net/ipv6/conf/all/disable_ipv6 is not 1.
func hasIPv6(procNet, procSys string) (bool, error) {
	if _, err := os.Stat(filepath.Join(procNet, "if_inet6")); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("dataplane: looking for IPv6: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(procSys, "net", "ipv6", "conf", "all", "disable_ipv6"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dataplane: looking for IPv6: %w", err)
	}
	return string(bytes.TrimSpace(b)) != "1", nil
}

// served returns state as the dataplane serves it: on a kernel without
// IPv6 with the node IPv4Only (a copy), else state itself.
func (n *nodeSettings) served(state *model.State) *model.State {
	if n.ipv6 || state.Node.IPv4Only {
		return state
	}
	s := *state
	s.Node.IPv4Only = true
	return &s
}
