package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Sysctl is one kernel setting under /proc/sys.
type Sysctl struct {
	Name  string // "net/ipv4/vs/conntrack"
	Value int
}

// Sysctls returns the settings kube-proxy's IPVS mode makes (see
// docs/kube-proxy-ipvs-semantics.md §7): IPVS keeps conntrack entries so
// the masquerade rules see its flows; connections to a deleted real server
// expire on their next packet, and so do persistence templates of a
// drained one; the node forwards; with strict ARP it neither answers nor
// announces ARP for the VIPs on the dummy device. conn_reuse_mode is left
// as it is: kube-proxy changes it only on kernels before 5.9.
func (n *Node) Sysctls() []Sysctl {
	s := []Sysctl{
		{"net/ipv4/vs/conntrack", 1},
		{"net/ipv4/vs/expire_nodest_conn", 1},
		{"net/ipv4/vs/expire_quiescent_template", 1},
		{"net/ipv4/ip_forward", 1},
	}
	if n.StrictARP {
		s = append(s, Sysctl{"net/ipv4/conf/all/arp_ignore", 1}, Sysctl{"net/ipv4/conf/all/arp_announce", 2})
	}
	return s
}

// ErrNoSysctl is matched by the error of a setting the kernel does not have
// (the IPVS ones without the ip_vs module).
var ErrNoSysctl = errors.New("no such kernel setting")

// WriteSysctls writes each setting below root (normally /proc/sys) whose
// value differs, and returns the names it changed. It must run in the
// network namespace the settings are for.
func WriteSysctls(root string, settings []Sysctl) ([]string, error) {
	var changed []string
	for _, s := range settings {
		path := filepath.Join(root, s.Name)
		cur, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return changed, fmt.Errorf("dataplane: sysctl %s: %w (%w)", s.Name, ErrNoSysctl, err)
		}
		if err != nil {
			return changed, fmt.Errorf("dataplane: sysctl %s: %w", s.Name, err)
		}
		want := strconv.Itoa(s.Value)
		if string(bytes.TrimSpace(cur)) == want {
			continue
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			return changed, fmt.Errorf("dataplane: sysctl %s = %s: %w", s.Name, want, err)
		}
		changed = append(changed, s.Name)
	}
	return changed, nil
}
