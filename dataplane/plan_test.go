package dataplane

import (
	"flag"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden plans under testdata/plans")

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func ips(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, ip(a))
	}
	return out
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func ready(addr string, port uint16, node string) model.Endpoint {
	return model.Endpoint{Addr: ip(addr), Port: port, Ready: true, Serving: true, NodeName: node}
}

func testNode() model.Node {
	return model.Node{
		Name:          "node-a",
		Zone:          "zone-a",
		Addresses:     ips("192.168.0.10", "fd00:1::10"),
		ClusterCIDRs:  prefixes("10.244.0.0/16", "fd00:244::/64"),
		MasqueradeBit: 14,
	}
}

func svc(ns, name, port string, proto model.Protocol, svcPort uint16, clusterIPs ...string) model.ServicePort {
	return model.ServicePort{
		Name:       model.ServicePortName{Namespace: ns, Name: name, Port: port},
		Protocol:   proto,
		Port:       svcPort,
		ClusterIPs: ips(clusterIPs...),
	}
}

// shapes is one model per service shape; each has a golden plan from empty.
func shapes() map[string][]model.ServicePort {
	web := svc("default", "web", "http", model.TCP, 80, "10.96.0.20")
	web.Endpoints = []model.Endpoint{ready("10.244.1.5", 8080, "node-a"), ready("10.244.2.7", 8080, "node-b")}

	nodePort := web
	nodePort.NodePort = 30080

	lb := nodePort
	lb.LoadBalancerIPs = ips("203.0.113.10")

	lbRanges := lb
	lbRanges.LoadBalancerSourceRanges = prefixes("198.51.100.0/24", "192.168.0.0/24")

	external := web
	external.ExternalIPs = ips("198.51.100.50")

	affinity := web
	affinity.SessionAffinity = 3 * time.Hour

	localLB := lb
	localLB.ExternalPolicy = model.PolicyLocal
	localLB.HealthCheckNodePort = 32000

	internalLocal := web
	internalLocal.InternalPolicy = model.PolicyLocal

	terminating := web
	terminating.Endpoints = []model.Endpoint{
		{Addr: ip("10.244.1.5"), Port: 8080, Serving: true, Terminating: true, NodeName: "node-a"},
		{Addr: ip("10.244.2.7"), Port: 8080, Terminating: true, NodeName: "node-b"},
	}

	dual := svc("default", "dual", "", model.TCP, 443, "10.96.0.30", "fd00:96::30")
	dual.NodePort = 30443
	dual.Endpoints = []model.Endpoint{ready("10.244.1.9", 8443, "node-a"), ready("fd00:244::9", 8443, "node-a")}

	sctp := svc("default", "signal", "", model.SCTP, 3868, "10.96.0.40")
	sctp.NodePort = 31868
	sctp.Endpoints = []model.Endpoint{ready("10.244.2.3", 3868, "node-b")}

	udp := svc("kube-system", "kube-dns", "dns", model.UDP, 53, "10.96.0.10")
	udp.NodePort = 30053
	udp.Endpoints = []model.Endpoint{ready("10.244.1.2", 53, "node-a")}

	hints := web
	hints.Endpoints = []model.Endpoint{ready("10.244.1.5", 8080, "node-a"), ready("10.244.2.7", 8080, "node-b")}
	hints.Endpoints[0].Hints = &model.Hints{ForZones: []string{"zone-a"}}
	hints.Endpoints[1].Hints = &model.Hints{ForZones: []string{"zone-b"}}

	return map[string][]model.ServicePort{
		"clusterip":           {web},
		"nodeport":            {nodePort},
		"loadbalancer":        {lb},
		"loadbalancer-ranges": {lbRanges},
		"externalip":          {external},
		"affinity":            {affinity},
		"etp-local":           {localLB},
		"itp-local":           {internalLocal},
		"terminating":         {terminating},
		"dualstack":           {dual},
		"sctp":                {sctp},
		"udp":                 {udp},
		"topology-hints":      {hints},
	}
}

func TestGoldenPlans(t *testing.T) {
	for name, services := range shapes() {
		t.Run(name, func(t *testing.T) {
			d := Build(&model.State{Node: testNode(), Services: services})
			if len(d.Errors) > 0 {
				t.Fatalf("errors: %v", d.Errors)
			}
			got := Diff(NewKernelState(), d.Kernel, d.Services, FullScope, Drain{}).String()
			// The sets are the same for every model; leave them out.
			var lines []string
			for _, l := range strings.SplitAfter(got, "\n") {
				if !strings.HasPrefix(l, "ipset create ") {
					lines = append(lines, l)
				}
			}
			got = strings.Join(lines, "")
			golden := filepath.Join("testdata", "plans", name+".txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./dataplane -update)", err)
			}
			if got != string(want) {
				t.Errorf("plan differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}
