package plan

import "strings"

// KubeProxyChain is a chain that kube-proxy's IPVS mode made with
// iptables-nft, in the nftables table (nat or filter) of one family.
type KubeProxyChain struct {
	IPv6  bool
	Table string
	Chain string
}

// String returns "ip nat KUBE-SERVICES" or "ip6 filter KUBE-FORWARD".
func (c KubeProxyChain) String() string {
	family := "ip"
	if c.IPv6 {
		family = "ip6"
	}
	return family + " " + c.Table + " " + c.Chain
}

// Compare orders chains by family, table and name.
func (c KubeProxyChain) Compare(o KubeProxyChain) int {
	return strings.Compare(c.String(), o.String())
}
