//go:build vmtest

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	corev1 "k8s.io/api/core/v1"
	kpconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/randomcluster"
	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

// probeNet is the network the differential test's probes travel: what
// the rules of the two proxies mean is compared by sending the same
// packets under each, not by reading their rules.
//
//   - eps holds every endpoint address the generator uses, of this node
//     and of the remote one, and answers on every target port with the
//     client address it sees; the node routes to it over kp-eps0.
//   - pod is a pod of this node (PodCIDRs' .200) behind a bridge kp-br0
//     that holds the pods' gateway (.1), or, when pods are told apart by
//     interface name, behind the veth kp-pod0 itself.
//   - out is outside the node, over kp-out0, with one client address in
//     the load balancers' source ranges (SourceNet's .200) and one in none.
//   - the node itself is the fourth client.
//
// Nothing a probe sends leaves the machine: the test networks the node
// does not hold are unreachable routes.
type probeNet struct {
	eps, pod, out *testutil.NetNS
	env           randomcluster.Env
	// clients are the probes' sources by name, per family.
	clients []probeClient
}

type probeClient struct {
	name string
	ns   *testutil.NetNS // nil: the node
	addr map[corev1.IPFamily]netip.Addr
}

// outsideOther is the outside client address in no source range.
var outsideOther = map[corev1.IPFamily]netip.Addr{
	corev1.IPv4Protocol: netip.MustParseAddr("198.18.0.200"),
	corev1.IPv6Protocol: netip.MustParseAddr("2001:db8:ff::c8"),
}

// newProbeNet builds the probe network for a node configured with cfg;
// it goes when the test ends.
func newProbeNet(t *testing.T, env randomcluster.Env, cfg *kpconfig.KubeProxyConfiguration) *probeNet {
	t.Helper()
	p := &probeNet{eps: testutil.NewNetNS(t), pod: testutil.NewNetNS(t), out: testutil.NewNetNS(t), env: env}
	setSysctl(t, "net/ipv6/conf/all/forwarding", "1")
	// A rejected probe is told from a dropped one by its ICMP error, which
	// the kernel would rate-limit per client after a short burst: ICMP
	// errors, and those of unreachable routes apart.
	setSysctl(t, "net/ipv4/icmp_ratelimit", "0")
	setSysctl(t, "net/ipv4/route/error_cost", "0")
	setSysctl(t, "net/ipv6/icmp/ratelimit", "0")
	setSysctl(t, "net/ipv4/icmp_msgs_per_sec", "100000")
	setSysctl(t, "net/ipv4/icmp_msgs_burst", "100000")
	p.setupEndpoints(t)
	pod := p.setupPod(t, cfg.DetectLocalMode == "InterfaceNamePrefix")
	allowed := p.setupOutside(t)
	p.clients = []probeClient{
		{name: "pod", ns: p.pod, addr: pod},
		{name: "outside-allowed", ns: p.out, addr: allowed},
		{name: "outside-other", ns: p.out, addr: outsideOther},
		{name: "node"},
	}
	return p
}

// transitLink connects the node to ns over a veth, root in the node and
// eth0 in ns, with an IPv4 /net4 and an IPv6 /64 network whose .1 (::1)
// is the node's and .2 (::2) the namespace's, and the namespace's
// default routes through the node. It returns the namespace's addresses,
// the next hops to it.
func transitLink(t *testing.T, ns *testutil.NetNS, root string, net4 netip.Prefix, net6 netip.Prefix) map[corev1.IPFamily]netip.Addr {
	t.Helper()
	rootVeth(t, root, ns, "eth0")
	hops := map[corev1.IPFamily]netip.Addr{}
	for f, n := range map[corev1.IPFamily]netip.Prefix{corev1.IPv4Protocol: net4, corev1.IPv6Protocol: net6} {
		node, peer := nthAddr(n, 1), nthAddr(n, 2)
		rootIP(t, "addr", "add", netip.PrefixFrom(node, n.Bits()).String(), "dev", root, "nodad")
		ns.IP(t, "addr", "add", netip.PrefixFrom(peer, n.Bits()).String(), "dev", "eth0", "nodad")
		ns.IP(t, familyFlag(f), "route", "add", "default", "via", node.String())
		hops[f] = peer
	}
	return hops
}

// setupEndpoints gives the endpoints namespace every pod address that
// endpoints use, routed to it from the node, and its servers.
func (p *probeNet) setupEndpoints(t *testing.T) {
	t.Helper()
	hops := transitLink(t, p.eps, "kp-eps0", netip.MustParsePrefix("169.254.100.0/30"), netip.MustParsePrefix("fd00:100::/64"))
	for _, f := range p.env.Families() {
		for _, local := range []bool{true, false} {
			for _, a := range p.env.PodAddrs(local)[f] {
				host := netip.PrefixFrom(a, a.BitLen()).String()
				p.eps.IP(t, "addr", "add", host, "dev", "eth0", "nodad")
				rootIP(t, "route", "add", host, "via", hops[f].String())
			}
		}
	}
	p.serveEndpoints(t)
}

// setupPod puts the pod behind the bridge kp-br0, or behind the veth
// kp-pod0 itself when byName (detect-local by interface name prefix);
// the bridge or veth holds the pods' gateway. It returns the pod's
// addresses.
func (p *probeNet) setupPod(t *testing.T, byName bool) map[corev1.IPFamily]netip.Addr {
	t.Helper()
	gwLink := "kp-pod0"
	if byName {
		rootVeth(t, "kp-pod0", p.pod, "eth0")
	} else {
		gwLink = "kp-br0"
		rootIP(t, "link", "add", "kp-br0", "type", "bridge")
		t.Cleanup(func() { rootIPQuiet("link", "del", "kp-br0") })
		rootVeth(t, "kp-brport0", p.pod, "eth0")
		rootIP(t, "link", "set", "kp-brport0", "master", "kp-br0")
		rootIP(t, "link", "set", "kp-br0", "up")
	}
	pod := map[corev1.IPFamily]netip.Addr{}
	for _, f := range p.env.Families() {
		cidr := p.env.PodCIDRs[f]
		gateway, addr := nthAddr(cidr, 1), nthAddr(cidr, 200)
		pod[f] = addr
		rootIP(t, "addr", "add", netip.PrefixFrom(gateway, cidr.Bits()).String(), "dev", gwLink, "nodad")
		p.pod.IP(t, "addr", "add", netip.PrefixFrom(addr, cidr.Bits()).String(), "dev", "eth0", "nodad")
		p.pod.IP(t, familyFlag(f), "route", "add", "default", "via", gateway.String())
	}
	return pod
}

// setupOutside gives the outside namespace its two client addresses,
// routed to it from the node, and makes what the node does not hold of
// the test's networks unreachable rather than routed out of the VM. It
// returns the client addresses inside the source ranges.
func (p *probeNet) setupOutside(t *testing.T) map[corev1.IPFamily]netip.Addr {
	t.Helper()
	hops := transitLink(t, p.out, "kp-out0", netip.MustParsePrefix("192.168.77.0/24"), netip.MustParsePrefix("fd00:77::/64"))
	allowed := map[corev1.IPFamily]netip.Addr{}
	for _, f := range p.env.Families() {
		allowed[f] = nthAddr(p.env.SourceNet[f], 200)
		for _, a := range []netip.Addr{allowed[f], outsideOther[f]} {
			host := netip.PrefixFrom(a, a.BitLen()).String()
			p.out.IP(t, "addr", "add", host, "dev", "eth0", "nodad")
			rootIP(t, "route", "add", host, "via", hops[f].String())
		}
		for _, n := range []netip.Prefix{p.env.ExternalNet[f], p.env.LoadBalancerNet[f], p.env.RemotePodCIDRs[f], serviceCIDR(f)} {
			rootIP(t, "route", "add", "unreachable", n.String())
			t.Cleanup(func() { rootIPQuiet("route", "del", "unreachable", n.String()) })
		}
	}
	return allowed
}

// serviceCIDR is the test API server's service range of a family.
func serviceCIDR(f corev1.IPFamily) netip.Prefix {
	if f == corev1.IPv6Protocol {
		return netip.MustParsePrefix(controlplane.ServiceCIDR6)
	}
	return netip.MustParsePrefix(controlplane.ServiceCIDR)
}

func familyFlag(f corev1.IPFamily) string {
	if f == corev1.IPv6Protocol {
		return "-6"
	}
	return "-4"
}

// nthAddr returns the n-th address of p.
func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// rootIPQuiet runs ip in the node's namespace, for a cleanup that may
// find the thing gone.
func rootIPQuiet(args ...string) { runQuiet("ip", args...) }

// runQuiet runs a program and ignores how it ends.
func runQuiet(name string, args ...string) { exec.Command(name, args...).Run() }

func setSysctl(t *testing.T, name, value string) {
	t.Helper()
	old, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/sys/"+name, []byte(value), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile("/proc/sys/"+name, old, 0o644) })
}

// serveEndpoints answers, on every target port of every protocol but
// SCTP, with the client address the endpoint sees. UDP listens on each
// address apart, so that an answer leaves from the address the datagram
// came to (a wildcard socket's would leave from whatever address the
// route gives, which IPVS would not match to the connection).
func (p *probeNet) serveEndpoints(t *testing.T) {
	t.Helper()
	for proto, ports := range randomcluster.TargetPorts {
		for _, port := range ports {
			switch proto {
			case corev1.ProtocolTCP:
				p.eps.ServeTCP(t, ":"+strconv.Itoa(int(port)), "from")
			case corev1.ProtocolUDP:
				for _, f := range p.env.Families() {
					for _, local := range []bool{true, false} {
						for _, a := range p.env.PodAddrs(local)[f] {
							p.eps.ServeUDP(t, netip.AddrPortFrom(a, uint16(port)).String(), "from")
						}
					}
				}
			}
		}
	}
}

// probe is one packet exchange: from a client to a service address.
type probe struct {
	client *probeClient
	family corev1.IPFamily
	proto  corev1.Protocol
	// target is the address and port; health says it is a health-check
	// node port, asked over HTTP.
	target netip.AddrPort
	health bool
	// service is the Service the target belongs to.
	service string
}

func (pr probe) String() string {
	kind := strings.ToLower(string(pr.proto))
	if pr.health {
		kind = "health-check"
	}
	return fmt.Sprintf("%s %s -> %s", pr.client.name, kind, pr.target)
}

// probes lists what to send for the created Services: to each cluster,
// external and load-balancer IP and each node port of every TCP and UDP
// port, and to each health-check node port, from every client of the
// address's family.
func (p *probeNet) probes(c *createdCluster) []probe {
	var out []probe
	for _, name := range c.order {
		svc := c.services[name]
		if !proxied(svc) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if sp.Protocol == corev1.ProtocolSCTP {
				continue
			}
			for _, a := range serviceAddrs(svc) {
				out = append(out, p.from(a, uint16(sp.Port), sp.Protocol, false, name)...)
			}
			if sp.NodePort != 0 {
				for _, f := range p.env.Families() {
					out = append(out, p.from(p.env.NodeIPs[f], uint16(sp.NodePort), sp.Protocol, false, name)...)
				}
			}
		}
		if hc := svc.Spec.HealthCheckNodePort; hc != 0 {
			for _, f := range p.env.Families() {
				out = append(out, p.from(p.env.NodeIPs[f], uint16(hc), corev1.ProtocolTCP, true, name)...)
			}
			out = append(out, p.from(netip.MustParseAddr("127.0.0.1"), uint16(hc), corev1.ProtocolTCP, true, name)...)
		}
	}
	return out
}

// serviceAddrs are a Service's cluster, external and load-balancer IPs.
func serviceAddrs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, s := range svc.Spec.ClusterIPs {
		add(s)
	}
	for _, s := range svc.Spec.ExternalIPs {
		add(s)
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		add(in.IP)
	}
	return out
}

// from returns the probes of one target from each client that has an
// address of its family; loopback targets only from the node.
func (p *probeNet) from(a netip.Addr, port uint16, proto corev1.Protocol, health bool, svc string) []probe {
	f := corev1.IPv4Protocol
	if a.Is6() {
		f = corev1.IPv6Protocol
	}
	var out []probe
	for i := range p.clients {
		c := &p.clients[i]
		if (c.ns == nil || c.addr[f].IsValid()) && (!a.IsLoopback() || c.ns == nil) {
			out = append(out, probe{client: c, family: f, proto: proto, target: netip.AddrPortFrom(a, port), health: health, service: svc})
		}
	}
	return out
}

// probeTimeout is how long a probe waits for an answer before it counts
// the packet dropped: long, as an emulated guest is slow.
const probeTimeout = 3 * time.Second

// run sends every probe, several at a time, and returns each outcome.
func (p *probeNet) run(t *testing.T, probes []probe) map[string]string {
	t.Helper()
	// Flows of the proxy before must not steer these packets.
	runQuiet("conntrack", "-F")
	runQuiet("conntrack", "-F", "-f", "ipv6")
	out := make(map[string]string, len(probes))
	var mu sync.Mutex
	err := testutil.Parallel(t.Context(), 24, 0, len(probes), func(ctx context.Context, i int) error {
		pr := probes[i]
		var outcome string
		do := func() error { outcome = pr.send(); return nil }
		if pr.client.ns != nil {
			pr.client.ns.Do(do)
		} else {
			do()
		}
		mu.Lock()
		out[pr.String()] = outcome
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// send runs the probe in the current network namespace and says what
// became of it.
func (pr probe) send() string {
	d := net.Dialer{Timeout: probeTimeout}
	if local := pr.client.addr[pr.family]; local.IsValid() {
		if pr.proto == corev1.ProtocolUDP {
			d.LocalAddr = &net.UDPAddr{IP: local.AsSlice()}
		} else {
			d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
		}
	}
	if pr.health {
		return pr.askHealth(&d)
	}
	network := strings.ToLower(string(pr.proto))
	c, err := d.Dial(network, pr.target.String())
	if err != nil {
		return failure(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	var reply []byte
	if pr.proto == corev1.ProtocolUDP {
		if reply, err = probeUDP(c); err != nil {
			return failure(err)
		}
	} else if reply, err = io.ReadAll(c); err != nil {
		return "connected, then " + failure(err)
	}
	return forwarded(string(reply), c.LocalAddr())
}

// probeUDP sends a datagram and returns the answer; a datagram lost
// in a slow guest is sent again, three times within probeTimeout.
func probeUDP(c net.Conn) ([]byte, error) {
	buf := make([]byte, 256)
	var err error
	for range 3 {
		if _, err = c.Write([]byte("probe")); err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(probeTimeout / 3))
		var n int
		if n, err = c.Read(buf); err == nil {
			return buf[:n], nil
		}
		if !testutil.IsTimeout(err) {
			return nil, err
		}
	}
	return nil, err
}

// forwarded says whether the endpoint saw the client's own address, and
// names the neighbour that took the connection if one did.
func forwarded(reply string, local net.Addr) string {
	name, seen, ok := strings.Cut(reply, " ")
	who := "forwarded"
	if kind, neighbour := strings.CutPrefix(name, neighbourAnswer); neighbour {
		who = "taken by " + kind
	} else if !ok || name != "from" {
		return fmt.Sprintf("answered %q", reply)
	}
	host, _, _ := net.SplitHostPort(seen)
	own, _, _ := net.SplitHostPort(local.String())
	if host == own {
		return who + " keeping the client address"
	}
	return who + " from " + host
}

// askHealth asks a health-check node port for its state. It dials
// itself rather than through an http.Transport, whose dials run on other
// goroutines, outside the client's network namespace.
func (pr probe) askHealth(d *net.Dialer) string {
	c, err := d.Dial("tcp", pr.target.String())
	if err != nil {
		return failure(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	req, _ := http.NewRequest(http.MethodGet, "http://"+pr.target.String()+"/", nil)
	req.Close = true
	if err := req.Write(c); err != nil {
		return "connected, then " + failure(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return "connected, then " + failure(err)
	}
	defer resp.Body.Close()
	var body struct {
		LocalEndpoints int `json:"localEndpoints"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	return fmt.Sprintf("HTTP %d with %d local endpoints", resp.StatusCode, body.LocalEndpoints)
}

// failure names how a probe failed: refused (a reset or ICMP port
// unreachable), unreachable (ICMP), dropped (no answer), denied by the
// node's own rules (EPERM on sending), or the errno.
func failure(err error) string {
	var errno syscall.Errno
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, syscall.EPERM):
		return "denied on the node"
	case testutil.IsTimeout(err), errors.Is(err, context.DeadlineExceeded):
		return "dropped"
	case errors.As(err, &errno):
		return "failed: " + errno.Error()
	}
	return "failed: " + err.Error()
}

// probeDifference is a probe whose outcome differs between the proxies.
type probeDifference struct {
	probe  probe
	kp, ip string
}

func (d probeDifference) String() string {
	return fmt.Sprintf("%s: kube-proxy %s, ipvsplane %s", d.probe, d.kp, d.ip)
}

// probeDiff returns the probes whose outcome differs.
func probeDiff(probes []probe, kp, ip map[string]string) []probeDifference {
	var out []probeDifference
	for _, pr := range probes {
		k := pr.String()
		if kp[k] != ip[k] {
			out = append(out, probeDifference{probe: pr, kp: kp[k], ip: ip[k]})
		}
	}
	return out
}

// probeSummary counts the outcomes, for the log.
func probeSummary(outcomes map[string]string) string {
	n := map[string]int{}
	for _, o := range outcomes {
		if strings.HasPrefix(o, "forwarded from ") {
			o = "forwarded from another address"
		}
		if strings.HasPrefix(o, "HTTP ") {
			o = "answered over HTTP"
		}
		n[o]++
	}
	var parts []string
	for o, c := range n {
		parts = append(parts, fmt.Sprintf("%d %s", c, o))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}
