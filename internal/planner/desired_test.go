package planner

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"github.com/ipvsplane/ipvsplane/dataplane/nftrules"
	"github.com/ipvsplane/ipvsplane/inet"
	"github.com/ipvsplane/ipvsplane/internal/fixture"
)

// Load balancer source ranges are read per family, as kube-proxy reads
// them: a family with no range, or with a range of prefix length 0, is
// open to every source; only a family with ranges gets the firewall.
func TestLoadBalancerSourceRangesPerFamily(t *testing.T) {
	lb := fixture.Svc("default", "lb", "", inet.TCP, 443, "10.96.0.30", "fd00:96::30")
	lb.LoadBalancerIPs = fixture.IPs("203.0.113.10", "2001:db8::10")
	lb.Endpoints = []model.Endpoint{fixture.Ready("10.244.1.9", 8443, "node-a"), fixture.Ready("fd00:244::9", 8443, "node-a")}
	tests := []struct {
		name         string
		ranges       []string
		fw4, fw6     bool
		sourceEntry4 string
	}{
		{name: "IPv4 ranges only", ranges: []string{"198.51.100.0/24"}, fw4: true, sourceEntry4: "203.0.113.10,tcp:443,198.51.100.0/24"},
		{name: "zero-prefix IPv4", ranges: []string{"0.0.0.0/0"}},
		{name: "zero-prefix among others", ranges: []string{"198.51.100.0/24", "0.0.0.0/0", "2001:db8:1::/48"}, fw6: true},
		{name: "zero-prefix IPv6", ranges: []string{"::/0", "198.51.100.0/24"}, fw4: true, sourceEntry4: "203.0.113.10,tcp:443,198.51.100.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := lb
			s.LoadBalancerSourceRanges = fixture.Prefixes(tt.ranges...)
			d := Build(&model.State{Node: fixture.Node(), Services: []model.ServicePort{s}}, nftrules.Render)
			if len(d.Errors) > 0 {
				t.Fatal(d.Errors)
			}
			k := d.Kernel
			fw4 := hasEntry(k.Entries[model.SetName(model.SetLoadBalancerFW, inet.IPv4)], "203.0.113.10,tcp:443")
			fw6 := hasEntry(k.Entries[model.SetName(model.SetLoadBalancerFW, inet.IPv6)], "2001:db8::10,tcp:443")
			if fw4 != tt.fw4 || fw6 != tt.fw6 {
				t.Errorf("firewalled: IPv4 %v IPv6 %v, want %v %v", fw4, fw6, tt.fw4, tt.fw6)
			}
			for _, f := range inet.Families() {
				for e := range k.Entries[model.SetName(model.SetLoadBalancerSourceNet, f)] {
					if strings.HasSuffix(e.String(), "/0") {
						t.Errorf("a zero-prefix source entry: %q", e)
					}
				}
			}
			if tt.sourceEntry4 != "" && !hasEntry(k.Entries[model.SetName(model.SetLoadBalancerSourceNet, inet.IPv4)], tt.sourceEntry4) {
				t.Errorf("no source entry %q: %v", tt.sourceEntry4, k.Entries[model.SetName(model.SetLoadBalancerSourceNet, inet.IPv4)])
			}
		})
	}
}

// Node ports are served on the node addresses nodePortAddresses selects,
// per family as kube-proxy reads it: a family without a prefix serves
// them on all its addresses; "primary" adds the node's IPs.
func TestNodePortAddressesPerFamily(t *testing.T) {
	node := fixture.Node()
	node.Addresses = fixture.IPs("192.168.0.10", "10.0.0.5", "fd00:1::10", "2001:db8::5")
	node.NodeIPs = fixture.IPs("10.0.0.5", "2001:db8::5")
	tests := []struct {
		name     string
		prefixes []string
		primary  bool
		want     []string
	}{
		{"none", nil, false, []string{"192.168.0.10", "10.0.0.5", "fd00:1::10", "2001:db8::5"}},
		{"IPv4 only", []string{"192.168.0.0/24"}, false, []string{"192.168.0.10", "fd00:1::10", "2001:db8::5"}},
		{"zero prefix", []string{"0.0.0.0/0", "fd00:1::/64"}, false, []string{"192.168.0.10", "10.0.0.5", "fd00:1::10"}},
		{"primary", nil, true, []string{"10.0.0.5", "2001:db8::5"}},
		{"primary and a range", []string{"192.168.0.0/24"}, true, []string{"192.168.0.10", "10.0.0.5", "2001:db8::5"}},
		// As kube-proxy's node IP of a family the Node lacks: loopback,
		// which serves no node port.
		{"primary, the Node not read", nil, true, nil},
		{"primary, the Node's IPv4 IP only", nil, true, []string{"10.0.0.5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := node
			switch tt.name {
			case "primary, the Node not read":
				n.NodeIPs = nil
			case "primary, the Node's IPv4 IP only":
				n.NodeIPs = fixture.IPs("10.0.0.5")
			}
			n.NodePortAddresses, n.NodePortPrimary = fixture.Prefixes(tt.prefixes...), tt.primary
			if got := nodePortIPs(&n); !slices.Equal(got, fixture.IPs(tt.want...)) {
				t.Errorf("node ports on %v, want %v", got, tt.want)
			}
		})
	}
}

// Health-check node ports listen per family as kube-proxy's service
// health servers: on the family's unspecified address when nodePortAddresses
// match all of it, else on each of its node-port addresses and on loopback
// if a range holds it (node ports leave loopback out, health checks do
// not), and not at all in a family without one.
func TestHealthCheckAddresses(t *testing.T) {
	node := fixture.Node()
	node.Addresses = fixture.IPs("192.168.0.10", "10.0.0.5", "fd00:1::10", "2001:db8::5")
	node.NodeIPs = fixture.IPs("10.0.0.5", "2001:db8::5")
	tests := []struct {
		name      string
		addresses []string
		prefixes  []string
		primary   bool
		want      []string
	}{
		{"none", nil, nil, false, []string{"0.0.0.0", "::"}},
		{"IPv4 range on a dual-stack node", nil, []string{"192.168.0.0/16"}, false, []string{"192.168.0.10", "::"}},
		{"zero prefixes", nil, []string{"0.0.0.0/0", "::/0"}, false, []string{"0.0.0.0", "::"}},
		{"zero prefix among ranges", nil, []string{"10.0.0.0/8", "0.0.0.0/0", "2001:db8::/32"}, false, []string{"0.0.0.0", "2001:db8::5"}},
		{"primary", nil, nil, true, []string{"10.0.0.5", "2001:db8::5"}},
		{"IPv4-only node", []string{"192.168.0.10", "10.0.0.5"}, nil, false, []string{"0.0.0.0"}},
		{"IPv6 range matching nothing", nil, []string{"fd00:2::/64"}, false, []string{"0.0.0.0"}},
		{"loopback only", nil, []string{"127.0.0.0/8", "::1/128"}, false, []string{"127.0.0.1", "::1"}},
		{"a range and loopback", nil, []string{"10.0.0.0/8", "127.0.0.1/32"}, false, []string{"10.0.0.5", "127.0.0.1", "::"}},
		// kube-proxy's primary IP of a family the Node lacks is loopback,
		// where its health servers then listen.
		{"primary, the Node not read", nil, nil, true, []string{"127.0.0.1", "::1"}},
		{"primary, the Node's IPv4 IP only", nil, nil, true, []string{"10.0.0.5", "::1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := node
			switch tt.name {
			case "primary, the Node not read":
				n.NodeIPs = nil
			case "primary, the Node's IPv4 IP only":
				n.NodeIPs = fixture.IPs("10.0.0.5")
			}
			if tt.addresses != nil {
				n.Addresses = fixture.IPs(tt.addresses...)
			}
			n.NodePortAddresses, n.NodePortPrimary = fixture.Prefixes(tt.prefixes...), tt.primary
			if got := HealthCheckAddresses(&n); !slices.Equal(got, fixture.IPs(tt.want...)) {
				t.Errorf("health-check ports on %v, want %v", got, tt.want)
			}
		})
	}
}

// A family with no node address for node ports (nodePortAddresses naming
// only loopback, which kube-proxy's IPVS mode never serves on) gets no
// node-port entries and no health-check node port, as kube-proxy skips
// the rest of such a port.
func TestNodePortEntriesOnlyWithNodeAddresses(t *testing.T) {
	lb := fixture.Svc("default", "lb", "", inet.TCP, 443, "10.96.0.30", "fd00:96::30")
	lb.NodePort, lb.HealthCheckNodePort, lb.ExternalPolicy = 30443, 32000, model.PolicyLocal
	node := fixture.Node()
	node.NodePortAddresses = fixture.Prefixes("127.0.0.0/8")
	k := Build(&model.State{Node: node, Services: []model.ServicePort{lb}}, nftrules.Render).Kernel
	for _, set := range []string{model.SetNodePortTCP, model.SetNodePortLocalTCP, model.SetHealthCheckNodePort} {
		if n := len(k.Entries[model.SetName(set, inet.IPv4)]); n != 0 {
			t.Errorf("%s has %d entries with no IPv4 node address", model.SetName(set, inet.IPv4), n)
		}
		if n := len(k.Entries[model.SetName(set, inet.IPv6)]); n != 1 {
			t.Errorf("%s has %d entries, want the port's", model.SetName(set, inet.IPv6), n)
		}
	}
}

// hasEntry reports whether a set holds the entry that prints as s.
func hasEntry(set map[Entry]bool, s string) bool {
	for e := range set {
		if e.String() == s {
			return true
		}
	}
	return false
}

// A family the Node gives no IP has its loopback address as the node's
// own for load-balancer source ranges, as kube-proxy's detectNodeIPs
// gives it: a range holding 127.0.0.1 lets the node through, one holding
// only an interface's address does not.
func TestLoadBalancerSourceRangeNodeLoopback(t *testing.T) {
	for _, tc := range []struct {
		ranges string
		want   bool
	}{{"127.0.0.0/8", true}, {"192.168.0.0/24", false}} {
		svc := fixture.Svc("default", "lb", "", inet.TCP, 80, "10.96.0.20")
		svc.LoadBalancerIPs = fixture.IPs("192.0.2.10")
		svc.LoadBalancerSourceRanges = fixture.Prefixes(tc.ranges)
		node := fixture.Node()
		node.Addresses, node.NodeIPs = fixture.IPs("192.168.0.10", "fd00::10"), fixture.IPs("fd00::10")
		d := Build(&model.State{Node: node, Services: []model.ServicePort{svc}}, nftrules.Render)
		self := Entry{Addr: fixture.IP("192.0.2.10"), Protocol: inet.TCP, Port: 80, Addr2: fixture.IP("192.0.2.10")}
		if got := d.Kernel.Entries[model.SetLoadBalancerSourceIP][self]; got != tc.want {
			t.Errorf("source range %s: node allowed %v, want %v", tc.ranges, got, tc.want)
		}
	}
}

// An IPv4Only node (a kernel without IPv6) serves a dual-stack Service's
// IPv4 side alone, as kube-proxy's single-stack IPv4 proxier: no IPv6
// virtual server, address, entry, set or table; an IPv6-only Service
// contributes nothing; health checks listen on IPv4 alone.
func TestIPv4OnlyNode(t *testing.T) {
	dual := fixture.Svc("default", "web", "http", inet.TCP, 80, "10.96.0.10", "fd00:96::10")
	dual.NodePort = 30080
	dual.ExternalIPs = fixture.IPs("198.51.100.10", "2001:db8::10")
	dual.ExternalPolicy = model.PolicyLocal
	dual.HealthCheckNodePort = 32000
	dual.Endpoints = []model.Endpoint{fixture.Ready("10.244.0.5", 8080, "node-a"), fixture.Ready("fd00:244::5", 8080, "node-a")}
	v6 := fixture.Svc("default", "v6", "http", inet.TCP, 80, "fd00:96::11")
	v6.Endpoints = []model.Endpoint{fixture.Ready("fd00:244::6", 8080, "node-a")}
	node := fixture.Node()
	node.IPv4Only = true
	d := Build(&model.State{Node: node, Services: []model.ServicePort{dual, v6}}, nftrules.Render)
	if len(d.Errors) != 0 {
		t.Errorf("errors: %v", d.Errors)
	}
	for vk := range d.Kernel.Virtual {
		if vk.Addr.Is6() {
			t.Errorf("IPv6 virtual server %s", vk)
		}
	}
	if len(d.Kernel.Virtual) != 3 {
		t.Errorf("virtual servers %v, want the cluster IP, the external IP and the node port", slices.Collect(maps.Keys(d.Kernel.Virtual)))
	}
	for a := range d.Kernel.Addresses {
		if a.Is6() {
			t.Errorf("IPv6 address %s bound", a)
		}
	}
	for name, spec := range d.Kernel.Sets {
		if spec.Family == inet.IPv6 {
			t.Errorf("IPv6 set %s", name)
		}
	}
	for name, entries := range d.Kernel.Entries {
		for e := range entries {
			if e.Addr.Is6() || e.Addr2.Is6() {
				t.Errorf("IPv6 entry %s in %s", e, name)
			}
		}
	}
	if strings.Contains(d.Kernel.Rules, "table ip6 ") || !strings.Contains(d.Kernel.Rules, "table ip ") {
		t.Errorf("rules hold the ip6 table, or no ip one")
	}
	if got := HealthCheckAddresses(&node); !slices.Equal(got, fixture.IPs("0.0.0.0")) {
		t.Errorf("health checks listen on %v, want 0.0.0.0 alone", got)
	}
}

// An external policy Local with no local endpoint falls back to the
// cluster's endpoints at the node port, load-balancer and external
// addresses, as kube-proxy's IPVS mode does, so that the node's pods
// reach them (upstream's "ExternalTrafficPolicy: Local should work from
// pods"); with a local endpoint they use it alone. An internal policy
// Local with no local endpoint leaves the cluster IP without real servers.
func TestLocalPolicyWithoutLocalEndpoint(t *testing.T) {
	remote, local := fixture.Ready("10.244.1.5", 8080, "node-b"), fixture.Ready("10.244.0.5", 8080, "node-a")
	svc := fixture.Svc("default", "web", "http", inet.TCP, 80, "10.96.0.10")
	svc.NodePort, svc.HealthCheckNodePort, svc.ExternalPolicy, svc.InternalPolicy = 30080, 32000, model.PolicyLocal, model.PolicyLocal
	svc.LoadBalancerIPs, svc.ExternalIPs = fixture.IPs("192.0.2.10"), fixture.IPs("198.51.100.10")
	vk := func(addr string, port uint16) VirtualKey {
		return VirtualKey{Addr: fixture.IP(addr), Port: port, Protocol: inet.TCP}
	}
	external := []VirtualKey{vk("192.168.0.10", 30080), vk("192.0.2.10", 80), vk("198.51.100.10", 80)}
	for _, tc := range []struct {
		endpoints         []model.Endpoint
		external, cluster []string
	}{
		{[]model.Endpoint{remote}, []string{"10.244.1.5"}, nil},
		{[]model.Endpoint{remote, local}, []string{"10.244.0.5"}, []string{"10.244.0.5"}},
	} {
		svc.Endpoints = tc.endpoints
		k := Build(&model.State{Node: fixture.Node(), Services: []model.ServicePort{svc}}, nftrules.Render).Kernel
		addrs := func(key VirtualKey) []string {
			if _, ok := k.Virtual[key]; !ok {
				t.Fatalf("no virtual server %s", key)
			}
			var out []string
			for _, r := range k.Reals[key] {
				out = append(out, r.Addr.String())
			}
			return out
		}
		for _, key := range external {
			if got := addrs(key); !slices.Equal(got, tc.external) {
				t.Errorf("endpoints %v: %s has real servers %v, want %v", tc.endpoints, key, got, tc.external)
			}
		}
		if got := addrs(vk("10.96.0.10", 80)); !slices.Equal(got, tc.cluster) {
			t.Errorf("endpoints %v: the cluster IP has real servers %v, want %v", tc.endpoints, got, tc.cluster)
		}
	}
}
