package randomcluster

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NeighbourRules are the neighbours' packet rules for the node, in the
// syntax of the programs that write them.
type NeighbourRules struct {
	// IPTables is, per family, input of iptables-restore --noflush (the
	// nf_tables flavour the CNI plugins, Docker and kube-proxy use).
	IPTables map[corev1.IPFamily]string
	// ForwardDrop are the families whose FORWARD policy is DROP.
	ForwardDrop []corev1.IPFamily
	// NFT is input of nft -f: kube-proxy's nftables mode's tables.
	NFT string
}

// Rules renders the neighbours for the Services as the API server stored
// them (stored returns nil for a Service it refused): portmap's and
// Docker's chains, in the order the programs add them; the CNI's FORWARD
// accept rules; and the leftovers of kube-proxy's other modes, whose
// jumps kube-proxy inserted first.
func (n *Neighbours) Rules(env Env, stored func(name string) *corev1.Service) NeighbourRules {
	out := NeighbourRules{IPTables: map[corev1.IPFamily]string{}}
	nat, filter := map[corev1.IPFamily]*ruleTable{}, map[corev1.IPFamily]*ruleTable{}
	for _, f := range env.Families() {
		nat[f], filter[f] = &ruleTable{name: "nat"}, &ruleTable{name: "filter"}
	}
	n.portmapRules(env, nat)
	n.dockerRules(env, nat[corev1.IPv4Protocol])
	if n.ForwardDrop != nil {
		out.ForwardDrop = env.Families()
		for _, f := range n.ForwardDrop.AcceptFamilies {
			if filter[f] == nil {
				continue
			}
			for _, dir := range []string{"-s", "-d"} {
				filter[f].add("-A FORWARD %s %s -m comment --comment \"flanneld forward\" -j ACCEPT", dir, env.ClusterCIDRs[f])
			}
		}
	}
	var leftovers []resolvedLeftover
	for _, l := range n.IPTablesLeftovers {
		leftovers = append(leftovers, resolveLeftover(l, stored)...)
	}
	iptablesLeftoverRules(env, leftovers, nat, filter)
	leftovers = nil
	for _, l := range n.NFTablesLeftovers {
		leftovers = append(leftovers, resolveLeftover(l, stored)...)
	}
	if len(n.NFTablesLeftovers) > 0 {
		out.NFT = nftablesLeftovers(env, leftovers)
	}
	for _, f := range env.Families() {
		out.IPTables[f] = nat[f].String() + filter[f].String()
	}
	return out
}

// ruleTable is one table of iptables-restore input: the chains it
// declares and its rules, in order.
type ruleTable struct {
	name   string
	chains []string
	rules  []string
}

func (t *ruleTable) chain(name string) {
	if !slices.Contains(t.chains, name) {
		t.chains = append(t.chains, name)
	}
}

func (t *ruleTable) add(format string, a ...any) {
	t.rules = append(t.rules, fmt.Sprintf(format, a...))
}

func (t *ruleTable) String() string {
	if len(t.rules) == 0 && len(t.chains) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", t.name)
	for _, c := range t.chains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, r := range t.rules {
		b.WriteString(r + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

func lowerProto(p corev1.Protocol) string { return strings.ToLower(string(p)) }

// hostPort renders an address and port as DNAT's --to-destination reads
// it.
func hostPort(a netip.Addr, port int32) string { return netip.AddrPortFrom(a, uint16(port)).String() }

// portmapRules writes what the CNI portmap plugin writes for each pod's
// host port: the shared CNI-HOSTPORT-DNAT chain, jumped to for local
// destinations, a CNI-DN- chain per pod with the mark for masquerade of
// hairpin and localhost connections, and the DNAT to the pod.
func (n *Neighbours) portmapRules(env Env, nat map[corev1.IPFamily]*ruleTable) {
	jump := "-A %s"
	if n.PortmapPrepend {
		jump = "-I %s 1"
	}
	for _, h := range n.HostPorts {
		t := nat[h.Family]
		if t == nil {
			continue
		}
		if !slices.Contains(t.chains, "CNI-HOSTPORT-DNAT") {
			t.chain("CNI-HOSTPORT-SETMARK")
			t.chain("CNI-HOSTPORT-MASQ")
			t.chain("CNI-HOSTPORT-DNAT")
			t.add("-A CNI-HOSTPORT-SETMARK -m comment --comment \"CNI portfwd masquerade mark\" -j MARK --set-xmark 0x2000/0x2000")
			t.add("-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE")
			t.add("-I POSTROUTING 1 -m comment --comment \"CNI portfwd requiring masquerade\" -j CNI-HOSTPORT-MASQ")
			for _, c := range []string{"PREROUTING", "OUTPUT"} {
				t.add(jump+" -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT", c)
			}
		}
		dn := "CNI-DN-" + h.Container[:14]
		proto, port := lowerProto(h.Protocol), h.Port
		pod := env.NeighbourPod(h.Family)
		t.chain(dn)
		t.add("-I CNI-HOSTPORT-DNAT 1 -p %s -m comment --comment \"dnat name: \\\"cbr0\\\" id: \\\"%s\\\"\" -m multiport --dports %d -j %s", proto, h.Container, port, dn)
		t.add("-A %s -s %s -p %s -m %s --dport %d -j CNI-HOSTPORT-SETMARK", dn, netip.PrefixFrom(pod, env.PodCIDRs[h.Family].Bits()).Masked(), proto, proto, port)
		if h.Family == corev1.IPv4Protocol {
			t.add("-A %s -s 127.0.0.1/32 -p %s -m %s --dport %d -j CNI-HOSTPORT-SETMARK", dn, proto, proto, port)
		}
		t.add("-A %s -p %s -m %s --dport %d -j DNAT --to-destination %s", dn, proto, proto, port, hostPort(pod, NeighbourTargetPort(HostPortNeighbour, h.Protocol)))
	}
}

// dockerRules writes Docker's nat rules for its published ports: the
// DOCKER chain for local destinations, and its bridge's masquerade.
func (n *Neighbours) dockerRules(env Env, nat *ruleTable) {
	if len(n.DockerPorts) == 0 || nat == nil {
		return
	}
	nat.chain("DOCKER")
	nat.add("-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER")
	nat.add("-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER")
	nat.add("-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE")
	nat.add("-A DOCKER -i docker0 -j RETURN")
	to := hostPort(env.NeighbourPod(corev1.IPv4Protocol), NeighbourTargetPort(DockerNeighbour, corev1.ProtocolTCP))
	for _, d := range n.DockerPorts {
		nat.add("-A DOCKER ! -i docker0 -p tcp -m tcp --dport %d -j DNAT --to-destination %s", d.Port, to)
	}
}

// resolvedLeftover is a leftover with the addresses the API server gave
// its Service.
type resolvedLeftover struct {
	Leftover
	id        string // namespace/name:port, as kube-proxy's comments name it
	family    corev1.IPFamily
	clusterIP netip.Addr
	proto     corev1.Protocol
	port      int32
	nodePort  int32
}

// resolveLeftover returns the leftover once per family of its Service's
// cluster IPs, or nothing if the Service was refused, is headless, or
// the port is SCTP or has no node port where one is needed.
func resolveLeftover(l Leftover, stored func(string) *corev1.Service) []resolvedLeftover {
	svc := stored(l.Service)
	if svc == nil || l.Port >= len(svc.Spec.Ports) || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	p := svc.Spec.Ports[l.Port]
	if p.Protocol == corev1.ProtocolSCTP || l.What == LeftoverNodePort && p.NodePort == 0 {
		return nil
	}
	var out []resolvedLeftover
	for i, s := range svc.Spec.ClusterIPs {
		a, err := netip.ParseAddr(s)
		if err != nil || i > 0 && l.What == LeftoverClusterIP {
			continue
		}
		f := corev1.IPv4Protocol
		if a.Is6() {
			f = corev1.IPv6Protocol
		}
		out = append(out, resolvedLeftover{
			Leftover: l, id: fmt.Sprintf("%s/%s:%s", svc.Namespace, svc.Name, p.Name), family: f,
			clusterIP: a, proto: p.Protocol, port: p.Port, nodePort: p.NodePort,
		})
	}
	return out
}

// chainHash names a leftover's chains as kube-proxy does, by a hash of
// the service port (a different hash; the names only need to be its
// shape).
func chainHash(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return strings.ToUpper(fmt.Sprintf("%016x", h.Sum64()))
}
