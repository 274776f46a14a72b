package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/inet"
)

func TestIsKubeProxyChain(t *testing.T) {
	for _, c := range []struct {
		table, chain string
		want         bool
	}{
		{"nat", "KUBE-SERVICES", true}, {"nat", "KUBE-SVC-XPGD46QRK7WJZT7O", true}, {"nat", "KUBE-SEP-C6EBXVWJJZMIWKLZ", true},
		{"nat", "KUBE-FW-4HXBLDMN2JPYAU5Q", true}, {"nat", "KUBE-NODEPORTS", true}, {"filter", "KUBE-EXTERNAL-SERVICES", true},
		{"filter", "KUBE-IPVS-FILTER", true}, {"mangle", "KUBE-PROXY-CANARY", true},
		// kubelet's, other programs', and service-chain names outside nat.
		{"filter", "KUBE-FIREWALL", false}, {"nat", "KUBE-KUBELET-CANARY", false}, {"mangle", "KUBE-KUBELET-CANARY", false},
		{"nat", "KUBE-MARK-DROP", false}, {"nat", "CNI-HOSTPORT-DNAT", false}, {"nat", "DOCKER", false},
		{"filter", "KUBE-SVC-XPGD46QRK7WJZT7O", false}, {"mangle", "KUBE-SERVICES", false}, {"raw", "KUBE-PROXY-CANARY", false},
	} {
		if got := IsKubeProxyChain(c.table, c.chain); got != c.want {
			t.Errorf("IsKubeProxyChain(%s, %s) = %v", c.table, c.chain, got)
		}
	}
}

func TestRemoveKubeProxyRulesString(t *testing.T) {
	op := RemoveKubeProxyRules{Chains: []KubeProxyChain{{Table: KubeProxyNFTable}, {Family: inet.IPv6, Table: "nat", Chain: "KUBE-SERVICES"}}}
	if got, want := op.String(), "kube-proxy remove table ip kube-proxy, ip6 nat KUBE-SERVICES"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	op.Chains = nil
	for i := range 25 {
		op.Chains = append(op.Chains, KubeProxyChain{Table: "nat", Chain: fmt.Sprintf("KUBE-SEP-%02d", i)})
	}
	if got := op.String(); !strings.HasSuffix(got, "ip nat KUBE-SEP-19, and 5 more") {
		t.Errorf("%q", got)
	}
}
