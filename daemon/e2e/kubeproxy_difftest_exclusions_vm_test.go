//go:build vmtest

package e2e

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kpconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/randomcluster"
)

// difftestLine is one line of snapshotDiff with what explains it: the
// Services it is about (as created, and as generated, with their slices),
// the node settings, and both snapshots.
type difftestLine struct {
	// part is "ipvs", "ipset", "addr", ...; side "kube-proxy-only" or
	// "ipvsplane-only"; entry the line of the tool's output.
	part, side, entry string
	stored            []*corev1.Service
	generated         []*randomcluster.Service
	config            *kpconfig.KubeProxyConfiguration
	env               randomcluster.Env
	kp, ip            *kernelSnapshot
}

func newDifftestLine(d string, names []string, c *createdCluster, rc *randomcluster.Cluster, kp, ip *kernelSnapshot) difftestLine {
	l := difftestLine{config: rc.Config, env: rc.Env, kp: kp, ip: ip}
	head, entry, _ := strings.Cut(d, ": ")
	l.part, l.side, _ = strings.Cut(head, " ")
	l.entry = entry
	for _, n := range names {
		l.stored = append(l.stored, c.services[n])
		l.generated = append(l.generated, c.generated[n])
	}
	return l
}

// family is the IP family the line is about.
func (l difftestLine) family() corev1.IPFamily {
	if strings.Contains(l.entry, "KUBE-6-") || strings.Contains(l.entry, "[") || (l.part == "addr" && strings.Contains(l.entry, ":")) {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// realServer returns the virtual and real server of an ipvsadm -a line.
func (l difftestLine) realServer() (vs, rs string, ok bool) {
	f := strings.Fields(l.entry)
	if l.part != "ipvs" || len(f) < 5 || f[0] != "-a" || f[3] != "-r" {
		return "", "", false
	}
	return f[2], f[4], true
}

// endpointLine reports whether the line is about endpoints: a real
// server, or a KUBE-LOOP-BACK entry.
func (l difftestLine) endpointLine() bool {
	_, _, rs := l.realServer()
	return rs || strings.Contains(l.entry, "-LOOP-BACK ")
}

// copiesByChance reports whether a Service lists an endpoint address
// of the line's family in two slices such that the copy kube-proxy keeps
// is chance: it keeps the last copy not terminating, or the first copy if
// all are, in the order of a Go map of slices; so the copy is fixed only
// when exactly one is not terminating. The copy decides the endpoint's
// node, conditions and hints, and so whether topology applies to the
// others.
func (l difftestLine) copiesByChance() bool {
	for _, g := range l.generated {
		slicesOf, live := map[string]map[string]bool{}, map[string]int{}
		for _, sl := range g.Slices {
			if string(sl.AddressType) != string(l.family()) {
				continue
			}
			for _, ep := range sl.Endpoints {
				a := ep.Addresses[0]
				if slicesOf[a] == nil {
					slicesOf[a] = map[string]bool{}
				}
				slicesOf[a][sl.Name] = true
				if t := ep.Conditions.Terminating; t == nil || !*t {
					live[a]++
				}
			}
		}
		for a, in := range slicesOf {
			if len(in) > 1 && live[a] != 1 {
				return true
			}
		}
	}
	return false
}

// difftestExclusion is a difference between kube-proxy's kernel state and
// ipvsplane's that a row of docs/differences-from-kube-proxy.md explains.
type difftestExclusion struct {
	name string
	// stateOnly says the difference changes no packet's fate, so it
	// explains no probe's.
	stateOnly bool
	// doc quotes the row of docs/differences-from-kube-proxy.md.
	doc   string
	match func(l difftestLine) bool
}

// difftestExclusions are tried in order; the first that matches names
// the difference.
var difftestExclusions = []difftestExclusion{
	{
		name:      "ownership sets",
		stateOnly: true,
		doc:       "only virtual servers recorded in `KUBE-IPVSPLANE-OWNED` ... are ever deleted",
		match: func(l difftestLine) bool {
			return l.side == "ipvsplane-only" && l.part == "ipset" && strings.Contains(l.entry, "-IPVSPLANE-OWNED ")
		},
	},
	{
		name: "an internal policy Local without a local endpoint drops",
		doc:  "InternalTrafficPolicy `Local` with no local endpoint falls back to all cluster endpoints",
		match: func(l difftestLine) bool {
			vs, _, ok := l.realServer()
			if !ok || l.side != "kube-proxy-only" || len(l.stored) != 1 {
				return false
			}
			spec := l.stored[0].Spec
			ap, err := netip.ParseAddrPort(vs)
			if err != nil || !slices.Contains(spec.ClusterIPs, ap.Addr().String()) {
				return false
			}
			local := spec.InternalTrafficPolicy != nil && *spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
			proto := strings.Fields(l.entry)[1]
			return local && !slices.ContainsFunc(l.ip.ipvs, func(x string) bool { return strings.HasPrefix(x, "-a "+proto+" "+vs+" ") })
		},
	},

	{
		// The row names the case of copies not terminating; kube-proxy's
		// choice among copies that all terminate is chance too.
		name: "an endpoint in two slices, the copy kube-proxy keeps is chance",
		doc:  "an endpoint (address and port) listed in two slices, neither copy terminating: the copy kept ... follows Go map order, so it is chance",
		match: func(l difftestLine) bool {
			return l.endpointLine() && l.copiesByChance()
		},
	},
}

func explainDifference(l difftestLine) *difftestExclusion {
	for i := range difftestExclusions {
		if difftestExclusions[i].match(l) {
			return &difftestExclusions[i]
		}
	}
	return nil
}

// probeExclusion explains a probe whose outcome differs between the
// proxies, by a row of docs/differences-from-kube-proxy.md about how the
// rules act, where the kernel states do not differ.
type probeExclusion struct {
	name string
	// doc quotes the row of docs/differences-from-kube-proxy.md.
	doc string
	// match is given the probe, its Service, both outcomes and the
	// node's neighbours (nil: none).
	match func(pr probe, svc *corev1.Service, kp, ip string, n *randomcluster.Neighbours) bool
}

var probeExclusions = []probeExclusion{
	{
		name: "the node's own traffic to a load balancer its source ranges leave out",
		doc:  "`KUBE-IPVS-OUT-FILTER` uses the `ipvs` match ... dropped in OUTPUT whether or not the virtual server has real servers",
		match: func(pr probe, svc *corev1.Service, kp, ip string, _ *randomcluster.Neighbours) bool {
			denied := func(o string) bool { return o == "dropped" || o == "refused" || o == "denied on the node" }
			return pr.client.ns == nil && isIngressIP(svc, pr.target.Addr()) &&
				!allowsNode(svc, pr.target.Addr()) && denied(kp) && (ip == "dropped" || ip == "denied on the node")
		},
	},
	{
		// The endpoint's reply to a client off the node is forwarded
		// (IPVS undoes its NAT after the filter table's FORWARD):
		// kube-proxy's KUBE-FORWARD accepts it as an established
		// connection, ipvsplane's accept cannot undo the policy DROP.
		name: "FORWARD policy DROP without the CNI's accept rules of the family",
		doc:  "Nodes whose FORWARD policy is DROP need an accept rule for pod traffic from their CNI",
		match: func(pr probe, _ *corev1.Service, kp, ip string, n *randomcluster.Neighbours) bool {
			return n != nil && n.ForwardDrop != nil && !slices.Contains(n.ForwardDrop.AcceptFamilies, pr.family) &&
				pr.client.ns != nil && strings.HasPrefix(kp, "forwarded ") && ip == "dropped"
		},
	},
	{
		// kube-proxy's IPVS mode keeps the iptables mode's filter
		// KUBE-SERVICES and KUBE-EXTERNAL-SERVICES, which REJECT what had
		// no endpoints then; ipvsplane removes them with the rest of that
		// mode's chains (once it does: the takeover of kube-proxy's other
		// modes).
		name: "the iptables mode's stale REJECT of a Service without endpoints",
		doc:  "a stale REJECT would refuse a Service that has endpoints again",
		match: func(pr probe, svc *corev1.Service, kp, ip string, n *randomcluster.Neighbours) bool {
			return n != nil && kp == "refused" && strings.HasPrefix(ip, "forwarded ") && staleReject(pr, svc, n.IPTablesLeftovers)
		},
	},
}

// staleReject reports whether a leftover of the iptables mode rejects the
// probe's target: its Service's cluster IP and port, or node port.
func staleReject(pr probe, svc *corev1.Service, leftovers []randomcluster.Leftover) bool {
	for _, l := range leftovers {
		if l.What != randomcluster.LeftoverNoEndpoints || l.Service != svc.Name || l.Port >= len(svc.Spec.Ports) {
			continue
		}
		p, port := svc.Spec.Ports[l.Port], int32(pr.target.Port())
		onClusterIP := slices.Contains(svc.Spec.ClusterIPs, pr.target.Addr().String()) && p.Port == port
		onNodePort := p.NodePort == port && p.NodePort != 0 && !slices.Contains(svc.Spec.ClusterIPs, pr.target.Addr().String())
		if p.Protocol == pr.proto && (onClusterIP || onNodePort) {
			return true
		}
	}
	return false
}

// isIngressIP reports whether a is one of the Service's load-balancer
// ingress IPs.
func isIngressIP(svc *corev1.Service, a netip.Addr) bool {
	return slices.ContainsFunc(svc.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool { return in.IP == a.String() })
}

// allowsNode reports whether the Service's source ranges of a's family
// let the node through: none of the family, or one holding the node's IP
// of that family (the probes' node is randomcluster.DefaultEnv's).
func allowsNode(svc *corev1.Service, a netip.Addr) bool {
	f := corev1.IPv4Protocol
	if a.Is6() {
		f = corev1.IPv6Protocol
	}
	node := randomcluster.DefaultEnv().NodeIPs[f]
	family := false
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		p, err := netip.ParsePrefix(strings.TrimSpace(r))
		if err != nil || p.Addr().Is6() != a.Is6() {
			continue
		}
		family = true
		if p.Contains(node) {
			return true
		}
	}
	return !family
}

func explainProbe(pr probe, svc *corev1.Service, kp, ip string, n *randomcluster.Neighbours) *probeExclusion {
	for i := range probeExclusions {
		if probeExclusions[i].match(pr, svc, kp, ip, n) {
			return &probeExclusions[i]
		}
	}
	return nil
}
