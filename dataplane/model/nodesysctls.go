package model

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
