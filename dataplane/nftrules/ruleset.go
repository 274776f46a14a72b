package nftrules

import (
	"slices"
	"strings"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/inet"
)

// Priorities of the base chains. IPVS takes packets in LOCAL_IN at 98 and
// in LOCAL_OUT at -99; the filter chains that must see the virtual address
// before IPVS rewrites it run ahead of it.
//
// The nat chains run just ahead of dstnat and srcnat (-100 and 100),
// where iptables' nat table (both flavours), Docker, the CNI portmap plugin,
// firewalld and kube-proxy's nftables mode hook theirs: kube-proxy inserts
// its KUBE-SERVICES and KUBE-POSTROUTING jumps first in those chains. They
// stay behind mangle (-150), as kube-proxy's do, so that a mangle rule
// setting the mark cannot clear the masquerade bit after it is set.
const (
	priorityDstNAT        = -101
	prioritySrcNAT        = 99
	priorityFilter        = 0
	priorityBeforeIPVSOut = -150
)

// masqueradeMark is the fwmark that marks packets for masquerade.
func masqueradeMark(n *model.Node) uint32 {
	if n.MasqueradeMark == 0 {
		return 1 << 14
	}
	return n.MasqueradeMark
}

// nodeTables returns the tables of both families, or the ip one alone
// on an IPv4Only node.
func nodeTables(n *model.Node) []*ruleTable {
	if n.IPv4Only {
		return []*ruleTable{nodeTable(n, inet.IPv4)}
	}
	return []*ruleTable{nodeTable(n, inet.IPv4), nodeTable(n, inet.IPv6)}
}

// Render prints both families' tables; the plan replaces a table when
// this text changes.
func Render(n *model.Node) string {
	var b strings.Builder
	for _, t := range nodeTables(n) {
		b.WriteString(t.String())
	}
	return b.String()
}

// nodeTable builds one family's table, rule for rule the meaning of
// kube-proxy's IPVS-mode iptables rules (docs/kube-proxy-ipvs-semantics.md
// §3). Rules kube-proxy writes only while a set is non-empty are always
// present here: matching an empty set costs next to nothing, and the table
// then depends on the node's settings alone.
func nodeTable(n *model.Node, family inet.Family) *ruleTable {
	f := familyRules{family: family, mark: masqueradeMark(n)}
	return &ruleTable{family: family, chains: slices.Concat(hookChains(), natChains(n, f), f.filterChains())}
}

// familyRules is what the rules of one family's table are built from.
type familyRules struct {
	family inet.Family
	// mark is the masquerade mark.
	mark uint32
}

// set matches the family's set of the name.
func (f familyRules) set(name string, dirs ...string) setMatch {
	return setMatch{set: model.SetName(name, f.family), dirs: dirs}
}

func jump(chain string) action { return action{verdict: "jump", chain: chain} }

func verdict(v string) action { return action{verdict: v} }

// newRule is the rule that takes action a on packets that match all of m.
func newRule(a action, m ...match) rule { return rule{matches: m, action: a} }

// hookChains are the base chains, which send packets from the kernel's
// hooks to the chains named after kube-proxy's.
func hookChains() []ruleChain {
	return []ruleChain{
		{name: "nat-prerouting", hook: &chainHook{"nat", "prerouting", priorityDstNAT}, rules: []rule{newRule(jump("KUBE-SERVICES"))}},
		{name: "nat-output", hook: &chainHook{"nat", "output", priorityDstNAT}, rules: []rule{newRule(jump("KUBE-SERVICES"))}},
		{name: "nat-postrouting", hook: &chainHook{"nat", "postrouting", prioritySrcNAT}, rules: []rule{newRule(jump("KUBE-POSTROUTING"))}},
		{name: "filter-input", hook: &chainHook{"filter", "input", priorityFilter}, rules: []rule{
			newRule(jump("KUBE-IPVS-FILTER")), newRule(jump("KUBE-PROXY-FIREWALL")),
		}},
		{name: "filter-forward", hook: &chainHook{"filter", "forward", priorityFilter}, rules: []rule{
			newRule(jump("KUBE-PROXY-FIREWALL")), newRule(jump("KUBE-FORWARD")),
		}},
		{name: "filter-output", hook: &chainHook{"filter", "output", priorityBeforeIPVSOut}, rules: []rule{
			newRule(jump("KUBE-IPVS-OUT-FILTER")),
		}},
	}
}

// claim ends the nat chains for a service's connection, as kube-proxy's
// "-j ACCEPT" at the end of KUBE-SERVICES does in iptables' nat table. An
// accept here would end only this table: the kernel's NAT core hands a
// connection's first packet to every nat base chain at the hook, ours and
// other programs' (iptables-nft, iptables-legacy, other nftables tables), in
// priority order until one of them sets up a binding, so a later chain that
// DNATs any local destination (portmap's CNI-HOSTPORT-DNAT, Docker's DOCKER)
// would still take a virtual address bound on kube-ipvs0. A DNAT to the
// packet's own destination is that binding, and changes nothing: it is
// the null binding the kernel would make anyway. IPVS then takes the packet
// in LOCAL_IN or LOCAL_OUT as before.
//
// The claim holds only for an address bound on the node. Until the address
// is on kube-ipvs0 no virtual server can take the packet, and a binding
// would keep it from the program that serves the address meanwhile:
// kube-proxy's iptables or nftables DNAT during a takeover, whose nat
// chains run after ours (docs/migrating-from-kube-proxy.md).
const claim = "dnat to daddr"

// claimLocal is the rule that claims connections to the set's entries.
func (f familyRules) claimLocal(set string) rule {
	return newRule(verdict(claim), f.set(set, "dst", "dst"), dstLocal{})
}

// natChains are the chains that mark service traffic for masquerade and
// masquerade it.
func natChains(n *model.Node, f familyRules) []ruleChain {
	services := []rule{
		newRule(verdict("return"), srcLoopback{}),
		newRule(jump("KUBE-LOAD-BALANCER"), f.set(model.SetLoadBalancer, "dst", "dst")),
		clusterIPMasquerade(n, f.family, f.set(model.SetClusterIP, "dst", "dst")),
		newRule(jump("KUBE-MARK-MASQ"), f.set(model.SetExternalIP, "dst", "dst")),
		f.claimLocal(model.SetExternalIP),
		f.claimLocal(model.SetExternalIPLocal),
		newRule(jump("KUBE-NODE-PORT"), dstLocal{}),
		f.claimLocal(model.SetClusterIP),
		f.claimLocal(model.SetLoadBalancer),
	}
	snat := newRule(verdict("masquerade fully-random"))
	snat.comment = "kubernetes service traffic requiring SNAT"
	return []ruleChain{
		{name: "KUBE-SERVICES", rules: services},
		{name: "KUBE-LOAD-BALANCER", rules: []rule{
			newRule(verdict("return"), f.set(model.SetLoadBalancerLocal, "dst", "dst")),
			newRule(jump("KUBE-MARK-MASQ")),
		}},
		{name: "KUBE-NODE-PORT", rules: f.nodePortRules()},
		{name: "KUBE-POSTROUTING", rules: []rule{
			newRule(verdict("masquerade"), f.set(model.SetLoopBack, "dst", "dst", "src")),
			newRule(verdict("return"), markSet{mark: f.mark, invert: true}),
			newRule(action{verdict: "mark-xor", mark: f.mark}),
			snat,
		}},
		{name: "KUBE-MARK-MASQ", rules: []rule{newRule(action{verdict: "mark-or", mark: f.mark})}},
	}
}

// nodePortRules mark node-port traffic for masquerade, but for the ports
// of ExternalPolicy Local.
func (f familyRules) nodePortRules() []rule {
	var rules []rule
	for _, p := range []struct {
		proto      inet.Protocol
		set, local string
		dirs       []string
	}{
		{inet.TCP, model.SetNodePortTCP, model.SetNodePortLocalTCP, []string{"dst"}},
		{inet.UDP, model.SetNodePortUDP, model.SetNodePortLocalUDP, []string{"dst"}},
		{inet.SCTP, model.SetNodePortSCTP, model.SetNodePortLocalSCTP, []string{"dst", "dst"}},
	} {
		rules = append(rules,
			newRule(verdict("return"), l4proto{p.proto}, f.set(p.local, p.dirs...)),
			newRule(jump("KUBE-MARK-MASQ"), l4proto{p.proto}, f.set(p.set, p.dirs...)))
	}
	return rules
}

// filterChains are the chains that filter service traffic: source ranges,
// forwarding, and what may reach the virtual addresses.
func (f familyRules) filterChains() []ruleChain {
	return []ruleChain{
		{name: "KUBE-PROXY-FIREWALL", rules: []rule{
			newRule(jump("KUBE-SOURCE-RANGES-FIREWALL"), f.set(model.SetLoadBalancerFW, "dst", "dst")),
		}},
		{name: "KUBE-SOURCE-RANGES-FIREWALL", rules: []rule{
			newRule(verdict("return"), f.set(model.SetLoadBalancerSourceNet, "dst", "dst", "src")),
			newRule(verdict("return"), f.set(model.SetLoadBalancerSourceIP, "dst", "dst", "src")),
			newRule(verdict("drop")),
		}},
		{name: "KUBE-FORWARD", rules: []rule{
			newRule(verdict("accept"), markSet{mark: f.mark}),
			newRule(verdict("accept"), ctState{"established,related"}),
		}},
		{name: "KUBE-IPVS-FILTER", rules: []rule{
			newRule(verdict("return"), f.set(model.SetLoadBalancer, "dst", "dst")),
			newRule(verdict("return"), f.set(model.SetClusterIP, "dst", "dst")),
			newRule(verdict("return"), f.set(model.SetExternalIP, "dst", "dst")),
			newRule(verdict("return"), f.set(model.SetExternalIPLocal, "dst", "dst")),
			newRule(verdict("return"), f.set(model.SetHealthCheckNodePort, "dst")),
			newRule(verdict("reject"), ctState{"new"}, f.set(model.SetIPVSAddresses, "dst")),
		}},
		// Traffic the node itself sends to a load balancer with source
		// ranges leaves from the virtual address; it passes only where a
		// range holds a node address (KUBE-LOAD-BALANCER-SOURCE-IP).
		{name: "KUBE-IPVS-OUT-FILTER", rules: []rule{
			newRule(jump("KUBE-SOURCE-RANGES-FIREWALL"), f.set(model.SetLoadBalancerFW, "dst", "dst")),
		}},
	}
}

// clusterIPMasquerade is the rule that marks traffic to cluster IPs for
// masquerade: all of it, what does not come from a pod, or with no way to
// tell pods, what leaves from a cluster IP.
func clusterIPMasquerade(n *model.Node, family inet.Family, clusterIP setMatch) rule {
	masq := jump("KUBE-MARK-MASQ")
	var cidrs []match
	for _, p := range n.ClusterCIDRs {
		if inet.FamilyOf(p.Addr()) == family {
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
