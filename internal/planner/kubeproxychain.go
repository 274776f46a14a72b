package planner

import (
	"slices"
	"strings"

	"github.com/ipvsplane/ipvsplane/inet"
)

// KubeProxyChain is what kube-proxy left in the node's rules: a chain of
// its IPVS or iptables mode in an iptables table (nat, filter or mangle)
// of one family, or, with Chain empty, the whole nftables table of its
// nftables mode (Table KubeProxyNFTable).
type KubeProxyChain struct {
	Family inet.Family
	Table  string
	Chain  string
}

// KubeProxyNFTable is the table kube-proxy's nftables mode writes in the
// ip and ip6 families.
const KubeProxyNFTable = "kube-proxy"

// kubeProxyChains names, per iptables table, the chains kube-proxy makes:
// those its IPVS mode removes with --cleanup (pkg/proxy/ipvs,
// iptablesCleanupChains) and those its iptables mode removes (pkg/proxy/
// iptables, CleanupLeftovers), the canary included. Chains of the same
// tables that other programs make (kubelet's KUBE-FIREWALL and
// KUBE-KUBELET-CANARY, a CNI's, the node's own) are not in it.
var kubeProxyChains = map[string][]string{
	"nat": {"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-MARK-MASQ",
		"KUBE-NODEPORTS", "KUBE-PROXY-CANARY"},
	"filter": {"KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER",
		"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-CANARY"},
	"mangle": {"KUBE-PROXY-CANARY"},
}

// kubeProxyServiceChainPrefixes begin the names of the per-service and
// per-endpoint chains of kube-proxy's iptables mode, which its cleanup
// finds by name in the nat table.
var kubeProxyServiceChainPrefixes = []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-SEP-", "KUBE-FW-", "KUBE-EXT-"}

// IsKubeProxyChain reports whether a chain of an iptables table (nat,
// filter, mangle) is one kube-proxy's cleanup removes.
func IsKubeProxyChain(table, chain string) bool {
	if slices.Contains(kubeProxyChains[table], chain) {
		return true
	}
	if table != "nat" {
		return false
	}
	for _, p := range kubeProxyServiceChainPrefixes {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// String returns "ip nat KUBE-SERVICES", "ip6 filter KUBE-FORWARD", or
// "table ip kube-proxy" for a whole table.
func (c KubeProxyChain) String() string {
	family := "ip"
	if c.Family == inet.IPv6 {
		family = "ip6"
	}
	if c.Chain == "" {
		return "table " + family + " " + c.Table
	}
	return family + " " + c.Table + " " + c.Chain
}

// Compare orders chains by family, table and name.
func (c KubeProxyChain) Compare(o KubeProxyChain) int {
	return strings.Compare(c.String(), o.String())
}
