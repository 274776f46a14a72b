package dataplane

import "strings"

// Priorities of the base chains. IPVS takes packets in LOCAL_IN at 98 and
// in LOCAL_OUT at -99; the filter chains that must see the virtual address
// before IPVS rewrites it run ahead of it.
const (
	priorityDstNAT        = -100
	prioritySrcNAT        = 100
	priorityFilter        = 0
	priorityBeforeIPVSOut = -150
)

// masqueradeMark is the fwmark bit that marks packets for masquerade.
func (n *Node) masqueradeMark() uint32 {
	bit := n.MasqueradeBit
	if bit == 0 {
		bit = 14
	}
	return 1 << bit
}

// ruleTables returns the tables of both families.
func (n *Node) ruleTables() []*ruleTable {
	return []*ruleTable{n.ruleTable(false), n.ruleTable(true)}
}

// renderRules prints both families' tables; the plan replaces a table when
// this text changes.
func renderRules(n *Node) string {
	var b strings.Builder
	for _, t := range n.ruleTables() {
		b.WriteString(t.String())
	}
	return b.String()
}

// ruleTable builds one family's table, rule for rule the meaning of
// kube-proxy's IPVS-mode iptables rules (docs/kube-proxy-ipvs-semantics.md
// §3). Rules kube-proxy writes only while a set is non-empty are always
// present here: matching an empty set costs next to nothing, and the table
// then depends on the node's settings alone.
func (n *Node) ruleTable(ipv6 bool) *ruleTable {
	set := func(name string, dirs ...string) setMatch {
		return setMatch{set: SetName(name, ipv6), dirs: dirs}
	}
	jump := func(chain string) action { return action{verdict: "jump", chain: chain} }
	verdict := func(v string) action { return action{verdict: v} }
	r := func(a action, m ...match) rule { return rule{matches: m, action: a} }
	mark := n.masqueradeMark()

	services := []rule{
		r(verdict("return"), srcLoopback{}),
		r(jump("KUBE-LOAD-BALANCER"), set(SetLoadBalancer, "dst", "dst")),
		n.clusterIPMasquerade(ipv6, set(SetClusterIP, "dst", "dst")),
		r(jump("KUBE-MARK-MASQ"), set(SetExternalIP, "dst", "dst")),
		r(verdict("accept"), set(SetExternalIP, "dst", "dst")),
		r(verdict("accept"), set(SetExternalIPLocal, "dst", "dst")),
		r(jump("KUBE-NODE-PORT"), dstLocal{}),
		r(verdict("accept"), set(SetClusterIP, "dst", "dst")),
		r(verdict("accept"), set(SetLoadBalancer, "dst", "dst")),
	}
	var nodePort []rule
	for _, p := range []struct {
		proto      Protocol
		set, local string
		dirs       []string
	}{
		{TCP, SetNodePortTCP, SetNodePortLocalTCP, []string{"dst"}},
		{UDP, SetNodePortUDP, SetNodePortLocalUDP, []string{"dst"}},
		{SCTP, SetNodePortSCTP, SetNodePortLocalSCTP, []string{"dst", "dst"}},
	} {
		nodePort = append(nodePort,
			r(verdict("return"), l4proto{p.proto}, set(p.local, p.dirs...)),
			r(jump("KUBE-MARK-MASQ"), l4proto{p.proto}, set(p.set, p.dirs...)))
	}
	snat := r(verdict("masquerade fully-random"))
	snat.comment = "kubernetes service traffic requiring SNAT"

	return &ruleTable{ipv6: ipv6, chains: []ruleChain{
		{name: "nat-prerouting", hook: &chainHook{"nat", "prerouting", priorityDstNAT}, rules: []rule{r(jump("KUBE-SERVICES"))}},
		{name: "nat-output", hook: &chainHook{"nat", "output", priorityDstNAT}, rules: []rule{r(jump("KUBE-SERVICES"))}},
		{name: "nat-postrouting", hook: &chainHook{"nat", "postrouting", prioritySrcNAT}, rules: []rule{r(jump("KUBE-POSTROUTING"))}},
		{name: "filter-input", hook: &chainHook{"filter", "input", priorityFilter}, rules: []rule{
			r(jump("KUBE-IPVS-FILTER")), r(jump("KUBE-PROXY-FIREWALL")),
		}},
		{name: "filter-forward", hook: &chainHook{"filter", "forward", priorityFilter}, rules: []rule{
			r(jump("KUBE-PROXY-FIREWALL")), r(jump("KUBE-FORWARD")),
		}},
		{name: "filter-output", hook: &chainHook{"filter", "output", priorityBeforeIPVSOut}, rules: []rule{
			r(jump("KUBE-IPVS-OUT-FILTER")),
		}},
		{name: "KUBE-SERVICES", rules: services},
		{name: "KUBE-LOAD-BALANCER", rules: []rule{
			r(verdict("return"), set(SetLoadBalancerLocal, "dst", "dst")),
			r(jump("KUBE-MARK-MASQ")),
		}},
		{name: "KUBE-NODE-PORT", rules: nodePort},
		{name: "KUBE-POSTROUTING", rules: []rule{
			r(verdict("masquerade"), set(SetLoopBack, "dst", "dst", "src")),
			r(verdict("return"), markSet{mark: mark, invert: true}),
			r(action{verdict: "mark-xor", mark: mark}),
			snat,
		}},
		{name: "KUBE-MARK-MASQ", rules: []rule{r(action{verdict: "mark-or", mark: mark})}},
		{name: "KUBE-PROXY-FIREWALL", rules: []rule{
			r(jump("KUBE-SOURCE-RANGES-FIREWALL"), set(SetLoadBalancerFW, "dst", "dst")),
		}},
		{name: "KUBE-SOURCE-RANGES-FIREWALL", rules: []rule{
			r(verdict("return"), set(SetLoadBalancerSourceNet, "dst", "dst", "src")),
			r(verdict("return"), set(SetLoadBalancerSourceIP, "dst", "dst", "src")),
			r(verdict("drop")),
		}},
		{name: "KUBE-FORWARD", rules: []rule{
			r(verdict("accept"), markSet{mark: mark}),
			r(verdict("accept"), ctState{"established,related"}),
		}},
		{name: "KUBE-IPVS-FILTER", rules: []rule{
			r(verdict("return"), set(SetLoadBalancer, "dst", "dst")),
			r(verdict("return"), set(SetClusterIP, "dst", "dst")),
			r(verdict("return"), set(SetExternalIP, "dst", "dst")),
			r(verdict("return"), set(SetExternalIPLocal, "dst", "dst")),
			r(verdict("return"), set(SetHealthCheckNodePort, "dst")),
			r(verdict("reject"), ctState{"new"}, set(SetIPVSAddresses, "dst")),
		}},
		// Traffic the node itself sends to a load balancer with source
		// ranges leaves from the virtual address; it passes only where a
		// range holds a node address (KUBE-LOAD-BALANCER-SOURCE-IP).
		{name: "KUBE-IPVS-OUT-FILTER", rules: []rule{
			r(jump("KUBE-SOURCE-RANGES-FIREWALL"), set(SetLoadBalancerFW, "dst", "dst")),
		}},
	}}
}

// clusterIPMasquerade is the rule that marks traffic to cluster IPs for
// masquerade: all of it, what does not come from a pod, or with no way to
// tell pods, what leaves from a cluster IP.
func (n *Node) clusterIPMasquerade(ipv6 bool, clusterIP setMatch) rule {
	masq := action{verdict: "jump", chain: "KUBE-MARK-MASQ"}
	var cidrs []match
	for _, p := range n.ClusterCIDRs {
		if p.Addr().Is6() == ipv6 {
			cidrs = append(cidrs, srcNet{prefix: p.Masked(), invert: true})
		}
	}
	switch {
	case n.MasqueradeAll:
		return rule{matches: []match{clusterIP}, action: masq}
	case len(cidrs) > 0:
		return rule{matches: append([]match{clusterIP}, cidrs...), action: masq}
	case n.PodInterfacePrefix != "":
		return rule{matches: []match{clusterIP, inInterface{name: n.PodInterfacePrefix, prefix: true, invert: true}}, action: masq}
	case n.PodBridge != "":
		return rule{matches: []match{clusterIP, inInterface{name: n.PodBridge, invert: true}}, action: masq}
	}
	clusterIP.dirs = []string{"src", "dst"}
	return rule{matches: []match{clusterIP}, action: masq}
}
