package randomcluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// iptablesLeftoverRules writes what kube-proxy's iptables mode leaves for
// the leftovers: in nat, KUBE-SERVICES jumped to first from PREROUTING
// and OUTPUT, a KUBE-SVC- and KUBE-SEP- chain per port DNATing to the
// gone endpoint, KUBE-NODEPORTS for node ports, the masquerade chains; in
// filter, the REJECT of a Service without endpoints (KUBE-SERVICES from
// FORWARD and OUTPUT, KUBE-EXTERNAL-SERVICES from INPUT for node ports).
// kube-proxy's IPVS mode rewrites the nat chains it shares a name with
// and leaves the others.
func iptablesLeftoverRules(env Env, leftovers []resolvedLeftover, nat, filter map[corev1.IPFamily]*ruleTable) {
	for _, f := range env.Families() {
		var mine []resolvedLeftover
		for _, l := range leftovers {
			if l.family == f {
				mine = append(mine, l)
			}
		}
		if len(mine) == 0 {
			continue
		}
		natLeftovers(env, f, mine, nat[f])
		filterLeftovers(mine, filter[f])
	}
}

func natLeftovers(env Env, f corev1.IPFamily, leftovers []resolvedLeftover, t *ruleTable) {
	for _, c := range []string{"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-MARK-MASQ", "KUBE-POSTROUTING"} {
		t.chain(c)
	}
	t.add("-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000")
	t.add("-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN")
	t.add("-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0")
	t.add("-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully")
	host := "/32"
	if f == corev1.IPv6Protocol {
		host = "/128"
	}
	for _, l := range leftovers {
		if l.What == LeftoverNoEndpoints {
			continue
		}
		h := chainHash(l.id + string(l.proto))
		svc, sep, ext := "KUBE-SVC-"+h, "KUBE-SEP-"+chainHash(h), "KUBE-EXT-"+h
		t.chain(svc)
		t.chain(sep)
		proto := lowerProto(l.proto)
		pod := env.NeighbourPod(f)
		to := hostPort(pod, NeighbourTargetPort(IPTablesLeftoversNeighbour, l.proto))
		t.add("-A %s -m comment --comment \"%s -> %s\" -j %s", svc, l.id, to, sep)
		t.add("-A %s -s %s%s -m comment --comment \"%s\" -j KUBE-MARK-MASQ", sep, pod, host, l.id)
		t.add("-A %s -p %s -m comment --comment \"%s\" -m %s -j DNAT --to-destination %s", sep, proto, l.id, proto, to)
		switch l.What {
		case LeftoverClusterIP:
			t.add("-A KUBE-SERVICES -d %s%s -p %s -m comment --comment \"%s cluster IP\" -m %s --dport %d -j %s", l.clusterIP, host, proto, l.id, proto, l.port, svc)
		case LeftoverNodePort:
			t.chain(ext)
			t.add("-A %s -m comment --comment \"masquerade traffic for %s external destinations\" -j KUBE-MARK-MASQ", ext, l.id)
			t.add("-A %s -j %s", ext, svc)
			t.add("-A KUBE-NODEPORTS -p %s -m comment --comment \"%s\" -m %s --dport %d -j %s", proto, l.id, proto, l.nodePort, ext)
		}
	}
	t.add("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS")
	// Inserted first, as kube-proxy does, after the other programs' jumps.
	t.add("-I PREROUTING 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES")
	t.add("-I OUTPUT 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES")
	t.add("-I POSTROUTING 1 -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING")
}

func filterLeftovers(leftovers []resolvedLeftover, t *ruleTable) {
	t.chain("KUBE-SERVICES")
	t.chain("KUBE-EXTERNAL-SERVICES")
	host, reject := "/32", "icmp-port-unreachable"
	for _, l := range leftovers {
		if l.clusterIP.Is6() {
			host, reject = "/128", "icmp6-port-unreachable"
		}
		if l.What != LeftoverNoEndpoints {
			continue
		}
		proto := lowerProto(l.proto)
		t.add("-A KUBE-SERVICES -d %s%s -p %s -m comment --comment \"%s has no endpoints\" -m %s --dport %d -j REJECT --reject-with %s", l.clusterIP, host, proto, l.id, proto, l.port, reject)
		if l.nodePort != 0 {
			t.add("-A KUBE-EXTERNAL-SERVICES -p %s -m comment --comment \"%s has no endpoints\" -m addrtype --dst-type LOCAL -m %s --dport %d -j REJECT --reject-with %s", proto, l.id, proto, l.nodePort, reject)
		}
	}
	t.add("-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES")
	t.add("-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES")
	t.add("-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES")
}

// nftablesLeftovers writes the tables kube-proxy's nftables mode leaves,
// per family: its base chains (nat at dstnat and srcnat, filter at input,
// forward and output), the service-ips and service-nodeports maps with a
// chain per leftover DNATing to the gone endpoint, and the
// no-endpoint-services and no-endpoint-nodeports maps rejecting.
func nftablesLeftovers(env Env, leftovers []resolvedLeftover) string {
	var b strings.Builder
	for _, f := range env.Families() {
		fam, addr, nodeIP := "ip", "ipv4_addr", env.NodeIPs[f]
		if f == corev1.IPv6Protocol {
			fam, addr = "ip6", "ipv6_addr"
		}
		fmt.Fprintf(&b, `table %[1]s kube-proxy {
	comment "rules for kube-proxy"
	set cluster-ips { type %[2]s ; comment "Active ClusterIPs" ; }
	set nodeport-ips { type %[2]s ; comment "IPs that accept NodePort traffic" ; elements = { %[3]s } ; }
	map no-endpoint-nodeports { type inet_proto . inet_service : verdict ; }
	map no-endpoint-services { type %[2]s . inet_proto . inet_service : verdict ; }
	map service-ips { type %[2]s . inet_proto . inet_service : verdict ; }
	map service-nodeports { type inet_proto . inet_service : verdict ; }
	chain reject-chain { reject ; }
	chain cluster-ips-check { %[1]s daddr @cluster-ips reject ; }
	chain service-endpoints-check { %[1]s daddr . meta l4proto . th dport vmap @no-endpoint-services ; }
	chain nodeport-endpoints-check { %[1]s daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports ; }
	chain filter-input { type filter hook input priority 0 ; ct state new jump nodeport-endpoints-check ; ct state new jump service-endpoints-check ; }
	chain filter-forward { type filter hook forward priority 0 ; ct state new jump service-endpoints-check ; ct state new jump cluster-ips-check ; }
	chain filter-output { type filter hook output priority 0 ; ct state new jump service-endpoints-check ; ct state new jump cluster-ips-check ; }
	chain masquerading { meta mark & 0x4000 != 0 meta mark set meta mark ^ 0x4000 masquerade fully-random ; }
	chain services { %[1]s daddr . meta l4proto . th dport vmap @service-ips ; %[1]s daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports ; }
	chain nat-prerouting { type nat hook prerouting priority -100 ; jump services ; }
	chain nat-output { type nat hook output priority -100 ; jump services ; }
	chain nat-postrouting { type nat hook postrouting priority 100 ; jump masquerading ; }
}
`, fam, addr, nodeIP)
		for _, l := range leftovers {
			if l.family == f {
				nftLeftover(&b, env, fam, l)
			}
		}
	}
	return b.String()
}

func nftLeftover(b *strings.Builder, env Env, fam string, l resolvedLeftover) {
	proto := lowerProto(l.proto)
	h := chainHash(l.id + string(l.proto))[:8]
	chain := fmt.Sprintf("service-%s-%s/%s", h, strings.ReplaceAll(l.id, ":", "/"), proto)
	fmt.Fprintf(b, "add element %s kube-proxy cluster-ips { %s }\n", fam, l.clusterIP)
	if l.What == LeftoverNoEndpoints {
		fmt.Fprintf(b, "add element %s kube-proxy no-endpoint-services { %s . %s . %d : goto reject-chain }\n", fam, l.clusterIP, proto, l.port)
		if l.nodePort != 0 {
			fmt.Fprintf(b, "add element %s kube-proxy no-endpoint-nodeports { %s . %d : goto reject-chain }\n", fam, proto, l.nodePort)
		}
		return
	}
	to := hostPort(env.NeighbourPod(l.family), NeighbourTargetPort(NFTablesLeftoversNeighbour, l.proto))
	fmt.Fprintf(b, "add chain %s kube-proxy %s\nadd rule %s kube-proxy %s meta l4proto %s dnat to %s\n", fam, chain, fam, chain, proto, to)
	if l.What == LeftoverClusterIP {
		fmt.Fprintf(b, "add element %s kube-proxy service-ips { %s . %s . %d : goto %s }\n", fam, l.clusterIP, proto, l.port, chain)
	} else {
		fmt.Fprintf(b, "add element %s kube-proxy service-nodeports { %s . %d : goto %s }\n", fam, proto, l.nodePort, chain)
	}
}
