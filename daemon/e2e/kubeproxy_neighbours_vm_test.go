//go:build vmtest

package e2e

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/randomcluster"
)

// difftestNeighbourSeeds are the CI seeds that get neighbours, and which:
// seed 5 every kind.
var difftestNeighbourSeeds = map[uint64][]randomcluster.NeighbourKind{
	5: randomcluster.NeighbourKinds,
}

// difftestNeighbours returns the kinds of neighbours a seed gets:
// IPVSPLANE_DIFFTEST_NEIGHBOURS ("0": none; "1": the default kinds; or a
// comma-separated list of kinds, "all" or "default"), or, unset, those
// difftestNeighbourSeeds gives it.
func difftestNeighbours(t *testing.T, seed uint64) []randomcluster.NeighbourKind {
	t.Helper()
	switch s := os.Getenv("IPVSPLANE_DIFFTEST_NEIGHBOURS"); s {
	case "":
		return difftestNeighbourSeeds[seed]
	case "0":
		return nil
	case "1":
		return randomcluster.DefaultNeighbourKinds
	default:
		kinds, err := randomcluster.ParseNeighbourKinds(s)
		if err != nil {
			t.Fatalf("IPVSPLANE_DIFFTEST_NEIGHBOURS=%q: %v", s, err)
		}
		return kinds
	}
}

// installNeighbours puts the cluster's neighbours on the node, as the
// API server stored its Services, before a proxy starts: first removing
// what is left of them (kube-proxy removes the nftables leftovers at its
// start, and its --cleanup the iptables ones), so that each proxy starts
// with them all. The seed's cleanup removes them.
func installNeighbours(t *testing.T, c *randomcluster.Cluster, created *createdCluster) {
	t.Helper()
	removeNeighbours(t)
	if c.Neighbours == nil {
		return
	}
	rules := c.Neighbours.Rules(c.Env, func(name string) *corev1.Service { return created.services[name] })
	dir := t.TempDir()
	for _, f := range c.Env.Families() {
		if rules.IPTables[f] == "" {
			continue
		}
		file := filepath.Join(dir, "iptables-"+string(f))
		if err := os.WriteFile(file, []byte(rules.IPTables[f]), 0o644); err != nil {
			t.Fatal(err)
		}
		runTool(t, iptablesFor(f)+"-restore", "--noflush", file)
	}
	for _, f := range rules.ForwardDrop {
		runTool(t, iptablesFor(f), "-P", "FORWARD", "DROP")
	}
	if rules.NFT != "" {
		file := filepath.Join(dir, "leftovers.nft")
		if err := os.WriteFile(file, []byte(rules.NFT), 0o644); err != nil {
			t.Fatal(err)
		}
		runTool(t, "nft", "-f", file)
	}
	t.Logf("neighbours installed:\n%s%s\nFORWARD policy DROP: %v", rules.IPTables[corev1.IPv4Protocol], rules.IPTables[corev1.IPv6Protocol], rules.ForwardDrop)
}

func iptablesFor(f corev1.IPFamily) string {
	if f == corev1.IPv6Protocol {
		return "ip6tables"
	}
	return "iptables"
}

// neighbourChain reports whether an iptables chain is a neighbour's:
// portmap's, Docker's, or one kube-proxy's iptables mode left.
func neighbourChain(c string) bool {
	return strings.HasPrefix(c, "CNI-") || c == "DOCKER" || strings.HasPrefix(c, "KUBE-")
}

// neighbourRule reports whether a rule of a built-in chain is a
// neighbour's that jumps nowhere: the CNI's FORWARD accept rules, Docker's
// masquerade.
func neighbourRule(r string) bool {
	return strings.Contains(r, `"flanneld forward"`) || strings.Contains(r, "-s 172.17.0.0/16 ! -o docker0 -j MASQUERADE")
}

// removeNeighbours removes every neighbour's rules and sets FORWARD's
// policy back to ACCEPT; the proxies must have stopped (it removes every
// KUBE- chain).
func removeNeighbours(t *testing.T) {
	t.Helper()
	for _, cmd := range []string{"iptables", "ip6tables"} {
		runTool(t, cmd, "-P", "FORWARD", "ACCEPT")
		for _, table := range []string{"nat", "filter"} {
			removeChains(t, cmd, table, neighbourChain, neighbourRule)
		}
	}
	for _, fam := range []string{"ip", "ip6"} {
		runQuiet("nft", "delete", "table", fam, "kube-proxy")
	}
}

// neighbourProbes are the probes of the neighbours' own ports: each host
// port and Docker port on the node's addresses, from every client. Their
// service is the neighbour's kind in brackets, no Service's name.
func (p *probeNet) neighbourProbes(n *randomcluster.Neighbours) []probe {
	if n == nil {
		return nil
	}
	var out []probe
	for _, h := range n.HostPorts {
		out = append(out, p.from(p.env.NodeIPs[h.Family], uint16(h.Port), h.Protocol, false, "("+string(randomcluster.HostPortNeighbour)+")")...)
	}
	for _, d := range n.DockerPorts {
		out = append(out, p.from(p.env.NodeIPs[corev1.IPv4Protocol], uint16(d.Port), corev1.ProtocolTCP, false, "("+string(randomcluster.DockerNeighbour)+")")...)
	}
	return out
}

// serveNeighbours answers, on the neighbour pod's address (the probes'
// pod), every port a neighbour's DNAT sends to, with the neighbour's kind
// and the client address it sees: a probe a neighbour took says so.
func (p *probeNet) serveNeighbours(t *testing.T) {
	t.Helper()
	for kind, ports := range randomcluster.NeighbourTargets() {
		for proto, port := range ports {
			for _, f := range p.env.Families() {
				addr := netip.AddrPortFrom(p.env.NeighbourPod(f), uint16(port)).String()
				switch proto {
				case corev1.ProtocolTCP:
					p.pod.ServeTCP(t, addr, neighbourAnswer+string(kind))
				case corev1.ProtocolUDP:
					p.pod.ServeUDP(t, addr, neighbourAnswer+string(kind))
				}
			}
		}
	}
}

// neighbourAnswer starts the name a neighbour's listener answers with.
const neighbourAnswer = "neighbour:"

// describeNeighbours says what the neighbours are, for the log.
func describeNeighbours(n *randomcluster.Neighbours) string {
	if n == nil {
		return "none"
	}
	var parts []string
	for _, h := range n.HostPorts {
		on := ""
		if h.Service != "" {
			on = " (port of " + h.Service + ")"
		}
		parts = append(parts, "hostPort "+string(h.Protocol)+"/"+strconv.Itoa(int(h.Port))+" "+string(h.Family)+on)
	}
	for _, d := range n.DockerPorts {
		parts = append(parts, "Docker port "+strconv.Itoa(int(d.Port)))
	}
	if n.ForwardDrop != nil {
		parts = append(parts, "FORWARD DROP, the CNI's accept rules for "+familiesString(n.ForwardDrop.AcceptFamilies))
	}
	for _, l := range n.NFTablesLeftovers {
		parts = append(parts, "nftables leftover "+string(l.What)+" of "+l.Service)
	}
	for _, l := range n.IPTablesLeftovers {
		parts = append(parts, "iptables leftover "+string(l.What)+" of "+l.Service)
	}
	if n.InstallerConfig {
		parts = append(parts, "kubeadm's configuration file")
	}
	return strings.Join(parts, "; ")
}

func familiesString(fs []corev1.IPFamily) string {
	var s []string
	for _, f := range fs {
		s = append(s, string(f))
	}
	return strings.Join(s, ",")
}
